//! The HTTP layer of `serve`: OpenAI's routes on axum, in front of the
//! runner's scheduler ([`crate::runner::batch`]). Requests are parsed and
//! checked here ([`openai`]), formatted and tokenized with the model's chat
//! template, then handed to the bounded admission queue; events come back
//! as a whole answer or as server-sent events.

pub mod openai;
pub mod schema;
pub mod tools;

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::stream::{self, Stream};
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use crate::runner::batch::{Admission, Event, Job, Rejected, Stats, Summary, TokenLogprob};
use crate::runner::reasoning::ReasoningSplit;
use crate::runner::template::{ChatFormat, ToolSyntax};
use crate::runner::{Engine, GenOptions, Sampling, StopReason};
use openai::{AnswerFormat, ApiError, Header, Kind, Params, Usage};
use tools::ToolSplit;

/// What exists once the model is loaded.
pub struct Loaded {
    /// The model.
    pub engine: Arc<Engine>,
    /// Its chat format (`None`: no template and none named: chat
    /// completions are refused, legacy completions work).
    pub format: Option<ChatFormat>,
}

/// An embeddings request for the embedding thread: token inputs in, unit
/// vectors (or the first failure) out.
pub struct EmbedJob {
    /// Each input's tokens.
    pub inputs: Vec<Vec<llama_cpp_2::token::LlamaToken>>,
    /// Where the vectors go, in input order.
    pub reply: tokio::sync::oneshot::Sender<Result<Vec<Vec<f32>>, String>>,
}

/// The embedding context, once it exists (`serve --embeddings`).
pub struct Embeddings {
    /// The bounded queue in front of it.
    pub jobs: std::sync::mpsc::SyncSender<EmbedJob>,
    /// The longest input in tokens.
    pub n_ctx: usize,
    /// The vectors' length.
    pub n_embd: usize,
}

/// Everything a handler needs.
pub struct AppState {
    /// Set when the model is loaded.
    pub loaded: OnceLock<Loaded>,
    /// Set when the embedding context is created (`serve --embeddings`).
    pub embeddings: OnceLock<Embeddings>,
    /// The queue in front of the slots.
    pub admission: Arc<Admission>,
    /// The scheduler's counters.
    pub stats: Arc<Stats>,
    /// The fixed facts: model name, slots, key, sampling defaults, plan.
    pub config: Config,
    /// Unix seconds at startup.
    pub created: u64,
    /// Responses by status.
    pub responses: ResponseCounts,
    next_id: AtomicU64,
}

/// Responses sent, by status code.
#[derive(Debug, Default)]
pub struct ResponseCounts {
    counts: std::sync::Mutex<std::collections::BTreeMap<u16, u64>>,
}

impl ResponseCounts {
    fn add(&self, status: u16) {
        let mut c = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *c.entry(status).or_default() += 1;
    }

    fn snapshot(&self) -> Vec<(u16, u64)> {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(&k, &v)| (k, v))
            .collect()
    }
}

/// The server's fixed facts, before the model is loaded.
pub struct Config {
    /// The model's name.
    pub model_id: String,
    /// Slots.
    pub slots: usize,
    /// Cells per slot.
    pub n_ctx_slot: usize,
    /// `--api-key`.
    pub api_key: Option<String>,
    /// top-k and min-p for every request.
    pub defaults: Sampling,
    /// The plan's peak resident memory.
    pub planned_peak_bytes: u64,
    /// `--reasoning-format` is not `none`: split `<think>` reasoning out
    /// for templates that think.
    pub reasoning: bool,
    /// The model's facts for `/v1/models`, from its header.
    pub facts: ModelFacts,
    /// The planned embedding context: its tokens and bytes (`None`: the
    /// server has none, and `/v1/embeddings` says how to get one).
    pub embeddings: Option<(u32, u64)>,
}

/// What `/v1/models` says of the model beside the context (llama-server's
/// `meta`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ModelFacts {
    /// The context it was trained with.
    pub n_ctx_train: u64,
    /// Parameters.
    pub n_params: u64,
    /// Bytes of the GGUF file.
    pub size: u64,
    /// Vocabulary size.
    pub n_vocab: u64,
    /// Embedding width.
    pub n_embd: u64,
}

impl AppState {
    /// State for a server whose scheduler uses `admission` and `stats`.
    #[must_use]
    pub fn new(config: Config, admission: Arc<Admission>, stats: Arc<Stats>) -> AppState {
        AppState {
            loaded: OnceLock::new(),
            embeddings: OnceLock::new(),
            admission,
            stats,
            config,
            created: unix_now(),
            responses: ResponseCounts::default(),
            next_id: AtomicU64::new(1),
        }
    }

    fn id(&self, prefix: &str) -> String {
        format!(
            "{prefix}-{:x}{:06x}",
            self.created,
            self.next_id.fetch_add(1, Ordering::Relaxed)
        )
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The routes, with a body limit of `max_body` bytes.
pub fn router(state: Arc<AppState>, max_body: usize) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/completions", post(completions))
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(state)
}

/// An error response in OpenAI's shape (counted).
fn error(state: &AppState, e: &ApiError) -> Response {
    state.responses.add(e.status);
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = (status, axum::Json(e.body())).into_response();
    if e.status == 503 {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    if e.status == 401 {
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    r
}

fn json_ok(state: &AppState, v: &Value) -> Response {
    state.responses.add(200);
    axum::Json(v).into_response()
}

/// The API key check: `Authorization: Bearer KEY` when one is set.
fn authorize(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(key) = &state.config.api_key else {
        return Ok(());
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    // Compared in full whatever the first difference: no timing hint.
    let ok = given.is_some_and(|g| {
        g.len() == key.len()
            && g.bytes()
                .zip(key.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    });
    if ok {
        Ok(())
    } else {
        Err(ApiError {
            status: 401,
            message: if given.is_some() {
                "incorrect API key".into()
            } else {
                "no API key: send Authorization: Bearer KEY".into()
            },
            kind: "invalid_request_error",
            code: Some("invalid_api_key"),
        })
    }
}

fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|r| {
        let status = r.status().as_u16();
        ApiError {
            status,
            message: if status == 413 {
                "the request body is larger than the server's limit (--max-body)".into()
            } else {
                format!("could not read the request body: {r}")
            },
            kind: "invalid_request_error",
            code: None,
        }
    })
}

fn loading() -> ApiError {
    ApiError {
        status: 503,
        message: "the model is loading".into(),
        kind: "server_error",
        code: Some("model_loading"),
    }
}

async fn not_found(State(state): State<Arc<AppState>>, uri: axum::http::Uri) -> Response {
    error(
        &state,
        &ApiError {
            status: 404,
            message: format!("no route {}", uri.path()),
            kind: "invalid_request_error",
            code: Some("unknown_url"),
        },
    )
}

async fn method_not_allowed(State(state): State<Arc<AppState>>) -> Response {
    error(
        &state,
        &ApiError {
            status: 405,
            message: "method not allowed on this route".into(),
            kind: "invalid_request_error",
            code: None,
        },
    )
}

async fn models(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if let Err(e) = authorize(&state, &headers) {
        return error(&state, &e);
    }
    let c = &state.config;
    let f = c.facts;
    // The context a request can use is one slot's: clients size their
    // prompts by `context_length` (OpenRouter's name) or `max_model_len`
    // (vLLM's); `meta` is llama-server's shape, with `n_ctx` per slot too.
    json_ok(
        &state,
        &json!({
            "object": "list",
            "data": [{
                "id": c.model_id,
                "object": "model",
                "created": state.created,
                "owned_by": "headroom",
                "context_length": c.n_ctx_slot,
                "max_model_len": c.n_ctx_slot,
                "meta": {
                    "n_ctx_train": f.n_ctx_train,
                    "n_ctx": c.n_ctx_slot,
                    "n_params": f.n_params,
                    "size": f.size,
                    "n_vocab": f.n_vocab,
                    "n_embd": f.n_embd,
                },
            }],
        }),
    )
}

async fn health(State(state): State<Arc<AppState>>) -> Response {
    let ready = state.loaded.get().is_some() && state.stats.ready.load(Ordering::Acquire);
    if !ready {
        state.responses.add(503);
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({"status": "loading"})),
        )
            .into_response();
    }
    let active = state.stats.active.load(Ordering::Relaxed);
    json_ok(
        &state,
        &json!({
            "status": "ok",
            "slots_idle": state.config.slots.saturating_sub(active),
            "slots_processing": active,
            "queued": state.admission.queued(),
        }),
    )
}

async fn metrics(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if let Err(e) = authorize(&state, &headers) {
        return error(&state, &e);
    }
    let text = metrics_text(&state);
    state.responses.add(200);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// Prometheus' text format.
fn metrics_text(state: &AppState) -> String {
    use std::fmt::Write as _;
    let s = &state.stats;
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, value: String| {
        let _ = writeln!(out, "# HELP headroom_{name} {help}");
        let _ = writeln!(out, "# TYPE headroom_{name} {kind}");
        let _ = writeln!(out, "headroom_{name} {value}");
    };
    let rate = |tokens: u64, nanos: u64| {
        if nanos == 0 {
            0.0
        } else {
            tokens as f64 / (nanos as f64 / 1e9)
        }
    };
    let generated = s.generated_tokens.load(Ordering::Relaxed);
    let prompt = s.prompt_tokens.load(Ordering::Relaxed);
    metric(
        "queue_depth",
        "gauge",
        "Requests waiting for a slot.",
        state.admission.queued().to_string(),
    );
    metric(
        "slots_active",
        "gauge",
        "Slots running a request.",
        s.active.load(Ordering::Relaxed).to_string(),
    );
    metric(
        "slots_total",
        "gauge",
        "Slots the plan sized.",
        state.config.slots.to_string(),
    );
    metric(
        "tokens_generated_total",
        "counter",
        "Tokens generated.",
        generated.to_string(),
    );
    metric(
        "prompt_tokens_total",
        "counter",
        "Prompt tokens evaluated.",
        prompt.to_string(),
    );
    metric(
        "prompt_tokens_cached_total",
        "counter",
        "Prompt tokens found in a slot's KV cache and not evaluated again.",
        s.prompt_tokens_cached.load(Ordering::Relaxed).to_string(),
    );
    metric(
        "prompt_tokens_per_second",
        "gauge",
        "Prompt tokens per second of decode steps that carried prompt tokens.",
        format!(
            "{:.2}",
            rate(prompt, s.prompt_nanos.load(Ordering::Relaxed))
        ),
    );
    metric(
        "decode_tokens_per_second",
        "gauge",
        "Generated tokens per second of decode steps that only generated.",
        format!(
            "{:.2}",
            rate(generated, s.decode_nanos.load(Ordering::Relaxed))
        ),
    );
    metric(
        "kv_cells_used",
        "gauge",
        "KV cache cells in use over all slots.",
        s.cells_used.load(Ordering::Relaxed).to_string(),
    );
    metric(
        "kv_cells_total",
        "gauge",
        "KV cache cells over all slots.",
        (state.config.n_ctx_slot * state.config.slots).to_string(),
    );
    metric(
        "rss_bytes",
        "gauge",
        "Resident memory of the process.",
        crate::runner::measure::rss_bytes().to_string(),
    );
    metric(
        "peak_rss_bytes",
        "gauge",
        "Peak resident memory of the process.",
        crate::runner::measure::peak_rss_bytes().to_string(),
    );
    metric(
        "planned_peak_bytes",
        "gauge",
        "The plan's peak resident memory.",
        state.config.planned_peak_bytes.to_string(),
    );
    if let Some((n_ctx, bytes)) = state.config.embeddings {
        metric(
            "embedding_context_tokens",
            "gauge",
            "Tokens of the embedding context (the longest input).",
            n_ctx.to_string(),
        );
        metric(
            "planned_embedding_context_bytes",
            "gauge",
            "What the plan gives the embedding context (KV cache, compute and output buffers), within planned_peak_bytes.",
            bytes.to_string(),
        );
        metric(
            "embedding_inputs_total",
            "counter",
            "Inputs embedded.",
            s.embedding_inputs.load(Ordering::Relaxed).to_string(),
        );
    }
    let _ = writeln!(
        out,
        "# HELP headroom_responses_total Responses sent, by HTTP status."
    );
    let _ = writeln!(out, "# TYPE headroom_responses_total counter");
    for (status, n) in state.responses.snapshot() {
        let _ = writeln!(out, "headroom_responses_total{{status=\"{status}\"}} {n}");
    }
    out
}

/// What every generating request goes through first, cheapest first: the
/// key, the body and its fields, a loaded model, and room in the queue
/// (refused before any template or tokenizer work: a burst costs little).
fn admit<'s, T>(
    state: &'s AppState,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    parse: fn(&[u8]) -> Result<T, ApiError>,
) -> Result<(T, &'s Loaded), ApiError> {
    authorize(state, headers)?;
    let req = parse(&body_bytes(body)?)?;
    let loaded = state.loaded.get().ok_or_else(loading)?;
    state.admission.has_room().map_err(|why| busy(state, why))?;
    Ok((req, loaded))
}

async fn chat_completions(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let prepared = async {
        let (req, loaded) = admit(&state, &headers, body, openai::chat_request)?;
        let Some(format) = loaded.format.clone() else {
            return Err(ApiError::bad_request(
                "this model has no chat template: use /v1/completions, or start the server with --chat-template",
            ));
        };
        let engine = Arc::clone(&loaded.engine);
        let messages = req.messages;
        let split = req.split_reasoning && state.config.reasoning;
        let answer = req.format;
        let tools = req.tools;
        let mut params = req.params;
        let (tokens, stops, split, (grammar, triggers), calling) =
            tokio::task::spawn_blocking(move || {
                let bad = |e: &dyn std::fmt::Display| ApiError::bad_request(format!("{e:#}"));
                let mut constraint = (answer_grammar(&engine, &answer)?, Vec::new());
                let history = messages
                    .iter()
                    .any(|m| m.role == "tool" || m.tool_calls.is_some());
                let mut calling = None;
                let text = if let Some(tools) = &tools {
                    let (syntax, grammar, triggers) = tool_grammar(&engine, &format, tools)?;
                    constraint = (grammar, triggers);
                    calling = Some(syntax);
                    format.render_with_tools(&messages, &tools.list)
                } else if history {
                    // A conversation with calls in it, tools no longer offered
                    // (`tool_choice: none`): the template that renders them.
                    format.tool_syntax().map_err(|e| bad(&e))?;
                    format.render_with_tools(&messages, &json!([]))
                } else {
                    format.render(&messages, true)
                }
                .map_err(|e| bad(&e))?;
                let tokens =
                    crate::runner::prompt::tokenize_prompt(&engine, &text).map_err(|e| bad(&e))?;
                let split = split
                    .then(|| ReasoningSplit::for_format(&format, &text))
                    .flatten();
                Ok::<_, ApiError>((tokens, format.stop_strings(), split, constraint, calling))
            })
            .await
            .map_err(|e| internal(&e))??;
        params.grammar = grammar;
        params.grammar_triggers = triggers;
        Ok(((tokens, stops, split, calling), params))
    };
    match prepared.await {
        Ok(((tokens, stops, split, calling), params)) => {
            let answer = Answer {
                split,
                tools: calling.map(ToolSplit::new),
            };
            submit(&state, Kind::Chat, tokens, stops, params, answer).await
        }
        Err(e) => error(&state, &e),
    }
}

/// How a chat answer's text is taken apart on its way out: thinking into
/// `reasoning_content`, tool calls into `tool_calls`.
#[derive(Default)]
struct Answer {
    split: Option<ReasoningSplit>,
    tools: Option<ToolSplit>,
}

impl Answer {
    /// The reasoning and the content of `piece` that can go out now.
    fn push(&mut self, piece: &str) -> (String, String) {
        let (r, c) = match self.split.as_mut() {
            Some(sp) => sp.push(piece),
            None => (String::new(), piece.to_string()),
        };
        match self.tools.as_mut() {
            Some(t) => (r, t.push(&c)),
            None => (r, c),
        }
    }

    /// At the end: the reasoning and content held back, and the calls.
    fn finish(&mut self) -> (String, String, Vec<tools::Call>) {
        let (r, c) = match self.split.as_mut() {
            Some(sp) => sp.finish(),
            None => (String::new(), String::new()),
        };
        match self.tools.as_mut() {
            Some(t) => {
                let mut content = t.push(&c);
                let (held, calls) = t.finish();
                content.push_str(&held);
                (r, content, calls)
            }
            None => (r, c, Vec::new()),
        }
    }
}

/// The syntax the template writes calls in, and the grammar (and its
/// triggers) for a request's tool calls: that syntax is one the server parses, every function's
/// parameters are a schema the converter enforces (else a 400 naming it),
/// and the grammar loads. Under `auto` it is lazy, from the call's opening
/// tag; under `required` or a named function it holds from the first token.
fn tool_grammar(
    engine: &Engine,
    format: &ChatFormat,
    tools: &openai::Tools,
) -> Result<(ToolSyntax, Option<String>, Vec<String>), ApiError> {
    let bad = |m: String| ApiError::bad_request(m);
    let syntax = format
        .tool_syntax()
        .map_err(|e| bad(format!("tools: {e}")))?;
    for (name, params) in &tools.callable {
        schema::check(&params.value, &crate::llama::grammar::pattern_is_enforced)
            .map_err(|e| bad(format!("tools: {name}'s parameters: {e}")))?;
    }
    let grammar = tools::grammar(syntax, &tools.callable, tools.parallel)
        .map_err(|e| bad(format!("tools: {e}")))?;
    let triggers = if tools.forced {
        Vec::new()
    } else {
        tools::triggers(syntax)
    };
    crate::runner::batch::grammar_sampler(engine.model(), &grammar, &triggers).map_err(|e| {
        bad(format!(
            "tools: llama.cpp could not load their grammar ({e})"
        ))
    })?;
    Ok((syntax, Some(grammar), triggers))
}

async fn completions(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let prepared = async {
        let (req, loaded) = admit(&state, &headers, body, openai::completion_request)?;
        let engine = Arc::clone(&loaded.engine);
        let prompt = req.prompt;
        let tokens = tokio::task::spawn_blocking(move || {
            crate::runner::prompt::tokenize_prompt(&engine, &prompt)
                .map_err(|e| ApiError::bad_request(format!("{e:#}")))
        })
        .await
        .map_err(|e| internal(&e))??;
        Ok((tokens, req.params))
    };
    match prepared.await {
        Ok((tokens, params)) => {
            submit(
                &state,
                Kind::Completion,
                tokens,
                Vec::new(),
                params,
                Answer::default(),
            )
            .await
        }
        Err(e) => error(&state, &e),
    }
}

/// `/v1/embeddings`: each input tokenized as llama-server tokenizes it
/// (with BOS), embedded by the embedding thread one at a time, returned as
/// floats or base64 in OpenAI's shape.
async fn embeddings(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let answer = async {
        authorize(&state, &headers)?;
        let req = openai::embedding_request(&body_bytes(body)?)?;
        if state.config.embeddings.is_none() {
            return Err(ApiError::bad_request(
                "this server has no embedding context: start it with `headroom serve --embeddings`",
            ));
        }
        let loaded = state.loaded.get().ok_or_else(loading)?;
        let emb = state.embeddings.get().ok_or_else(loading)?;
        if let Some(d) = req.dimensions
            && d != emb.n_embd as u64
        {
            return Err(ApiError::bad_request(format!(
                "dimensions {d}: this model's embeddings have {} and cannot be shortened",
                emb.n_embd
            )));
        }
        let engine = Arc::clone(&loaded.engine);
        let (n_ctx, inputs) = (emb.n_ctx, req.inputs);
        let tokens = tokio::task::spawn_blocking(move || {
            let n_vocab = i64::from(engine.model().n_vocab());
            inputs
                .iter()
                .enumerate()
                .map(|(i, input)| {
                    let t = match input {
                        openai::EmbeddingInput::Text(text) => engine
                            .tokenize(text, true)
                            .map_err(|e| ApiError::bad_request(format!("input[{i}]: {e:#}")))?,
                        openai::EmbeddingInput::Tokens(ids) => ids
                            .iter()
                            .map(|&id| {
                                i32::try_from(id)
                                    .ok()
                                    .filter(|_| (0..n_vocab).contains(&id))
                                    .map(llama_cpp_2::token::LlamaToken::new)
                                    .ok_or_else(|| {
                                        ApiError::bad_request(format!(
                                            "input[{i}]: token {id} is not in the vocabulary (0..{n_vocab})"
                                        ))
                                    })
                            })
                            .collect::<Result<Vec<_>, _>>()?,
                    };
                    if t.len() > n_ctx {
                        return Err(ApiError::bad_request(format!(
                            "input[{i}]: {} tokens; the embedding context holds {n_ctx} (serve --embeddings N)",
                            t.len()
                        )));
                    }
                    Ok(t)
                })
                .collect::<Result<Vec<_>, ApiError>>()
        })
        .await
        .map_err(|e| internal(&e))??;
        let n_tokens: usize = tokens.iter().map(Vec::len).sum();
        let n_inputs = tokens.len() as u64;
        let (tx, rx) = tokio::sync::oneshot::channel();
        emb.jobs
            .try_send(EmbedJob {
                inputs: tokens,
                reply: tx,
            })
            .map_err(|e| match e {
                std::sync::mpsc::TrySendError::Full(_) => busy(&state, Rejected::Full),
                std::sync::mpsc::TrySendError::Disconnected(_) => busy(&state, Rejected::Closed),
            })?;
        let vectors = rx
            .await
            .map_err(|_| busy(&state, Rejected::Closed))?
            .map_err(|e| internal(&e))?;
        state
            .stats
            .embedding_inputs
            .fetch_add(n_inputs, Ordering::Relaxed);
        let data: Vec<Value> = vectors
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let embedding = if req.base64 {
                    json!(openai::base64_floats(v))
                } else {
                    json!(v)
                };
                json!({"object": "embedding", "index": i, "embedding": embedding})
            })
            .collect();
        Ok(json!({
            "object": "list",
            "data": data,
            "model": state.config.model_id,
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
        }))
    };
    match answer.await {
        Ok(v) => json_ok(&state, &v),
        Err(e) => error(&state, &e),
    }
}

/// The grammar a chat answer keeps to under its `response_format`: the
/// schema checked against what llama.cpp's converter enforces (a keyword it
/// would ignore is a 400 naming it, never a silent "any JSON"), converted by
/// that converter, and parsed once here so a grammar llama.cpp cannot load
/// is this request's 400, not the scheduler's failure.
fn answer_grammar(engine: &Engine, format: &AnswerFormat) -> Result<Option<String>, ApiError> {
    let Some(schema) = format.schema() else {
        return Ok(None);
    };
    let refused = |e: String| ApiError::bad_request(format!("response_format: {e}"));
    schema::check(&schema.value, &crate::llama::grammar::pattern_is_enforced).map_err(refused)?;
    let grammar = crate::llama::grammar::schema_grammar(&schema.text).map_err(refused)?;
    llama_cpp_2::sampling::LlamaSampler::grammar(engine.model(), &grammar, "root").map_err(
        |e| {
            refused(format!(
                "llama.cpp could not load the schema's grammar ({e})"
            ))
        },
    )?;
    Ok(Some(grammar))
}

/// 503: the queue is full, or the server is stopping.
fn busy(state: &AppState, why: Rejected) -> ApiError {
    let message = match why {
        Rejected::Full => format!(
            "every slot is busy and the queue is full ({} slots, {} waiting): retry later",
            state.config.slots,
            state.admission.queued()
        ),
        Rejected::Closed => "the server is shutting down".to_string(),
    };
    ApiError {
        status: 503,
        message,
        kind: "server_error",
        code: Some(match why {
            Rejected::Full => "queue_full",
            Rejected::Closed => "shutting_down",
        }),
    }
}

fn internal(e: &dyn std::fmt::Display) -> ApiError {
    ApiError {
        status: 500,
        message: format!("internal error: {e}"),
        kind: "server_error",
        code: None,
    }
}

/// Check the prompt against a slot, queue the job, answer.
async fn submit(
    state: &Arc<AppState>,
    kind: Kind,
    tokens: Vec<llama_cpp_2::token::LlamaToken>,
    template_stops: Vec<String>,
    params: Params,
    answer: Answer,
) -> Response {
    let n_slot = state.config.n_ctx_slot;
    if tokens.is_empty() {
        return error(state, &ApiError::bad_request("the prompt is empty"));
    }
    if tokens.len() >= n_slot {
        return error(
            state,
            &ApiError {
                status: 400,
                message: format!(
                    "the prompt is {} tokens and a slot holds {n_slot} ({} slots): shorten it, or restart with a larger --ctx-size or fewer --parallel slots",
                    tokens.len(),
                    state.config.slots
                ),
                kind: "invalid_request_error",
                code: Some("context_length_exceeded"),
            },
        );
    }
    let room = u32::try_from(n_slot - tokens.len()).unwrap_or(u32::MAX);
    let max_tokens = params.max_tokens.map_or(room, |m| m.min(room));
    let opts = GenOptions {
        sampling: Sampling {
            temp: params.temperature,
            top_p: params.top_p,
            repeat_penalty: 1.0,
            seed: params.seed.unwrap_or(crate::runner::DEFAULT_SEED),
            ..state.config.defaults.clone()
        },
        n_predict: Some(max_tokens),
        ignore_eos: false,
        stop: params.stop.iter().cloned().chain(template_stops).collect(),
        grammar: params.grammar.clone(),
        grammar_triggers: params.grammar_triggers.clone(),
    };
    let (tx, rx) = unbounded_channel();
    let n_prompt = tokens.len();
    let job = Job {
        prompt: tokens,
        opts,
        events: tx,
        logprobs: params.logprobs,
    };
    if let Err((why, _)) = state.admission.submit(job) {
        return error(state, &busy(state, why));
    }
    let head = Header {
        id: state.id(match kind {
            Kind::Chat => "chatcmpl",
            Kind::Completion => "cmpl",
        }),
        created: unix_now(),
        model: state.config.model_id.clone(),
        kind,
    };
    if params.stream {
        state.responses.add(200);
        let lp = params.logprobs.is_some();
        return Sse::new(sse_stream(
            head,
            rx,
            params.include_usage,
            n_prompt,
            lp,
            (answer, state.id("call")),
        ))
        .into_response();
    }
    // The whole answer. If the client goes away, axum drops this future,
    // which drops `rx`, and the scheduler frees the slot at its next step.
    let mut rx = rx;
    let mut text = String::new();
    let mut logprobs = Vec::new();
    let mut answer = answer;
    loop {
        match rx.recv().await {
            Some(Event::Text(t)) => text.push_str(&t),
            Some(Event::Logprob(l)) => logprobs.push(l),
            Some(Event::Done(s)) => {
                let (mut reasoning, mut content) = answer.push(&text);
                let (r, c, calls) = answer.finish();
                reasoning.push_str(&r);
                content.push_str(&c);
                let mut v = head.complete(&content, s.stop_reason, usage_of(&s));
                if let Some(m) = v.pointer_mut("/choices/0/message") {
                    if !reasoning.is_empty() {
                        m["reasoning_content"] = json!(reasoning);
                    }
                    if !calls.is_empty() {
                        let base = state.id("call");
                        m["tool_calls"] = tools::tool_calls_json(&calls, &base, false);
                        if content.is_empty() {
                            m["content"] = Value::Null;
                        }
                    }
                }
                if !calls.is_empty() {
                    v["choices"][0]["finish_reason"] = json!("tool_calls");
                }
                if params.logprobs.is_some() {
                    openai::set_logprobs(&mut v, head.logprobs(&logprobs, 0));
                }
                return json_ok(state, &v);
            }
            Some(Event::Failed(why)) => return error(state, &internal(&why)),
            None => return error(state, &internal(&"the scheduler stopped")),
        }
    }
}

fn usage_of(s: &Summary) -> Usage {
    Usage {
        prompt: s.tokens_prompt,
        cached: s.tokens_cached,
        completion: s.tokens_generated,
    }
}

/// A chat chunk with `reasoning_content` and/or `content` (either left out
/// when empty).
fn reasoning_chunk(head: &Header, reasoning: &str, content: &str) -> Value {
    let mut c = head.chunk((!content.is_empty()).then_some(content), false, None);
    if !reasoning.is_empty()
        && let Some(d) = c.pointer_mut("/choices/0/delta")
    {
        d["reasoning_content"] = json!(reasoning);
    }
    c
}

/// A job's event other than a log-probability.
enum Next {
    Text(String),
    Done(Summary),
    Failed(String),
    /// The scheduler dropped the job's sender.
    Closed,
}

/// The next event that is not a log-probability (those go into `lps`).
async fn recv_text(rx: &mut UnboundedReceiver<Event>, lps: &mut Vec<TokenLogprob>) -> Next {
    loop {
        match rx.recv().await {
            Some(Event::Logprob(l)) => lps.push(l),
            Some(Event::Text(t)) => return Next::Text(t),
            Some(Event::Done(s)) => return Next::Done(s),
            Some(Event::Failed(why)) => return Next::Failed(why),
            None => return Next::Closed,
        }
    }
}

/// Server-sent events: a first chunk, one per piece of text, the tool
/// calls (one chunk, each call with its `index` and `id`) when the model
/// made any, the last chunk with its `finish_reason`, the usage chunk when
/// asked, then `[DONE]`.
fn sse_stream(
    head: Header,
    rx: UnboundedReceiver<Event>,
    include_usage: bool,
    n_prompt: usize,
    logprobs: bool,
    (answer, call_ids): (Answer, String),
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    enum Phase {
        First,
        Body,
        /// The last chunk, after the tool calls' chunk.
        Last(Value, Summary),
        Usage(Summary),
        Done,
        End,
    }
    struct St {
        rx: UnboundedReceiver<Event>,
        head: Header,
        lps: Vec<TokenLogprob>,
        /// The characters of the answer sent so far (legacy `text_offset`).
        offset: usize,
        answer: Answer,
    }
    let data = |v: &Value| Ok(SseEvent::default().data(v.to_string()));
    // Log-probabilities wait for the text their tokens make (a chunk's
    // delta carries its own tokens').
    let with_lp = move |st: &mut St, mut c: Value| {
        if logprobs {
            openai::set_logprobs(&mut c, st.head.logprobs(&st.lps, st.offset));
            st.lps.clear();
        }
        c
    };
    let after_last = move |s: Summary| {
        if include_usage {
            Phase::Usage(s)
        } else {
            Phase::Done
        }
    };
    let st = St {
        rx,
        head,
        lps: Vec::new(),
        offset: 0,
        answer,
    };
    stream::unfold((Phase::First, st), move |(phase, mut st)| {
        let call_ids = call_ids.clone();
        async move {
            match phase {
                Phase::First => {
                    let first = match st.head.kind {
                        Kind::Chat => st.head.chunk(Some(""), true, None),
                        Kind::Completion => st.head.chunk(Some(""), false, None),
                    };
                    Some((data(&first), (Phase::Body, st)))
                }
                Phase::Body => match recv_text(&mut st.rx, &mut st.lps).await {
                    Next::Text(t) => {
                        let c = if st.head.kind == Kind::Chat {
                            let (r, c) = st.answer.push(&t);
                            reasoning_chunk(&st.head, &r, &c)
                        } else {
                            st.head.chunk(Some(&t), false, None)
                        };
                        let c = with_lp(&mut st, c);
                        st.offset += t.chars().count();
                        Some((data(&c), (Phase::Body, st)))
                    }
                    Next::Done(s) => {
                        let mut last = st.head.chunk(None, false, Some(s.stop_reason));
                        let (r, t, calls) = st.answer.finish();
                        let held = reasoning_chunk(&st.head, &r, &t);
                        if let Some(d) = held.pointer("/choices/0/delta") {
                            last["choices"][0]["delta"] = d.clone();
                        }
                        let last = with_lp(&mut st, last);
                        if calls.is_empty() {
                            return Some((data(&last), (after_last(s), st)));
                        }
                        let mut c = st.head.chunk(None, false, None);
                        c["choices"][0]["delta"]["tool_calls"] =
                            tools::tool_calls_json(&calls, &call_ids, true);
                        let mut last = last;
                        last["choices"][0]["finish_reason"] = json!("tool_calls");
                        Some((data(&c), (Phase::Last(last, s), st)))
                    }
                    Next::Failed(why) => {
                        let e = internal(&why).body();
                        Some((data(&e), (Phase::Done, st)))
                    }
                    Next::Closed => {
                        let c = st.head.chunk(None, false, Some(StopReason::Interrupted));
                        let s = Summary {
                            tokens_prompt: n_prompt,
                            tokens_cached: 0,
                            tokens_generated: 0,
                            stop_reason: StopReason::Interrupted,
                            time_to_first_token: None,
                        };
                        Some((data(&c), (after_last(s), st)))
                    }
                },
                Phase::Last(last, s) => Some((data(&last), (after_last(s), st))),
                Phase::Usage(s) => {
                    let u = st.head.usage_chunk(usage_of(&s));
                    Some((data(&u), (Phase::Done, st)))
                }
                Phase::Done => Some((Ok(SseEvent::default().data("[DONE]")), (Phase::End, st))),
                Phase::End => None,
            }
        }
    })
}
