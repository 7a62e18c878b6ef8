//! OpenAI's request and response shapes, as the official clients send and
//! parse them: plain data and pure functions, no I/O.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::runner::StopReason;
use crate::runner::batch::TokenLogprob;
use crate::runner::template::Message;

/// A request the server refuses, with the HTTP status and OpenAI's error
/// `type` and `code`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// One line for the client.
    pub message: String,
    /// OpenAI's error type (`invalid_request_error`, `server_error`, …).
    pub kind: &'static str,
    /// OpenAI's error code, when there is one.
    pub code: Option<&'static str>,
}

impl ApiError {
    /// 400: a request the server cannot take as it is.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            message: message.into(),
            kind: "invalid_request_error",
            code: None,
        }
    }

    /// The error body (`{"error": {...}}`).
    #[must_use]
    pub fn body(&self) -> Value {
        json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": null,
                "code": self.code,
            }
        })
    }
}

/// `stop`: one string or a list.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Stop {
    One(String),
    Many(Vec<String>),
}

/// A message's `content`: a string, or an array of parts.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Debug, Clone, Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
struct ChatMessage {
    role: String,
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
    #[serde(default)]
    tool_call_id: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

/// The fields both endpoints share.
#[derive(Debug, Clone, Deserialize)]
struct Common {
    #[serde(default)]
    max_tokens: Option<i64>,
    #[serde(default)]
    max_completion_tokens: Option<i64>,
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    top_p: Option<f64>,
    #[serde(default)]
    seed: Option<i64>,
    #[serde(default)]
    stop: Option<Stop>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    n: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
struct ChatBody {
    messages: Vec<ChatMessage>,
    #[serde(default)]
    logprobs: Option<bool>,
    #[serde(default)]
    top_logprobs: Option<i64>,
    #[serde(default)]
    reasoning_format: Option<String>,
    // Schemas stay as sent: the converter writes an object's properties in
    // the schema's order, and serde_json's map would sort them.
    #[serde(default)]
    response_format: Option<Box<RawValue>>,
    #[serde(default)]
    tools: Option<Box<RawValue>>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    parallel_tool_calls: Option<bool>,
    #[serde(default)]
    functions: Option<Value>,
    #[serde(flatten)]
    common: Common,
}

/// A legacy completion's `prompt`: a string, or a list of one.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Prompt {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Clone, Deserialize)]
struct CompletionBody {
    prompt: Prompt,
    #[serde(default)]
    echo: Option<bool>,
    #[serde(default)]
    logprobs: Option<i64>,
    #[serde(flatten)]
    common: Common,
}

/// What either endpoint asks for, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// `max_tokens` (or `max_completion_tokens`); `None`: the rest of the slot.
    pub max_tokens: Option<u32>,
    /// Temperature (OpenAI's default 1).
    pub temperature: f32,
    /// Nucleus sampling (OpenAI's default 1: off).
    pub top_p: f32,
    /// Seed, when given.
    pub seed: Option<u32>,
    /// Stop strings (not returned).
    pub stop: Vec<String>,
    /// Server-sent events.
    pub stream: bool,
    /// A last chunk with the token counts.
    pub include_usage: bool,
    /// Each token's log-probability and this many alternatives; `None`:
    /// not asked.
    pub logprobs: Option<usize>,
    /// The grammar the answer keeps to (from `response_format`; set by the
    /// server once it has checked and converted the schema).
    pub grammar: Option<String>,
    /// The grammar is lazy, from the first of these (a tool call's tag).
    pub grammar_triggers: Vec<String>,
}

/// A chat completion request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The conversation.
    pub messages: Vec<Message>,
    /// Sampling and streaming.
    pub params: Params,
    /// Split `<think>…</think>` into `reasoning_content` where the template
    /// thinks (`reasoning_format` `auto`/`deepseek`, the default); `false`:
    /// `none`.
    pub split_reasoning: bool,
    /// What the answer must be (`response_format`).
    pub format: AnswerFormat,
    /// What the model may or must call (`tools`, `tool_choice`).
    pub tools: Option<Tools>,
}

/// A chat answer's `response_format`.
#[derive(Debug, Clone, PartialEq)]
pub enum AnswerFormat {
    /// Free text (`text`, or none given).
    Text,
    /// Any JSON object (`json_object`).
    JsonObject,
    /// JSON valid under this schema (`json_schema`), as sent.
    JsonSchema(Schema),
}

/// A JSON schema: as sent (its properties in the client's order, for the
/// converter) and parsed (for the checks).
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    /// The schema's JSON text, as the client wrote it.
    pub text: String,
    /// The same, parsed.
    pub value: Value,
}

impl Schema {
    fn of(raw: &RawValue) -> Result<Schema, serde_json::Error> {
        Ok(Schema {
            text: raw.get().to_string(),
            value: serde_json::from_str(raw.get())?,
        })
    }

    fn from_value(value: Value) -> Schema {
        Schema {
            text: value.to_string(),
            value,
        }
    }
}

impl AnswerFormat {
    /// The schema the answer must follow; `None` for free text.
    #[must_use]
    pub fn schema(&self) -> Option<Schema> {
        match self {
            AnswerFormat::Text => None,
            AnswerFormat::JsonObject => Some(Schema::from_value(json!({"type": "object"}))),
            AnswerFormat::JsonSchema(s) => Some(s.clone()),
        }
    }
}

/// `response_format`: `{"type": "text" | "json_object"}` or
/// `{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`.
fn answer_format(raw: Option<&RawValue>) -> Result<AnswerFormat, ApiError> {
    #[derive(Deserialize)]
    struct Format<'a> {
        #[serde(rename = "type")]
        kind: Option<String>,
        #[serde(borrow, default)]
        json_schema: Option<Inner<'a>>,
    }
    #[derive(Deserialize)]
    struct Inner<'a> {
        #[serde(borrow, default)]
        schema: Option<&'a RawValue>,
    }
    let bad = |m: String| ApiError::bad_request(m);
    let Some(raw) = raw.filter(|r| r.get() != "null") else {
        return Ok(AnswerFormat::Text);
    };
    let f: Format<'_> =
        serde_json::from_str(raw.get()).map_err(|e| bad(format!("response_format: {e}")))?;
    match f.kind.as_deref() {
        Some("text") => Ok(AnswerFormat::Text),
        Some("json_object") => Ok(AnswerFormat::JsonObject),
        Some("json_schema") => match f.json_schema {
            None => Err(bad("response_format.json_schema: missing".into())),
            // OpenAI's schema is optional: then any JSON object.
            Some(Inner { schema: None }) => Ok(AnswerFormat::JsonObject),
            Some(Inner { schema: Some(s) }) if s.get() == "null" => Ok(AnswerFormat::JsonObject),
            Some(Inner { schema: Some(s) }) => match Schema::of(s) {
                Ok(s) if s.value.is_object() => Ok(AnswerFormat::JsonSchema(s)),
                _ => Err(bad(
                    "response_format.json_schema.schema: a JSON schema object".into(),
                )),
            },
        },
        other => Err(bad(format!(
            "response_format.type = {}: text, json_object or json_schema",
            other.map_or_else(|| "missing".to_string(), |t| format!("{t:?}"))
        ))),
    }
}

/// What the request lets the model call.
#[derive(Debug, Clone, PartialEq)]
pub struct Tools {
    /// OpenAI's `tools` list, for the template to render.
    pub list: Value,
    /// The functions the model may call now: every one, or the one
    /// `tool_choice` names; each with its parameters' schema.
    pub callable: Vec<(String, Schema)>,
    /// The model must call (`required` or a named function) rather than may
    /// (`auto`).
    pub forced: bool,
    /// More than one call in an answer (`parallel_tool_calls`, default true).
    pub parallel: bool,
}

/// Most tools in one request.
pub const MAX_TOOLS: usize = 128;

/// `tools`, `tool_choice` and `parallel_tool_calls`: `None` when there are
/// no tools or the choice is `none` (a plain chat).
fn tools_of(
    raw: Option<&RawValue>,
    choice: Option<&Value>,
    parallel: Option<bool>,
) -> Result<Option<Tools>, ApiError> {
    #[derive(Deserialize)]
    struct Tool<'a> {
        #[serde(rename = "type")]
        kind: String,
        #[serde(borrow)]
        function: Function<'a>,
    }
    #[derive(Deserialize)]
    struct Function<'a> {
        name: String,
        #[serde(borrow, default)]
        parameters: Option<&'a RawValue>,
    }
    let bad = |m: String| ApiError::bad_request(m);
    let Some(raw) = raw.filter(|r| r.get() != "null") else {
        return Ok(None);
    };
    let tools: Vec<Tool<'_>> =
        serde_json::from_str(raw.get()).map_err(|e| bad(format!("tools: {e}")))?;
    if tools.len() > MAX_TOOLS {
        return Err(bad(format!(
            "tools: {} tools; at most {MAX_TOOLS}",
            tools.len()
        )));
    }
    let mut all: Vec<(String, Schema)> = Vec::with_capacity(tools.len());
    for (i, t) in tools.iter().enumerate() {
        if t.kind != "function" {
            return Err(bad(format!("tools[{i}].type = {:?}: function", t.kind)));
        }
        let name = &t.function.name;
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(bad(format!(
                "tools[{i}].function.name = {name:?}: 1 to 64 letters, digits, _ or -"
            )));
        }
        if all.iter().any(|(n, _)| n == name) {
            return Err(bad(format!(
                "tools[{i}].function.name = {name:?}: named twice"
            )));
        }
        let params = match t.function.parameters {
            None => Schema::from_value(json!({"type": "object", "properties": {}})),
            Some(p) => Schema::of(p)
                .ok()
                .filter(|s| s.value.is_object())
                .ok_or_else(|| {
                    bad(format!(
                        "tools[{i}].function.parameters: a JSON schema object"
                    ))
                })?,
        };
        all.push((name.clone(), params));
    }
    let (callable, forced) = match choice {
        None => (all, false),
        Some(Value::String(c)) => match c.as_str() {
            "none" => return Ok(None),
            "auto" => (all, false),
            "required" => (all, true),
            other => {
                return Err(bad(format!(
                    "tool_choice = {other:?}: none, auto, required or a function by name"
                )));
            }
        },
        Some(v) => {
            let Some(name) = v.pointer("/function/name").and_then(Value::as_str) else {
                return Err(bad("tool_choice: a function needs function.name".into()));
            };
            let one: Vec<_> = all.into_iter().filter(|(n, _)| n == name).collect();
            if one.is_empty() {
                return Err(bad(format!(
                    "tool_choice names {name:?}, which is not among the tools"
                )));
            }
            (one, true)
        }
    };
    if callable.is_empty() {
        return Ok(None);
    }
    let list: Value = serde_json::from_str(raw.get()).map_err(|e| bad(format!("tools: {e}")))?;
    Ok(Some(Tools {
        list,
        callable,
        forced,
        parallel: parallel.unwrap_or(true),
    }))
}

/// An assistant turn's `tool_calls` as templates take them: each
/// `function.arguments` (OpenAI's JSON text) parsed into an object.
fn template_tool_calls(i: usize, calls: Vec<Value>) -> Result<Vec<Value>, ApiError> {
    calls
        .into_iter()
        .enumerate()
        .map(|(j, mut c)| {
            let here = format!("messages[{i}].tool_calls[{j}]");
            if c.pointer("/function/name")
                .and_then(Value::as_str)
                .is_none()
            {
                return Err(ApiError::bad_request(format!(
                    "{here}: function.name missing"
                )));
            }
            if let Some(args) = c.pointer_mut("/function/arguments")
                && let Some(text) = args.as_str()
            {
                *args = serde_json::from_str(text).map_err(|e| {
                    ApiError::bad_request(format!("{here}.function.arguments: not JSON ({e})"))
                })?;
            }
            Ok(c)
        })
        .collect()
}

/// A legacy completion request.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletionRequest {
    /// The prompt, sent as it is.
    pub prompt: String,
    /// Sampling and streaming.
    pub params: Params,
}

fn parse_json<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(if e.is_syntax() || e.is_eof() {
            format!("the body is not valid JSON: {e}")
        } else {
            format!("invalid request: {e}")
        })
    })
}

/// Most inputs one embeddings request may carry (OpenAI's limit).
pub const MAX_EMBEDDING_INPUTS: usize = 2048;

/// One input of `/v1/embeddings`: text, or token ids.
#[derive(Debug, Clone, PartialEq)]
pub enum EmbeddingInput {
    /// Text, tokenized as a prompt is (with the model's BOS).
    Text(String),
    /// Token ids as sent.
    Tokens(Vec<i64>),
}

/// A checked `/v1/embeddings` request.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingRequest {
    /// The inputs, in order.
    pub inputs: Vec<EmbeddingInput>,
    /// `encoding_format: "base64"`: little-endian float32, base64.
    pub base64: bool,
    /// `dimensions`, when given.
    pub dimensions: Option<u64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum InputBody {
    One(String),
    Many(Vec<String>),
    Tokens(Vec<i64>),
    ManyTokens(Vec<Vec<i64>>),
}

#[derive(Deserialize)]
struct EmbeddingBody {
    input: InputBody,
    #[serde(default)]
    encoding_format: Option<String>,
    #[serde(default)]
    dimensions: Option<u64>,
}

/// Parse and check a `/v1/embeddings` body (unknown fields ignored).
///
/// # Errors
/// 400 for a body that is not such a request, no input, an empty input,
/// too many inputs, or an encoding other than float and base64.
pub fn embedding_request(body: &[u8]) -> Result<EmbeddingRequest, ApiError> {
    let b: EmbeddingBody = parse_json(body)?;
    let inputs: Vec<EmbeddingInput> = match b.input {
        InputBody::One(s) => vec![EmbeddingInput::Text(s)],
        InputBody::Many(v) => v.into_iter().map(EmbeddingInput::Text).collect(),
        InputBody::Tokens(t) => vec![EmbeddingInput::Tokens(t)],
        InputBody::ManyTokens(v) => v.into_iter().map(EmbeddingInput::Tokens).collect(),
    };
    if inputs.is_empty() {
        return Err(ApiError::bad_request("input: no input"));
    }
    if inputs.len() > MAX_EMBEDDING_INPUTS {
        return Err(ApiError::bad_request(format!(
            "input: {} inputs; at most {MAX_EMBEDDING_INPUTS} per request",
            inputs.len()
        )));
    }
    if let Some(i) = inputs.iter().position(|x| match x {
        EmbeddingInput::Text(s) => s.is_empty(),
        EmbeddingInput::Tokens(t) => t.is_empty(),
    }) {
        return Err(ApiError::bad_request(format!("input[{i}]: empty")));
    }
    let base64 = match b.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "encoding_format {other:?}: \"float\" or \"base64\""
            )));
        }
    };
    Ok(EmbeddingRequest {
        inputs,
        base64,
        dimensions: b.dimensions,
    })
}

/// A vector as OpenAI's base64 encoding: its float32s, little-endian.
#[must_use]
pub fn base64_floats(v: &[f32]) -> String {
    use base64::Engine as _;
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Most stop strings a request may give.
pub const MAX_STOPS: usize = 16;

impl Common {
    fn params(self) -> Result<Params, ApiError> {
        if let Some(n) = self.n
            && n != 1
        {
            return Err(ApiError::bad_request(format!(
                "n = {n}: this server returns one choice per request (n = 1)"
            )));
        }
        let max_tokens = match self.max_completion_tokens.or(self.max_tokens) {
            None => None,
            Some(n) if n >= 1 => Some(u32::try_from(n).unwrap_or(u32::MAX)),
            Some(n) => {
                return Err(ApiError::bad_request(format!(
                    "max_tokens = {n}: must be at least 1"
                )));
            }
        };
        let temperature = self.temperature.unwrap_or(1.0);
        if !(0.0..=2.0).contains(&temperature) {
            return Err(ApiError::bad_request(format!(
                "temperature = {temperature}: must be between 0 and 2"
            )));
        }
        let top_p = self.top_p.unwrap_or(1.0);
        if !(top_p > 0.0 && top_p <= 1.0) {
            return Err(ApiError::bad_request(format!(
                "top_p = {top_p}: must be more than 0 and at most 1"
            )));
        }
        let stop = match self.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s],
            Some(Stop::Many(v)) => v,
        };
        if stop.len() > MAX_STOPS {
            return Err(ApiError::bad_request(format!(
                "stop: {} strings; at most {MAX_STOPS}",
                stop.len()
            )));
        }
        if stop.iter().any(String::is_empty) {
            return Err(ApiError::bad_request("stop: an empty string"));
        }
        let stream = self.stream.unwrap_or(false);
        let include_usage = self
            .stream_options
            .and_then(|o| o.include_usage)
            .unwrap_or(false);
        Ok(Params {
            max_tokens,
            // Both fit f32: checked ranges.
            #[allow(clippy::cast_possible_truncation)]
            temperature: temperature as f32,
            #[allow(clippy::cast_possible_truncation)]
            top_p: top_p as f32,
            // OpenAI's seed is any integer; llama.cpp's a u32.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            seed: self.seed.map(|s| s as u32),
            stop,
            stream,
            include_usage,
            logprobs: None,
            grammar: None,
            grammar_triggers: Vec::new(),
        })
    }
}

/// Most `top_logprobs` on chat completions (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: i64 = 20;
/// Most `logprobs` on legacy completions (OpenAI's limit).
pub const MAX_LEGACY_LOGPROBS: i64 = 5;

/// Parse and check a chat completion body.
///
/// # Errors
/// Bad JSON, missing or mistyped fields, values out of range, roles or
/// content parts the server cannot take.
pub fn chat_request(body: &[u8]) -> Result<ChatRequest, ApiError> {
    let b: ChatBody = parse_json(body)?;
    if b.messages.is_empty() {
        return Err(ApiError::bad_request("messages: at least one message"));
    }
    let mut messages = Vec::with_capacity(b.messages.len());
    for (i, m) in b.messages.into_iter().enumerate() {
        let role = match m.role.as_str() {
            "system" | "developer" => "system",
            "user" => "user",
            "assistant" => "assistant",
            "tool" => "tool",
            other => {
                return Err(ApiError::bad_request(format!(
                    "messages[{i}].role = {other:?}: system, developer, user, assistant or tool"
                )));
            }
        };
        let tool_calls = match m.tool_calls {
            Some(calls) if role == "assistant" && !calls.is_empty() => {
                Some(template_tool_calls(i, calls)?)
            }
            Some(calls) if !calls.is_empty() => {
                return Err(ApiError::bad_request(format!(
                    "messages[{i}]: tool_calls on a {role} message"
                )));
            }
            _ => None,
        };
        let text = match m.content {
            None => String::new(),
            Some(Content::Text(t)) => t,
            Some(Content::Parts(parts)) => {
                let mut text = String::new();
                for (j, p) in parts.into_iter().enumerate() {
                    match (p.kind.as_str(), p.text) {
                        ("text", Some(t)) => text.push_str(&t),
                        (kind, _) => {
                            return Err(ApiError::bad_request(format!(
                                "messages[{i}].content[{j}]: a {kind:?} part; this server takes text parts only"
                            )));
                        }
                    }
                }
                text
            }
        };
        let mut message = Message::new(role, text);
        message.tool_calls = tool_calls;
        message.tool_call_id = m.tool_call_id.filter(|_| role == "tool");
        messages.push(message);
    }
    let mut params = b.common.params()?;
    params.logprobs = match (b.logprobs.unwrap_or(false), b.top_logprobs) {
        (_, Some(n)) if !(0..=MAX_TOP_LOGPROBS).contains(&n) => {
            return Err(ApiError::bad_request(format!(
                "top_logprobs = {n}: must be between 0 and {MAX_TOP_LOGPROBS}"
            )));
        }
        (false, Some(n)) if n > 0 => {
            return Err(ApiError::bad_request("top_logprobs needs logprobs = true"));
        }
        (false, _) => None,
        (true, n) => Some(usize::try_from(n.unwrap_or(0)).unwrap_or(0)),
    };
    let split_reasoning = match b.reasoning_format.as_deref() {
        None | Some("auto" | "deepseek") => true,
        Some("none") => false,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "reasoning_format = {other:?}: auto, deepseek or none"
            )));
        }
    };
    if b.functions.as_ref().is_some_and(|f| !f.is_null()) {
        return Err(ApiError::bad_request(
            "functions: OpenAI's deprecated field; send tools",
        ));
    }
    let tools = tools_of(
        b.tools.as_deref(),
        b.tool_choice.as_ref(),
        b.parallel_tool_calls,
    )?;
    let format = answer_format(b.response_format.as_deref())?;
    if tools.is_some() && format != AnswerFormat::Text {
        return Err(ApiError::bad_request(
            "response_format with tools: one grammar at a time here; send one or the other",
        ));
    }
    Ok(ChatRequest {
        messages,
        params,
        split_reasoning,
        format,
        tools,
    })
}

/// Parse and check a legacy completion body.
///
/// # Errors
/// As [`chat_request`]; a list of several prompts, or `echo`.
pub fn completion_request(body: &[u8]) -> Result<CompletionRequest, ApiError> {
    let b: CompletionBody = parse_json(body)?;
    if b.echo == Some(true) {
        return Err(ApiError::bad_request("echo is not supported"));
    }
    let prompt = match b.prompt {
        Prompt::One(p) => p,
        Prompt::Many(mut v) if v.len() == 1 => v.remove(0),
        Prompt::Many(v) => {
            return Err(ApiError::bad_request(format!(
                "prompt: a list of {} prompts; send one per request",
                v.len()
            )));
        }
    };
    if prompt.is_empty() {
        return Err(ApiError::bad_request("prompt: empty"));
    }
    let mut params = b.common.params()?;
    params.logprobs = match b.logprobs {
        None => None,
        Some(n) if (0..=MAX_LEGACY_LOGPROBS).contains(&n) => Some(usize::try_from(n).unwrap_or(0)),
        Some(n) => {
            return Err(ApiError::bad_request(format!(
                "logprobs = {n}: must be between 0 and {MAX_LEGACY_LOGPROBS}"
            )));
        }
    };
    Ok(CompletionRequest { prompt, params })
}

/// OpenAI's `finish_reason` for how a generation ended.
#[must_use]
pub fn finish_reason(r: StopReason) -> &'static str {
    match r {
        StopReason::MaxTokens | StopReason::ContextFull => "length",
        // An interrupted generation (the server shutting down) ends the way
        // a stop does: the text so far is the answer.
        StopReason::EndOfGeneration | StopReason::StopString | StopReason::Interrupted => "stop",
    }
}

/// Token counts of one answer, for `usage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt: usize,
    /// Of those, the ones found in the slot's cache (not evaluated again).
    pub cached: usize,
    /// Tokens generated.
    pub completion: usize,
}

/// `usage`, with OpenAI's `prompt_tokens_details.cached_tokens`.
#[must_use]
pub fn usage(u: Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt,
        "completion_tokens": u.completion,
        "total_tokens": u.prompt + u.completion,
        "prompt_tokens_details": {"cached_tokens": u.cached},
    })
}

/// Which endpoint, for the response shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Completion,
}

/// The fields every response object starts with.
#[derive(Debug, Clone)]
pub struct Header {
    /// `chatcmpl-…` or `cmpl-…`.
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    /// The model's name.
    pub model: String,
    /// The endpoint.
    pub kind: Kind,
}

impl Header {
    fn object(&self, chunk: bool) -> &'static str {
        match (self.kind, chunk) {
            (Kind::Chat, false) => "chat.completion",
            (Kind::Chat, true) => "chat.completion.chunk",
            (Kind::Completion, _) => "text_completion",
        }
    }

    /// The whole answer.
    #[must_use]
    pub fn complete(&self, text: &str, reason: StopReason, counts: Usage) -> Value {
        let choice = match self.kind {
            Kind::Chat => json!({
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": null,
                "finish_reason": finish_reason(reason),
            }),
            Kind::Completion => json!({
                "index": 0,
                "text": text,
                "logprobs": null,
                "finish_reason": finish_reason(reason),
            }),
        };
        json!({
            "id": self.id,
            "object": self.object(false),
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": usage(counts),
        })
    }

    /// A streamed chunk: the first (`role` set, chat only), one with text,
    /// or the last (`finish` set, empty delta).
    #[must_use]
    pub fn chunk(&self, text: Option<&str>, first: bool, finish: Option<StopReason>) -> Value {
        let reason = finish.map(finish_reason);
        let choice = match self.kind {
            Kind::Chat => {
                let mut delta = serde_json::Map::new();
                if first {
                    delta.insert("role".into(), json!("assistant"));
                }
                if let Some(t) = text {
                    delta.insert("content".into(), json!(t));
                }
                json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": reason})
            }
            Kind::Completion => json!({
                "index": 0,
                "text": text.unwrap_or(""),
                "logprobs": null,
                "finish_reason": reason,
            }),
        };
        json!({
            "id": self.id,
            "object": self.object(true),
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        })
    }

    /// `logprobs` for these tokens in this endpoint's shape: chat's
    /// `content` list, or the legacy `tokens`/`token_logprobs`/
    /// `top_logprobs`/`text_offset` lists (`offset`: the characters of the
    /// answer before the first of them).
    #[must_use]
    pub fn logprobs(&self, tokens: &[TokenLogprob], offset: usize) -> Value {
        match self.kind {
            Kind::Chat => {
                let content: Vec<Value> = tokens
                    .iter()
                    .map(|t| {
                        let top: Vec<Value> = t
                            .top
                            .iter()
                            .map(|(s, b, l)| json!({"token": s, "logprob": l, "bytes": b}))
                            .collect();
                        json!({"token": t.token, "logprob": t.logprob, "bytes": t.bytes, "top_logprobs": top})
                    })
                    .collect();
                json!({"content": content})
            }
            Kind::Completion => {
                let mut at = offset;
                let mut offsets = Vec::with_capacity(tokens.len());
                for t in tokens {
                    offsets.push(at);
                    at += t.token.chars().count();
                }
                let top: Vec<Value> = tokens
                    .iter()
                    .map(|t| {
                        let m: serde_json::Map<String, Value> = t
                            .top
                            .iter()
                            .map(|(s, _, l)| (s.clone(), json!(l)))
                            .collect();
                        Value::Object(m)
                    })
                    .collect();
                json!({
                    "tokens": tokens.iter().map(|t| t.token.clone()).collect::<Vec<_>>(),
                    "token_logprobs": tokens.iter().map(|t| t.logprob).collect::<Vec<_>>(),
                    "top_logprobs": top,
                    "text_offset": offsets,
                })
            }
        }
    }

    /// The usage chunk (`stream_options.include_usage`): no choices.
    #[must_use]
    pub fn usage_chunk(&self, counts: Usage) -> Value {
        json!({
            "id": self.id,
            "object": self.object(true),
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage(counts),
        })
    }
}

/// Put `logprobs` into a response's (or chunk's) only choice.
pub fn set_logprobs(response: &mut Value, logprobs: Value) {
    if let Some(c) = response.pointer_mut("/choices/0/logprobs") {
        *c = logprobs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedding_inputs_come_as_text_lists_or_tokens_and_bad_ones_are_named() {
        let r = embedding_request(br#"{"input":"hi","model":"m","user":"u"}"#).expect("valid");
        assert_eq!(r.inputs, vec![EmbeddingInput::Text("hi".into())]);
        assert!(!r.base64 && r.dimensions.is_none());
        let r =
            embedding_request(br#"{"input":["a","b"],"encoding_format":"base64"}"#).expect("valid");
        assert_eq!(r.inputs.len(), 2);
        assert!(r.base64);
        let r = embedding_request(br#"{"input":[[1,2],[3]],"dimensions":8}"#).expect("valid");
        assert_eq!(r.inputs[1], EmbeddingInput::Tokens(vec![3]));
        assert_eq!(r.dimensions, Some(8));
        for (body, words) in [
            (&br#"{"input":[]}"#[..], "no input"),
            (br#"{"input":["a",""]}"#, "input[1]: empty"),
            (
                br#"{"input":"a","encoding_format":"hex"}"#,
                "encoding_format",
            ),
            (br#"{"model":"m"}"#, "input"),
        ] {
            let e = embedding_request(body).expect_err("refused");
            assert_eq!(e.status, 400);
            assert!(e.message.contains(words), "{}: {}", words, e.message);
        }
        let many = format!(r#"{{"input":[{}]}}"#, vec!["\"a\""; 2049].join(","));
        let e = embedding_request(many.as_bytes()).expect_err("too many");
        assert!(e.message.contains("2049 inputs"), "{}", e.message);
    }

    #[test]
    fn base64_embeddings_are_little_endian_float32() {
        // 1.0f32 is 0x3f800000: bytes 00 00 80 3f.
        assert_eq!(base64_floats(&[1.0]), "AACAPw==");
        assert_eq!(base64_floats(&[]), "");
    }

    #[test]
    fn a_minimal_chat_request_takes_openai_s_defaults() {
        let r = chat_request(br#"{"model":"x","messages":[{"role":"user","content":"hi"}]}"#)
            .expect("valid");
        assert_eq!(r.messages, vec![Message::user("hi")]);
        assert_eq!(r.params.temperature, 1.0);
        assert_eq!(r.params.top_p, 1.0);
        assert_eq!(r.params.max_tokens, None);
        assert!(!r.params.stream);
    }

    #[test]
    fn text_parts_are_joined_and_developer_is_system() {
        let r = chat_request(
            br#"{"messages":[{"role":"developer","content":"be brief"},
                {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
                "max_completion_tokens":5,"stop":"x","stream":true,
                "stream_options":{"include_usage":true},"seed":-1}"#,
        )
        .expect("valid");
        assert_eq!(
            r.messages,
            vec![Message::system("be brief"), Message::user("ab")]
        );
        assert_eq!(r.params.max_tokens, Some(5));
        assert_eq!(r.params.stop, vec!["x".to_string()]);
        assert!(r.params.stream && r.params.include_usage);
        assert_eq!(r.params.seed, Some(u32::MAX));
    }

    #[test]
    fn bad_requests_are_400_with_a_reason() {
        for (body, says) in [
            (&b"{"[..], "not valid JSON"),
            (br#"{"messages":[]}"#, "at least one message"),
            (br#"{"messages":"hi"}"#, "invalid request"),
            (br#"{"messages":[{"role":"wizard","content":"x"}]}"#, "role"),
            (
                br#"{"messages":[{"role":"user","content":"x","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}]}"#,
                "tool_calls on a user message",
            ),
            (
                br#"{"messages":[{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":"{x"}}]}]}"#,
                "arguments: not JSON",
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"a b"}}]}"#,
                "tools[0].function.name",
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}"#,
                "not among the tools",
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"response_format":{"type":"json_object"}}"#,
                "one grammar at a time",
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"functions":[{"name":"f"}]}"#,
                "send tools",
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":3}}}"#,
                "a JSON schema object",
            ),
            (
                br#"{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}"#,
                "text parts",
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"n":2}"#,
                "n = 2",
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"temperature":3}"#,
                "temperature",
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"top_p":0}"#,
                "top_p",
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"max_tokens":0}"#,
                "max_tokens",
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"stop":[""]}"#,
                "empty",
            ),
        ] {
            let e = chat_request(body).expect_err(says);
            assert_eq!(e.status, 400);
            assert!(e.message.contains(says), "{} ~ {says}", e.message);
        }
    }

    #[test]
    fn tools_and_schemas_keep_the_client_s_order_and_choice() {
        let req = chat_request(
            br#"{"messages":[{"role":"user","content":"x"}],
                 "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"string"}}}}},
                          {"type":"function","function":{"name":"g"}}],
                 "tool_choice":"required","parallel_tool_calls":false}"#,
        )
        .expect("valid");
        let tools = req.tools.expect("tools");
        assert!(tools.forced && !tools.parallel);
        assert_eq!(tools.callable.len(), 2);
        // As sent: z before a.
        assert!(tools.callable[0].1.text.find("\"z\"") < tools.callable[0].1.text.find("\"a\""));
        let none = chat_request(
            br#"{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}"#,
        )
        .expect("valid");
        assert_eq!(none.tools, None);
        let named = chat_request(
            br#"{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}"#,
        )
        .expect("valid")
        .tools
        .expect("tools");
        assert_eq!(named.callable.len(), 1);
        assert_eq!(named.callable[0].0, "g");
        // An assistant turn's calls reach the template with their arguments parsed.
        let turn = chat_request(
            br#"{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"q\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"2"}]}"#,
        )
        .expect("valid");
        assert_eq!(
            turn.messages[0].tool_calls.as_ref().expect("calls")[0]["function"]["arguments"]["q"],
            1
        );
        assert_eq!(turn.messages[1].tool_call_id.as_deref(), Some("c1"));
        let schema = chat_request(
            br#"{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"z":{},"a":{}}}}}}"#,
        )
        .expect("valid");
        let AnswerFormat::JsonSchema(s) = schema.format else {
            panic!("a schema");
        };
        assert!(s.text.find("\"z\"") < s.text.find("\"a\""));
    }

    #[test]
    fn logprobs_are_asked_in_range_or_refused() {
        let chat = |extra: &str| {
            chat_request(
                format!(r#"{{"messages":[{{"role":"user","content":"x"}}]{extra}}}"#).as_bytes(),
            )
        };
        assert_eq!(chat("").expect("valid").params.logprobs, None);
        assert_eq!(
            chat(r#","logprobs":true"#).expect("valid").params.logprobs,
            Some(0)
        );
        assert_eq!(
            chat(r#","logprobs":true,"top_logprobs":20"#)
                .expect("valid")
                .params
                .logprobs,
            Some(20)
        );
        assert_eq!(
            chat(r#","logprobs":false,"top_logprobs":0"#)
                .expect("valid")
                .params
                .logprobs,
            None
        );
        for (extra, says) in [
            (r#","logprobs":true,"top_logprobs":21"#, "top_logprobs = 21"),
            (r#","logprobs":true,"top_logprobs":-1"#, "top_logprobs = -1"),
            (r#","top_logprobs":3"#, "needs logprobs"),
        ] {
            let e = chat(extra).expect_err(says);
            assert!(e.status == 400 && e.message.contains(says), "{e:?}");
        }
        let legacy =
            |n: &str| completion_request(format!(r#"{{"prompt":"a","logprobs":{n}}}"#).as_bytes());
        assert_eq!(legacy("0").expect("valid").params.logprobs, Some(0));
        assert_eq!(legacy("5").expect("valid").params.logprobs, Some(5));
        assert_eq!(legacy("null").expect("valid").params.logprobs, None);
        assert!(legacy("6").expect_err("6").message.contains("logprobs = 6"));
    }

    #[test]
    fn logprobs_take_each_endpoint_s_shape() {
        let lp = TokenLogprob {
            token: "hé".into(),
            bytes: "hé".as_bytes().to_vec(),
            logprob: -0.5,
            top: vec![
                ("hé".into(), "hé".as_bytes().to_vec(), -0.5),
                ("a".into(), b"a".to_vec(), -1.5),
            ],
        };
        let two = [lp.clone(), lp];
        let mut h = Header {
            id: "x".into(),
            created: 0,
            model: "m".into(),
            kind: Kind::Chat,
        };
        let c = h.logprobs(&two, 0);
        assert_eq!(c["content"][1]["token"], "hé");
        assert_eq!(c["content"][0]["bytes"], json!([104, 195, 169]));
        assert_eq!(c["content"][0]["top_logprobs"][1]["logprob"], -1.5);
        let mut v = h.chunk(Some("héhé"), false, None);
        set_logprobs(&mut v, c);
        assert_eq!(v["choices"][0]["logprobs"]["content"][0]["logprob"], -0.5);
        h.kind = Kind::Completion;
        let l = h.logprobs(&two, 3);
        assert_eq!(l["tokens"], json!(["hé", "hé"]));
        assert_eq!(l["token_logprobs"], json!([-0.5, -0.5]));
        assert_eq!(l["top_logprobs"][0], json!({"hé": -0.5, "a": -1.5}));
        // Characters of the answer before each token.
        assert_eq!(l["text_offset"], json!([3, 5]));
    }

    #[test]
    fn reasoning_format_is_auto_deepseek_or_none() {
        let chat = |f: &str| {
            chat_request(
                format!(
                    r#"{{"messages":[{{"role":"user","content":"x"}}],"reasoning_format":"{f}"}}"#
                )
                .as_bytes(),
            )
        };
        assert!(chat("auto").expect("valid").split_reasoning);
        assert!(chat("deepseek").expect("valid").split_reasoning);
        assert!(!chat("none").expect("valid").split_reasoning);
        assert!(
            chat("xml")
                .expect_err("xml")
                .message
                .contains("reasoning_format")
        );
    }

    #[test]
    fn completions_take_one_prompt() {
        let r = completion_request(br#"{"prompt":["once"],"max_tokens":3}"#).expect("valid");
        assert_eq!(r.prompt, "once");
        assert!(completion_request(br#"{"prompt":["a","b"]}"#).is_err());
        assert!(completion_request(br#"{"prompt":"a","echo":true}"#).is_err());
    }

    #[test]
    fn shapes_are_openai_s() {
        let h = Header {
            id: "chatcmpl-1".into(),
            created: 7,
            model: "m".into(),
            kind: Kind::Chat,
        };
        let counts = Usage {
            prompt: 3,
            cached: 1,
            completion: 2,
        };
        let v = h.complete("hi", StopReason::MaxTokens, counts);
        assert_eq!(v["object"], "chat.completion");
        assert_eq!(v["choices"][0]["message"]["content"], "hi");
        assert_eq!(v["choices"][0]["finish_reason"], "length");
        assert_eq!(v["usage"]["total_tokens"], 5);
        assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 1);
        let c = h.chunk(Some(""), true, None);
        assert_eq!(c["choices"][0]["delta"]["role"], "assistant");
        assert!(c["choices"][0]["finish_reason"].is_null());
        let last = h.chunk(None, false, Some(StopReason::StopString));
        assert_eq!(last["choices"][0]["finish_reason"], "stop");
        assert_eq!(last["choices"][0]["delta"], json!({}));
        assert_eq!(h.usage_chunk(counts)["choices"], json!([]));
    }
}
