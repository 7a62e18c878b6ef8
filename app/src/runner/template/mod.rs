//! Chat formatting: turning a conversation into the prompt text a model was
//! trained on.
//!
//! Three sources, in the order [`ChatFormat::resolve`] tries them:
//!
//! 1. What the user named with `--chat-template`: one of llama.cpp's built-in
//!    formats, one of our `assets/templates/*.jinja`, or a Jinja file.
//! 2. The model's own template (GGUF `tokenizer.chat_template`): llama.cpp's
//!    `llama_chat_apply_template` when it recognises the family (it matches
//!    markers in the text, it does not run Jinja), else the Jinja itself through
//!    minijinja, set up like Hugging Face's `apply_chat_template`.
//! 3. A fallback by architecture from `assets/templates/`, for files that
//!    carry no template (the demo model, Gemma 3 270M, is one).
//!
//! The rendered text never starts with the BOS token: llama.cpp's built-in
//! formats never write it, and a leading `bos_token` written by a Jinja
//! template is removed, because tokenizing with llama.cpp's `add_special`
//! adds BOS exactly when the model wants it (llama.cpp's own chat code does
//! the same).
//!
//! `llama` wraps llama.cpp's formatter, `jinja` the minijinja set-up and its
//! limits. A template that runs past one of those (it loops, recurses or
//! writes without end) is refused with one plain sentence, never replaced by
//! a fallback: such a template is broken or hostile, and the person running
//! it should choose another with `--chat-template` (or `run --raw`).

mod jinja;
mod llama;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use minijinja::Environment;
use serde::Serialize;

use jinja::{JinjaError, Runaway};

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text of the turn.
    pub content: String,
    /// An assistant turn's tool calls, as Hugging Face templates take them:
    /// `{"type": "function", "function": {"name", "arguments"}}` with the
    /// arguments an object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<serde_json::Value>>,
    /// A `tool` turn's answer is to this call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A message with any role.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Message {
        Message {
            role: role.into(),
            content: content.into(),
            tool_calls: None,
            tool_call_id: None,
        }
    }

    /// A `system` message.
    pub fn system(content: impl Into<String>) -> Message {
        Message::new("system", content)
    }

    /// A `user` message.
    pub fn user(content: impl Into<String>) -> Message {
        Message::new("user", content)
    }

    /// An `assistant` message.
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::new("assistant", content)
    }
}

/// What `--chat-template` asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum TemplateChoice {
    /// The model's own template, else a fallback by architecture.
    #[default]
    Auto,
    /// A llama.cpp built-in name (`chatml`, `llama3`, …) or an asset name;
    /// where both have a name, llama.cpp's is used (they write the same text).
    Name(String),
    /// A Jinja file.
    File(PathBuf),
}

impl TemplateChoice {
    /// Reads the `--chat-template` argument: nothing, `""` or `auto` is
    /// [`Auto`](TemplateChoice::Auto); a path that exists or ends in `.jinja`
    /// or `.j2` is a [`File`](TemplateChoice::File); anything else a
    /// [`Name`](TemplateChoice::Name).
    pub fn parse(arg: Option<&str>) -> TemplateChoice {
        match arg.map(str::trim) {
            None | Some("" | "auto") => TemplateChoice::Auto,
            Some(s) => {
                let path = Path::new(s);
                if path.is_file() || s.ends_with(".jinja") || s.ends_with(".j2") {
                    TemplateChoice::File(path.to_path_buf())
                } else {
                    TemplateChoice::Name(s.to_string())
                }
            }
        }
    }
}

/// One embedded asset: its name and `assets/templates/<name>.jinja`.
macro_rules! asset {
    ($name:literal) => {
        (
            $name,
            include_str!(concat!("../../../../assets/templates/", $name, ".jinja")),
        )
    };
}

/// Fallback templates, embedded so the binary needs no data files.
const ASSETS: &[(&str, &str)] = &[
    asset!("chatml"),
    asset!("gemma"),
    asset!("hermes"),
    asset!("llama3"),
    asset!("mistral"),
    asset!("phi3"),
];

/// The asset for an architecture (`general.architecture`) whose GGUF has no
/// template, and whether it is a real match rather than a guess.
fn fallback_for(arch: &str) -> (&'static str, bool) {
    match arch {
        "gemma" | "gemma2" | "gemma3" | "gemma3n" => ("gemma", true),
        "llama" => ("llama3", true),
        "phi3" | "phimoe" => ("phi3", true),
        a if a.starts_with("qwen") => ("chatml", true),
        a if a.starts_with("mistral") => ("mistral", true),
        _ => ("chatml", false),
    }
}

fn asset(name: &str) -> Option<&'static str> {
    ASSETS.iter().find(|(n, _)| *n == name).map(|(_, src)| *src)
}

/// Text that ends a turn in common formats; the ones a format really uses
/// become its [`ChatFormat::stop_strings`].
const END_MARKERS: &[&str] = &[
    "<|im_end|>",
    "<end_of_turn>",
    "<|eot_id|>",
    "<|end|>",
    "<|endoftext|>",
    "<|END_OF_TURN_TOKEN|>",
    "[|endofturn|]",
    "<|end_of_text|>",
    "<|return|>",
    "</s>",
];

/// How a format turns messages into text.
#[derive(Clone)]
enum Engine {
    /// `llama_chat_apply_template` with a built-in name or a template text it
    /// recognises.
    Llama(String),
    /// A Jinja environment holding the one template `name` (named after
    /// where it came from, so minijinja's errors say so); shared with the
    /// thread each render runs on.
    Jinja {
        env: Arc<Environment<'static>>,
        name: String,
    },
}

/// A resolved chat format: renders conversations and knows its turn ends.
#[derive(Clone)]
pub struct ChatFormat {
    engine: Engine,
    origin: String,
    bos: String,
    eos: String,
    /// The template drops or refuses system messages: fold them into the
    /// first user turn before rendering.
    fold_system: bool,
    stops: Vec<String>,
    /// The Jinja template that renders `tools`, when this format has one
    /// (a template recognised by llama.cpp is rendered by it without tools,
    /// so its Jinja text is kept apart for requests that bring tools).
    tools: Option<Engine>,
}

impl fmt::Debug for ChatFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatFormat")
            .field("describe", &self.describe())
            .field("stop_strings", &self.stops)
            .finish()
    }
}

impl ChatFormat {
    /// Chooses the format for a model.
    ///
    /// `gguf_template`: the GGUF `tokenizer.chat_template` if any; `arch`:
    /// `general.architecture`; `bos`/`eos`: the token texts (`<bos>`, `<eos>`)
    /// for templates that use `bos_token`/`eos_token`.
    ///
    /// # Errors
    /// An unknown name (the message lists the known ones), an unreadable or
    /// invalid Jinja file, or a named template that cannot render even a
    /// single user message.
    pub fn resolve(
        choice: &TemplateChoice,
        gguf_template: Option<&str>,
        arch: &str,
        bos: &str,
        eos: &str,
    ) -> Result<ChatFormat> {
        let make = |engine, origin: String| ChatFormat::new(engine, origin, bos, eos);
        match choice {
            TemplateChoice::Name(name) => {
                if llama::builtin_names().iter().any(|n| n == name) {
                    let mut format = make(
                        Engine::Llama(name.clone()),
                        format!("llama.cpp built-in '{name}'"),
                    )?;
                    // A plain chat is llama.cpp's own; the asset of the same
                    // name, where it renders tools (`llama3`), renders a
                    // request that brings them.
                    if let Some(src) = asset(name).filter(|src| src.contains("tools")) {
                        format.tools = jinja(&format!("assets/templates/{name}.jinja"), src)
                            .ok()
                            .filter(renders_tools);
                    }
                    Ok(format)
                } else if let Some(src) = asset(name) {
                    let path = format!("assets/templates/{name}.jinja");
                    make(jinja(&path, src)?, path)
                } else {
                    bail!(
                        "unknown chat template {name:?}; known names: {}; or give a .jinja file",
                        known_names().join(", ")
                    )
                }
            }
            TemplateChoice::File(path) => {
                // Real templates are a few KB; the largest known, under 100 KB.
                let src = crate::files::read_text(path, 1 << 20, "a chat template")
                    .context("reading chat template")?;
                let shown = path.display().to_string();
                let engine = jinja(&shown, &src)
                    .with_context(|| format!("parsing chat template {shown}"))?;
                make(engine, shown.clone())
                    .map_err(|err| plain_runaway(err, &format!("the chat template {shown}"), ""))
            }
            TemplateChoice::Auto => match gguf_template.filter(|t| !t.trim().is_empty()) {
                Some(text) => ChatFormat::model_own(text, arch, bos, eos),
                None => ChatFormat::fallback(arch, bos, eos, None),
            },
        }
    }

    /// The model's own template: llama.cpp when it recognises the family,
    /// else minijinja, else (a template we cannot run) the fallback.
    fn model_own(text: &str, arch: &str, bos: &str, eos: &str) -> Result<ChatFormat> {
        let whose = "the model's chat template";
        let hint = "; give --chat-template NAME, or --raw with `headroom run`";
        // Checked before llama.cpp copies and scans it, too.
        if text.len() > jinja::MAX_SOURCE_BYTES {
            let err = JinjaError::Runaway(Runaway::Source(text.len())).into();
            return Err(plain_runaway(err, whose, hint));
        }
        if let Ok(Some(_)) = llama::apply(text, &[Message::user("hi")], true) {
            let origin = match llama::family(text) {
                Some(name) => format!("model's own (llama.cpp built-in '{name}')"),
                None => "model's own (recognised by llama.cpp)".to_string(),
            };
            if let Ok(mut format) =
                ChatFormat::new(Engine::Llama(text.to_string()), origin, bos, eos)
            {
                format.tools = jinja("tokenizer.chat_template", text)
                    .ok()
                    .filter(renders_tools);
                return Ok(format);
            }
        }
        jinja("tokenizer.chat_template", text)
            .and_then(|engine| ChatFormat::new(engine, "model's own (Jinja)".to_string(), bos, eos))
            .or_else(|err| match runaway(&err) {
                Some(_) => Err(plain_runaway(err, whose, hint)),
                None => ChatFormat::fallback(arch, bos, eos, Some(&err)),
            })
    }

    /// The asset for `arch`; `own_failed` says why the model's own template
    /// was passed over, if it has one.
    fn fallback(
        arch: &str,
        bos: &str,
        eos: &str,
        own_failed: Option<&anyhow::Error>,
    ) -> Result<ChatFormat> {
        let (name, matched) = fallback_for(arch);
        let src = asset(name).with_context(|| format!("asset {name} missing"))?;
        let path = format!("assets/templates/{name}.jinja");
        let why = match (own_failed, matched) {
            (Some(err), _) => format!("the model's own template cannot be used: {err:#}"),
            (None, true) => format!("fallback for {arch}"),
            (None, false) => {
                format!("no template in the model and none known for {arch:?}: a guess")
            }
        };
        ChatFormat::new(jinja(&path, src)?, format!("{path} ({why})"), bos, eos)
    }

    /// Finishes a format: checks it renders, learns whether it keeps system
    /// messages and which text ends a turn. A probe that runs past a limit
    /// is an error: the template would do the same on a real conversation.
    fn new(engine: Engine, origin: String, bos: &str, eos: &str) -> Result<ChatFormat> {
        let mut format = ChatFormat {
            engine,
            origin,
            bos: bos.to_string(),
            eos: eos.to_string(),
            fold_system: false,
            stops: Vec::new(),
            tools: None,
        };
        format
            .render(&[Message::user("Hello")], true)
            .context("the template cannot render a single user message")?;
        // Some templates raise on a system message (Gemma 2's) or silently
        // drop it; llama.cpp's chat code then folds it into the first user
        // turn, and so do we.
        let probe = "headroom-system-probe";
        format.fold_system =
            match format.render(&[Message::system(probe), Message::user("Hello")], true) {
                Ok(text) => !text.contains(probe),
                Err(err) if runaway(&err).is_some() => return Err(err),
                Err(_) => true,
            };
        format.stops = format.find_stops()?;
        format.tools = Some(format.engine.clone()).filter(renders_tools);
        Ok(format)
    }

    /// How this format's model writes a tool call, or why tools cannot be
    /// used with it (the reason names the way out).
    ///
    /// # Errors
    /// The template renders no tools, or writes calls in a syntax the server
    /// does not parse.
    pub fn tool_syntax(&self) -> Result<ToolSyntax, String> {
        let hint = "start the server with --chat-template hermes (ChatML with tools, as Qwen's), --chat-template llama3 (Llama 3.1's JSON calls) or a tool-capable Jinja file";
        let Some(Engine::Jinja { env, name }) = &self.tools else {
            return Err(format!(
                "this model's chat template ({}) has no tools: {hint}",
                self.describe()
            ));
        };
        let src = env
            .get_template(name)
            .map(|t| t.source().to_string())
            .unwrap_or_default();
        if src.contains(HERMES_OPEN) {
            Ok(ToolSyntax::Hermes)
        } else if src.contains("<|channel|>") && src.contains("functions") {
            // gpt-oss's: calls in the commentary channel, `to=functions.NAME`.
            Ok(ToolSyntax::Harmony)
        } else if src.contains("<|start_header_id|>") && src.contains("ipython") {
            // Llama 3.1–3.3's templates: tool results come back in the
            // `ipython` role, calls are `{"name": …, "parameters": …}`.
            Ok(ToolSyntax::Llama3Json)
        } else {
            Err(format!(
                "this model's chat template ({}) writes tool calls in a syntax this server does not parse yet (it parses <tool_call> JSON, as Qwen's and Hermes' templates write, Llama 3.x's JSON calls and gpt-oss's Harmony calls): {hint}",
                self.describe()
            ))
        }
    }

    /// The prompt for `messages` with `tools` (OpenAI's list, as Hugging
    /// Face templates take it) offered, by the template that renders them.
    ///
    /// # Errors
    /// As [`ChatFormat::render`]; the format renders no tools.
    pub fn render_with_tools(
        &self,
        messages: &[Message],
        tools: &serde_json::Value,
    ) -> Result<String> {
        let Some(engine) = &self.tools else {
            bail!("this chat template renders no tools");
        };
        self.render_raw(engine, messages, Some(tools), true)
            .with_context(|| format!("formatting the chat and its tools with {}", self.origin))
    }

    /// Whether the model thinks in `<think>` tags: its template's text
    /// mentions `<think>` (Qwen3's, DeepSeek-R1's and their distills' do).
    /// A llama.cpp built-in named by `--chat-template` has no text here:
    /// `false`.
    #[must_use]
    pub fn thinks(&self) -> bool {
        self.mentions("<think>")
    }

    /// Whether the template's text mentions `tag` (a llama.cpp built-in
    /// named by `--chat-template` has only its name here).
    fn mentions(&self, tag: &str) -> bool {
        match &self.engine {
            Engine::Llama(text) => text.contains(tag),
            Engine::Jinja { env, name } => env
                .get_template(name)
                .is_ok_and(|t| t.source().contains(tag)),
        }
    }

    /// Whether the model answers in gpt-oss's Harmony channels
    /// (`<|channel|>analysis<|message|>…`): its template mentions
    /// `<|channel|>`, or it is llama.cpp's built-in `gpt-oss`.
    #[must_use]
    pub fn harmony(&self) -> bool {
        matches!(&self.engine, Engine::Llama(name) if name == "gpt-oss")
            || self.mentions("<|channel|>")
    }

    /// The end-of-turn text: what the template writes right after an
    /// assistant reply, when it is a known marker or the EOS text.
    ///
    /// # Errors
    /// The probe ran past a limit.
    fn find_stops(&self) -> Result<Vec<String>> {
        let reply = "headroom-reply-probe";
        let probe = [
            Message::user("Hello"),
            Message::assistant(reply),
            Message::user("Again"),
        ];
        let candidates = END_MARKERS
            .iter()
            .copied()
            .chain(Some(self.eos.as_str()).filter(|e| !e.is_empty()));
        let after = match self.render(&probe, false) {
            Ok(text) => text
                .find(reply)
                .map(|i| text[i + reply.len()..].to_string()),
            Err(err) if runaway(&err).is_some() => return Err(err),
            Err(_) => None,
        };
        let mut stops: Vec<String> = Vec::new();
        match after {
            Some(after) => {
                let after = after.trim_start();
                for c in candidates {
                    if after.starts_with(c) && !stops.iter().any(|s| s == c) {
                        stops.push(c.to_string());
                    }
                }
            }
            // A template that refuses the probe or drops the reply: the
            // markers it mentions.
            None => {
                if let Engine::Jinja { env, name } = &self.engine
                    && let Ok(tmpl) = env.get_template(name)
                {
                    for c in END_MARKERS {
                        if tmpl.source().contains(c) {
                            stops.push((*c).to_string());
                        }
                    }
                }
            }
        }
        // gpt-oss ends each message of a turn with `<|end|>` (its analysis
        // before its answer, too): only `<|return|>` (and `<|call|>`, both
        // end-of-generation tokens) ends the turn.
        if self.harmony() && stops.iter().any(|s| s == "<|end|>") {
            stops.retain(|s| s != "<|end|>");
            if !stops.iter().any(|s| s == "<|return|>") {
                stops.push("<|return|>".to_string());
            }
        }
        Ok(stops)
    }

    /// The prompt text for `messages`; with `add_generation_prompt` it ends
    /// where the assistant's reply begins.
    ///
    /// # Errors
    /// The template raised (its message is quoted), or text holds a NUL byte
    /// (llama.cpp formats only).
    pub fn render(&self, messages: &[Message], add_generation_prompt: bool) -> Result<String> {
        self.render_raw(&self.engine, messages, None, add_generation_prompt)
            .with_context(|| format!("formatting the chat with {}", self.origin))
    }

    /// `messages` (and `tools`, which only a Jinja engine renders) by
    /// `engine`, one of this format's.
    fn render_raw(
        &self,
        engine: &Engine,
        messages: &[Message],
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
    ) -> Result<String> {
        let folded;
        let messages = if self.fold_system {
            folded = fold_system(messages);
            &folded[..]
        } else {
            messages
        };
        match engine {
            Engine::Llama(tmpl) => llama::apply(tmpl, messages, add_generation_prompt)?
                .ok_or_else(|| anyhow!("llama.cpp does not recognise the chat template")),
            Engine::Jinja { env, name } => {
                let (text, _fuel) = jinja::render_in_time(
                    Arc::clone(env),
                    name.clone(),
                    messages.to_vec(),
                    tools.cloned(),
                    add_generation_prompt,
                    (self.bos.clone(), self.eos.clone()),
                    jinja::DEADLINE,
                )?;
                Ok(match text.strip_prefix(self.bos.as_str()) {
                    Some(rest) if !self.bos.is_empty() => rest.to_string(),
                    _ => text,
                })
            }
        }
    }

    /// Where the format came from, for the user: `model's own (llama.cpp
    /// built-in 'chatml')`, `assets/templates/gemma.jinja (fallback for gemma3)`.
    pub fn describe(&self) -> String {
        if self.fold_system {
            format!("{}; system text goes into the first user turn", self.origin)
        } else {
            self.origin.clone()
        }
    }

    /// The text that ends an assistant turn (`<end_of_turn>`, `<|im_end|>`,
    /// `<|eot_id|>`, or the EOS text), for stopping generation when the model
    /// writes it as plain text. May be empty.
    pub fn stop_strings(&self) -> Vec<String> {
        self.stops.clone()
    }
}

/// The tag Hermes-style templates (Qwen2.5, Qwen3, Hermes 2/3) open a tool
/// call with; the call is `{"name": …, "arguments": {…}}` up to
/// [`HERMES_CLOSE`].
pub const HERMES_OPEN: &str = "<tool_call>";
/// The tag that closes a Hermes-style tool call.
pub const HERMES_CLOSE: &str = "</tool_call>";

/// How a model writes tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSyntax {
    /// `<tool_call>{"name": …, "arguments": {…}}</tool_call>`, one block per
    /// call (Qwen2.5, Qwen3, Hermes 2/3, the `hermes` asset).
    Hermes,
    /// `{"name": …, "parameters": {…}}` as the whole answer, results in the
    /// `ipython` role (Llama 3.1–3.3, the `llama3` asset).
    Llama3Json,
    /// gpt-oss's Harmony: `<|channel|>commentary to=functions.NAME
    /// <|constrain|>json<|message|>{…}`, ended by `<|call|>`.
    Harmony,
}

/// Whether a Jinja template mentions `tools` (so renders them).
fn renders_tools(engine: &Engine) -> bool {
    match engine {
        Engine::Jinja { env, name } => env
            .get_template(name)
            .is_ok_and(|t| t.source().contains("tools")),
        Engine::Llama(_) => false,
    }
}

/// Moves system messages into the front of the first user message.
fn fold_system(messages: &[Message]) -> Vec<Message> {
    let system: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == "system")
        .map(|m| m.content.as_str())
        .collect();
    let mut rest: Vec<Message> = messages
        .iter()
        .filter(|m| m.role != "system")
        .cloned()
        .collect();
    if system.is_empty() {
        return rest;
    }
    let system = system.join("\n\n");
    match rest.iter_mut().find(|m| m.role == "user") {
        Some(user) => user.content = format!("{system}\n\n{}", user.content),
        None => rest.insert(0, Message::user(system)),
    }
    rest
}

/// Every name `--chat-template` accepts, sorted.
pub fn known_names() -> Vec<String> {
    let mut names = llama::builtin_names();
    names.extend(ASSETS.iter().map(|(n, _)| (*n).to_string()));
    names.sort();
    names.dedup();
    names
}

/// A Jinja engine for `src`, named `name` in minijinja's error messages.
fn jinja(name: &str, src: &str) -> Result<Engine> {
    Ok(Engine::Jinja {
        env: Arc::new(jinja::environment(name, src)?),
        name: name.to_string(),
    })
}

/// The limit a template ran past, if that is what `err` says.
fn runaway(err: &anyhow::Error) -> Option<&Runaway> {
    err.chain()
        .find_map(|e| match e.downcast_ref::<JinjaError>() {
            Some(JinjaError::Runaway(r)) => Some(r),
            _ => None,
        })
}

/// `err`, or, when a template ran past a limit, one plain sentence without
/// the probing that found it: `whose` template, and `hint` after it.
fn plain_runaway(err: anyhow::Error, whose: &str, hint: &str) -> anyhow::Error {
    match runaway(&err) {
        Some(r) => anyhow!("{whose} {r}{hint}"),
        None => err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_tells_names_from_files() {
        assert_eq!(TemplateChoice::parse(None), TemplateChoice::Auto);
        assert_eq!(TemplateChoice::parse(Some("auto")), TemplateChoice::Auto);
        assert_eq!(
            TemplateChoice::parse(Some("chatml")),
            TemplateChoice::Name("chatml".into())
        );
        assert_eq!(
            TemplateChoice::parse(Some("my.jinja")),
            TemplateChoice::File("my.jinja".into())
        );
        assert_eq!(
            TemplateChoice::parse(Some("t.j2")),
            TemplateChoice::File("t.j2".into())
        );
        let file = tempfile::NamedTempFile::new().expect("temp file");
        let path = file.path().to_str().expect("utf-8 temp path");
        assert_eq!(
            TemplateChoice::parse(Some(path)),
            TemplateChoice::File(path.into())
        );
    }

    #[test]
    fn formats_can_move_to_a_generation_thread() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<ChatFormat>();
    }

    #[test]
    fn fallbacks_by_architecture() {
        assert_eq!(fallback_for("gemma3"), ("gemma", true));
        assert_eq!(fallback_for("gemma3n"), ("gemma", true));
        assert_eq!(fallback_for("llama"), ("llama3", true));
        assert_eq!(fallback_for("qwen3moe"), ("chatml", true));
        assert_eq!(fallback_for("mistral3"), ("mistral", true));
        assert_eq!(fallback_for("rwkv7"), ("chatml", false));
        for (name, _) in ASSETS {
            assert!(
                jinja(name, asset(name).expect("asset")).is_ok(),
                "{name} parses"
            );
        }
    }

    /// One function `f`, an assistant turn that calls it with `{"q": 1}`,
    /// and its result `2`.
    fn tool_turns() -> (serde_json::Value, Message, Message) {
        let tools = serde_json::json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]);
        let mut call = Message::assistant("");
        call.tool_calls = Some(vec![
            serde_json::json!({"type": "function", "function": {"name": "f", "arguments": {"q": 1}}}),
        ]);
        let mut result = Message::new("tool", "2");
        result.tool_call_id = Some("c1".into());
        (tools, call, result)
    }

    #[test]
    fn the_hermes_asset_renders_tools_calls_and_results() {
        let f = ChatFormat::resolve(
            &TemplateChoice::Name("hermes".into()),
            None,
            "llama",
            "",
            "",
        )
        .expect("hermes");
        assert_eq!(f.tool_syntax(), Ok(ToolSyntax::Hermes));
        let (tools, call, result) = tool_turns();
        let text = f
            .render_with_tools(
                &[Message::system("S"), Message::user("U"), call, result],
                &tools,
            )
            .expect("renders");
        for part in [
            "<|im_start|>system\nS\n\n# Tools",
            // As the client sent it, keys in order, Python's separators.
            r#"<tools>
{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
</tools>"#,
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": 1}}\n</tool_call><|im_end|>",
            "<|im_start|>user\n<tool_response>\n2\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
        ] {
            assert!(text.contains(part), "{part:?} in\n{text}");
        }
        // Without tools it is plain ChatML.
        let plain = f.render(&[Message::user("U")], true).expect("renders");
        assert_eq!(
            plain,
            "<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
        );
        // A template without tools says how to get them.
        let chatml = ChatFormat::resolve(
            &TemplateChoice::Name("chatml".into()),
            None,
            "llama",
            "",
            "",
        )
        .expect("chatml");
        assert!(
            chatml
                .tool_syntax()
                .expect_err("no tools")
                .contains("--chat-template hermes")
        );
    }

    #[test]
    fn the_llama3_asset_renders_tools_calls_and_results_as_llama_3_1_does() {
        let f = ChatFormat::resolve(
            &TemplateChoice::Name("llama3".into()),
            None,
            "llama",
            "<|begin_of_text|>",
            "",
        )
        .expect("llama3");
        assert_eq!(f.tool_syntax(), Ok(ToolSyntax::Llama3Json));
        let (tools, call, result) = tool_turns();
        let text = f
            .render_with_tools(&[Message::user("U"), call, result], &tools)
            .expect("renders");
        let want = concat!(
            "<|start_header_id|>user<|end_header_id|>\n\n",
            "Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n",
            "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n",
            "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"f\",\n        \"parameters\": {\n            \"type\": \"object\"\n        }\n    }\n}\n\n",
            "U<|eot_id|>",
            "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"f\", \"parameters\": {\"q\": 1}}<|eot_id|>",
            "<|start_header_id|>ipython<|end_header_id|>\n\n\"2\"<|eot_id|>",
            "<|start_header_id|>assistant<|end_header_id|>\n\n",
        );
        assert_eq!(text, want);
    }

    /// gpt-oss writes `<|end|>` after its analysis and goes on to its
    /// answer: a Harmony template's turn ends at `<|return|>` only.
    #[test]
    fn a_harmony_template_ends_its_turn_at_return_not_end() {
        let path = std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/run/harmony.jinja"
        ));
        let f = ChatFormat::resolve(&TemplateChoice::File(path), None, "gpt-oss", "", "")
            .expect("harmony");
        assert!(f.harmony());
        assert_eq!(f.stop_strings(), ["<|return|>"]);
        assert_eq!(f.tool_syntax(), Ok(ToolSyntax::Harmony));
        let named = ChatFormat::resolve(
            &TemplateChoice::Name("gpt-oss".into()),
            None,
            "gpt-oss",
            "",
            "",
        )
        .expect("gpt-oss");
        assert!(named.harmony());
        assert!(!named.stop_strings().iter().any(|s| s == "<|end|>"));
    }

    #[test]
    fn fold_system_prefixes_the_first_user_turn() {
        let folded = fold_system(&[
            Message::system("S"),
            Message::user("U1"),
            Message::assistant("A"),
            Message::user("U2"),
        ]);
        assert_eq!(
            folded,
            vec![
                Message::user("S\n\nU1"),
                Message::assistant("A"),
                Message::user("U2")
            ]
        );
        assert_eq!(
            fold_system(&[Message::system("S")]),
            vec![Message::user("S")]
        );
    }
}
