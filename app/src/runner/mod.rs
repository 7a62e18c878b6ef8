//! The runner: loads a model through llama-cpp-2 with exactly the parameters
//! a plan chose, and generates text from it, streaming.
//!
//! * [`load`]: plan → llama.cpp parameters (one value for the accounting
//!   cross-check and the real load).
//! * [`guard`]: refuse plans that do not fit, find the nearest one that does,
//!   and check the plan against llama.cpp's own `no_alloc` accounting.
//! * [`text`]: UTF-8-safe streaming and stop strings.
//! * [`Engine`] / [`Session`]: the loaded model, and a context that keeps its
//!   KV cache between turns (the chat reuses the common prefix).

pub mod batch;
pub mod calibration;
pub mod embed;
pub mod guard;
pub mod load;
pub mod measure;
pub mod prefix;
pub mod preflight;
pub mod prompt;
pub mod reasoning;
pub mod report;
pub mod template;
pub mod text;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::logit_bias::LlamaLogitBias;
use serde::Serialize;

use crate::llama;
use crate::llama::AccountingParams;
use text::{Matched, StopMatcher, Utf8Stream};

/// Sampling options (llama.cpp's names and defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct Sampling {
    /// Temperature; 0 is greedy (deterministic).
    pub temp: f32,
    /// Keep the k most likely tokens; 0 = all.
    pub top_k: i32,
    /// Nucleus sampling; 1.0 = off.
    pub top_p: f32,
    /// Drop tokens below this share of the best one's probability; 0 = off.
    pub min_p: f32,
    /// Penalty for repeating recent tokens; 1.0 = off.
    pub repeat_penalty: f32,
    /// How many recent tokens the penalty looks at.
    pub repeat_last_n: i32,
    /// Random seed.
    pub seed: u32,
}

/// llama.cpp's "pick a random seed" value (`LLAMA_DEFAULT_SEED`).
pub const DEFAULT_SEED: u32 = 0xFFFF_FFFF;

impl Sampling {
    /// llama.cpp's command-line defaults (`common/common.h`), defined once: the
    /// command line's defaults are these fields.
    pub const DEFAULT: Sampling = Sampling {
        temp: 0.8,
        top_k: 40,
        top_p: 0.95,
        min_p: 0.05,
        repeat_penalty: 1.0,
        repeat_last_n: 64,
        seed: DEFAULT_SEED,
    };
}

impl Default for Sampling {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// How one generation runs.
#[derive(Debug, Clone, Default)]
pub struct GenOptions {
    /// Sampling.
    pub sampling: Sampling,
    /// Most tokens to generate; `None` = until end of generation or a full context.
    pub n_predict: Option<u32>,
    /// Keep going past end-of-generation tokens (they are banned).
    pub ignore_eos: bool,
    /// Stop when the text contains one of these (not printed).
    pub stop: Vec<String>,
    /// A GBNF grammar (root rule `root`) every generated token must keep
    /// to, e.g. from a `response_format` schema; checked before it gets here.
    pub grammar: Option<String>,
    /// With these (regular expressions over the text generated so far),
    /// the grammar is lazy: it applies from where the first one matches (a
    /// tool call's opening), not from the start.
    pub grammar_triggers: Vec<String>,
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model produced an end-of-generation token.
    EndOfGeneration,
    /// A `--stop` string (or the template's end-of-turn text) appeared.
    StopString,
    /// `--n-predict` tokens were generated.
    MaxTokens,
    /// The context is full.
    ContextFull,
    /// Interrupted (Ctrl-C, Esc, or the consumer asked to stop).
    Interrupted,
}

impl StopReason {
    /// The words used in JSON and messages.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::EndOfGeneration => "end_of_generation",
            Self::StopString => "stop_string",
            Self::MaxTokens => "max_tokens",
            Self::ContextFull => "context_full",
            Self::Interrupted => "interrupted",
        }
    }
}

/// What one generation did.
#[derive(Debug, Clone)]
pub struct Generation {
    /// The text, as streamed.
    pub text: String,
    /// Prompt tokens given.
    pub tokens_prompt: usize,
    /// Prompt tokens actually evaluated (the rest were already in the cache).
    pub tokens_evaluated: usize,
    /// Tokens generated.
    pub tokens_generated: usize,
    /// Time to evaluate the prompt.
    pub prompt_time: Duration,
    /// Time to generate (sampling and evaluating each generated token).
    pub decode_time: Duration,
    /// Cores other processes used meanwhile ([`calibration::OtherWork`]).
    pub other_cpu_cores: Option<f64>,
    /// Why it ended.
    pub stop_reason: StopReason,
}

impl Generation {
    /// Prompt tokens per second (of the tokens evaluated).
    #[must_use]
    pub fn prompt_tokens_per_s(&self) -> f64 {
        rate(self.tokens_evaluated, self.prompt_time)
    }

    /// Generated tokens per second.
    #[must_use]
    pub fn decode_tokens_per_s(&self) -> f64 {
        rate(self.tokens_generated, self.decode_time)
    }
}

/// The most likely token (the first of equals, as llama.cpp's greedy sampler
/// picks), never one of `banned`.
///
/// Called once per generated token over the whole vocabulary (262k logits
/// for Gemma): a compare-and-branch scan took 0.1–0.2 ms of a 14 ms token,
/// so the maximum is found in 16 independent lanes, which the compiler
/// vectorises, and then its first position, chunk by chunk. A banned winner
/// (an end-of-generation token under `ignore_eos`) falls back to the scan.
fn argmax(logits: &[f32], banned: &[LlamaToken]) -> LlamaToken {
    const LANES: usize = 16;
    let is_banned = |i: usize| {
        banned
            .iter()
            .any(|b| usize::try_from(b.0).is_ok_and(|b| b == i))
    };
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let chunks = logits.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (m, &l) in lanes.iter_mut().zip(chunk) {
            // NaN compares false and is skipped, as in the scan below.
            *m = if l > *m { l } else { *m };
        }
    }
    let max = lanes
        .iter()
        .chain(tail)
        .fold(f32::NEG_INFINITY, |m, &l| if l > m { l } else { m });
    let mut from = 0;
    for chunk in logits.chunks(LANES) {
        if chunk.iter().fold(false, |hit, &l| hit | (l == max)) {
            break;
        }
        from += chunk.len();
    }
    let first = logits[from..]
        .iter()
        .position(|&l| l == max)
        .map(|k| from + k)
        // Every logit NaN or -inf: the scan's answer, token 0.
        .filter(|&i| max > f32::NEG_INFINITY && !is_banned(i));
    let best = first.unwrap_or_else(|| {
        let mut best = (0usize, f32::NEG_INFINITY);
        for (i, &l) in logits.iter().enumerate() {
            if l > best.1 && !is_banned(i) {
                best = (i, l);
            }
        }
        best.0
    });
    LlamaToken::new(i32::try_from(best).unwrap_or(0))
}

/// llama.cpp's last error line, as the tail of an error message.
fn llama_said() -> String {
    crate::llama::log::first_error().map_or_else(
        || "; run with -v for llama.cpp's log".to_string(),
        |l| format!("; llama.cpp said: {l}"),
    )
}

fn rate(n: usize, t: Duration) -> f64 {
    let s = t.as_secs_f64();
    if n == 0 || s <= 0.0 {
        0.0
    } else {
        n as f64 / s
    }
}

/// A loaded model.
pub struct Engine {
    model: LlamaModel,
    spec: AccountingParams,
    /// How long the load took.
    pub load_time: Duration,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("path", &self.spec.path)
            .field("load_time", &self.load_time)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Load the model `spec` describes (`spec.no_alloc` is ignored: this loads).
    /// `progress` is called with 0.0…1.0; returning false cancels the load.
    ///
    /// # Errors
    /// Parameters llama-cpp-2 cannot set, or llama.cpp failing to load (the
    /// reason is in llama.cpp's log, which `-v` shows).
    pub fn load(
        spec: &AccountingParams,
        progress: Option<Box<dyn FnMut(f32) -> bool>>,
    ) -> Result<Engine> {
        let backend = crate::llama::backend::shared()
            .context("llama.cpp's backend was initialised outside headroom")?;
        let params = load::model_params(spec, progress)?;
        let t0 = Instant::now();
        crate::llama::log::clear();
        let model =
            LlamaModel::load_from_file(backend, &spec.path, &params.params).map_err(|e| {
                anyhow::anyhow!(
                    "llama.cpp could not load {} ({e}){}",
                    spec.path.display(),
                    llama_said()
                )
            })?;
        Ok(Engine {
            model,
            spec: spec.clone(),
            load_time: t0.elapsed(),
        })
    }

    /// The parameters it was loaded with.
    #[must_use]
    pub fn spec(&self) -> &AccountingParams {
        &self.spec
    }

    /// The llama-cpp-2 model.
    #[must_use]
    pub fn model(&self) -> &LlamaModel {
        &self.model
    }

    /// Create the context (KV cache, compute buffers) the plan chose.
    ///
    /// # Errors
    /// llama.cpp failing to allocate it.
    pub fn session(&self) -> Result<Session<'_>> {
        let backend = crate::llama::backend::shared()
            .context("llama.cpp's backend was initialised outside headroom")?;
        let t0 = Instant::now();
        crate::llama::log::clear();
        let ctx = self
            .model
            .new_context(backend, load::context_params(&self.spec)?)
            .map_err(|e| {
                anyhow::anyhow!(
                    "llama.cpp could not create the context (n_ctx {}, KV cache and compute buffers): {e}{}",
                    self.spec.n_ctx,
                    llama_said()
                )
            })?;
        let n_batch = ctx.n_batch() as usize;
        let mut session = Session {
            engine: self,
            ctx,
            cached: Vec::new(),
            batch: LlamaBatch::new(n_batch.max(1), 1),
            create_time: Duration::ZERO,
        };
        session.warm_up()?;
        session.create_time = t0.elapsed();
        Ok(session)
    }

    /// Tokenize text; `add_bos` adds the model's BOS token when it wants one.
    /// Special-token text (`<start_of_turn>`) is parsed as special tokens.
    ///
    /// # Errors
    /// llama.cpp's tokenizer throws on this vocabulary (a malformed one: a
    /// byte with no token), caught by the shim instead of aborting.
    pub fn tokenize(&self, text: &str, add_bos: bool) -> Result<Vec<LlamaToken>> {
        Ok(crate::llama::vocab::tokenize(
            &self.model.vocab(),
            text.as_bytes(),
            add_bos,
            true,
        )?)
    }

    /// The vocabulary text of a token (`<bos>`), empty when it has none.
    #[must_use]
    pub fn token_text(&self, token: LlamaToken) -> String {
        self.model
            .vocab()
            .text(token)
            .map(|t| t.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// BOS and EOS token texts, for templates.
    #[must_use]
    pub fn bos_eos(&self) -> (String, String) {
        let v = self.model.vocab();
        (self.token_text(v.bos()), self.token_text(v.eos()))
    }

    fn eog_tokens(&self) -> Vec<LlamaToken> {
        let v = self.model.vocab();
        (0..self.model.n_vocab())
            .map(LlamaToken::new)
            .filter(|&t| v.is_eog(t))
            .collect()
    }
}

/// A context on a loaded model: the KV cache and what it holds.
pub struct Session<'m> {
    engine: &'m Engine,
    ctx: LlamaContext<'m>,
    /// Tokens whose keys and values are in the cache, in order.
    cached: Vec<LlamaToken>,
    batch: LlamaBatch<'static>,
    /// How long creating the context took.
    pub create_time: Duration,
}

impl Session<'_> {
    /// Context size in tokens.
    #[must_use]
    pub fn n_ctx(&self) -> u32 {
        self.ctx.n_ctx()
    }

    /// Tokens in the cache.
    #[must_use]
    pub fn n_cached(&self) -> usize {
        self.cached.len()
    }

    /// What llama.cpp's own tools do before timing anything: evaluate BOS
    /// and EOS once (threads started, mapped weights paged in, compute graph
    /// built), then forget it.
    fn warm_up(&mut self) -> Result<()> {
        let vocab = self.engine.model.vocab();
        let mut tokens = vec![vocab.bos(), vocab.eos()];
        tokens.retain(|t| t.0 >= 0);
        if tokens.is_empty() {
            return Ok(());
        }
        self.batch.clear();
        let last = tokens.len() - 1;
        for (i, &t) in tokens.iter().enumerate() {
            self.batch.add(t, i32::try_from(i)?, &[0], i == last)?;
        }
        self.ctx.decode(&mut self.batch).map_err(|e| {
            anyhow::anyhow!(
                "llama.cpp failed to evaluate the warm-up batch: {}",
                llama::decode::describe(&e)
            )
        })?;
        self.batch.clear();
        self.clear();
        self.ctx.reset_timings();
        Ok(())
    }

    /// Forget everything in the cache.
    pub fn clear(&mut self) {
        self.ctx.clear_kv_cache();
        self.cached.clear();
    }

    /// Generate from `prompt` (the whole conversation so far, as tokens: the
    /// part already in the cache is not evaluated again). `on_text` gets the
    /// text as it becomes safe to show; returning false stops. `cancel` is
    /// polled between tokens and between prompt batches.
    ///
    /// # Errors
    /// A prompt longer than the context, or llama.cpp failing to decode.
    pub fn generate(
        &mut self,
        prompt: &[LlamaToken],
        opts: &GenOptions,
        cancel: &AtomicBool,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Generation> {
        let n_ctx = self.n_ctx() as usize;
        if prompt.is_empty() {
            bail!("the prompt is empty");
        }
        if prompt.len() >= n_ctx {
            bail!(
                "the prompt is {} tokens and the context holds {n_ctx}: raise --ctx-size or shorten the prompt",
                prompt.len()
            );
        }
        // `self.ctx.decode` (llama_decode) is guarded: the linker routes it
        // through the shim's try/catch (app/shim/decode.cpp, `llama::decode`),
        // so a C++ exception from the backend (Vulkan's lazily allocated
        // buffers, a lost device) ends the request with one line.
        // ACCEPTED RISK: `sampler.sample` / `accept_many` (llama_sampler_*)
        // go through llama-cpp-2 unguarded: a std::bad_alloc from the
        // sampler's n_vocab candidate array would unwind into Rust and abort.
        // A GGML_ASSERT / GGML_ABORT (a batch over n_batch, a backend
        // failing) is abort() anywhere, which no wrapper can catch.
        // What defends: the planner refuses, before any weight is read, a
        // model and context that do not fit the memory budget, and the plan
        // is checked against llama.cpp's own no_alloc accounting of the very
        // same load (guard, preflight); batches are built here within
        // n_batch and the context (checked above); hostile GGUF headers are
        // refused before llama.cpp opens the file.
        self.reuse_prefix(prompt);
        let mut sampler = self.sampler(opts);
        sampler.accept_many(prompt.iter());

        // Prompt, in batches of n_batch; logits only for the last token.
        let t0 = Instant::now();
        let todo = &prompt[self.cached.len()..];
        let evaluated = todo.len();
        let n_batch = self.ctx.n_batch() as usize;
        let mut interrupted = false;
        for (ci, chunk) in todo.chunks(n_batch.max(1)).enumerate() {
            if cancel.load(Ordering::Relaxed) {
                interrupted = true;
                break;
            }
            let last_chunk = (ci + 1) * n_batch >= todo.len();
            self.batch.clear();
            let base = self.cached.len();
            for (i, &t) in chunk.iter().enumerate() {
                let pos = i32::try_from(base + i)?;
                self.batch
                    .add(t, pos, &[0], last_chunk && i + 1 == chunk.len())?;
            }
            if let Err(e) = self.ctx.decode(&mut self.batch) {
                // A failed decode may have stored part of the chunk: forget
                // the cache, so the next turn evaluates from the start
                // instead of trusting cells it cannot account for.
                self.clear();
                bail!(
                    "llama.cpp failed to evaluate the prompt: {}",
                    llama::decode::describe(&e)
                );
            }
            // Only what llama.cpp evaluated is counted as cached.
            self.cached.extend_from_slice(chunk);
        }
        let prompt_time = t0.elapsed();
        let mut out = Generation {
            text: String::new(),
            tokens_prompt: prompt.len(),
            tokens_evaluated: evaluated,
            tokens_generated: 0,
            prompt_time,
            decode_time: Duration::ZERO,
            other_cpu_cores: None,
            stop_reason: StopReason::Interrupted,
        };
        if interrupted {
            return Ok(out);
        }

        let vocab = self.engine.model.vocab();
        // Plain greedy decoding reads the logits directly: the sampler chain
        // would copy all n_vocab candidates (262k for Gemma) for every token.
        let greedy = opts.sampling.temp <= 0.0 && opts.sampling.repeat_penalty == 1.0;
        let banned = if greedy && opts.ignore_eos {
            self.engine.eog_tokens()
        } else {
            Vec::new()
        };
        let mut utf8 = Utf8Stream::default();
        let mut stops = StopMatcher::new(opts.stop.iter().cloned());
        let t1 = Instant::now();
        let other_work = calibration::OtherWork::start();
        let reason = loop {
            if cancel.load(Ordering::Relaxed) {
                break StopReason::Interrupted;
            }
            if opts
                .n_predict
                .is_some_and(|n| out.tokens_generated >= n as usize)
            {
                break StopReason::MaxTokens;
            }
            if self.cached.len() >= n_ctx {
                break StopReason::ContextFull;
            }
            let idx = self.batch.n_tokens() - 1;
            let token = if greedy {
                argmax(self.ctx.get_logits_ith(idx), &banned)
            } else {
                sampler.sample(&self.ctx, idx)
            };
            if !opts.ignore_eos && vocab.is_eog(token) {
                break StopReason::EndOfGeneration;
            }
            // Control tokens print as nothing, so a stop string that is one
            // (`<|im_end|>` where it is not an end-of-generation token) is
            // matched on the token itself.
            if vocab.is_control(token) {
                let text = self.engine.token_text(token);
                if opts.stop.contains(&text) {
                    break StopReason::StopString;
                }
            }
            out.tokens_generated += 1;
            let piece = utf8.push(&crate::llama::vocab::token_to_piece(&vocab, token, false)?);
            let mut stop_now = false;
            match stops.push(&piece) {
                Matched::Go(text) => {
                    if !text.is_empty() {
                        out.text.push_str(&text);
                        if !on_text(&text) {
                            stop_now = true;
                        }
                    }
                }
                Matched::Stop(text, _) => {
                    out.text.push_str(&text);
                    if !text.is_empty() {
                        on_text(&text);
                    }
                    break StopReason::StopString;
                }
            }
            // Evaluate the token so the cache holds the whole text.
            self.batch.clear();
            let pos = i32::try_from(self.cached.len())?;
            self.batch.add(token, pos, &[0], true)?;
            if let Err(e) = self.ctx.decode(&mut self.batch) {
                self.clear();
                bail!(
                    "llama.cpp failed to evaluate a token: {}",
                    llama::decode::describe(&e)
                );
            }
            self.cached.push(token);
            if stop_now {
                break StopReason::Interrupted;
            }
        };
        out.decode_time = t1.elapsed();
        out.other_cpu_cores = other_work.and_then(|w| w.cores());
        if reason != StopReason::StopString {
            let mut tail = utf8.finish();
            tail.insert_str(0, &stops.finish());
            if !tail.is_empty() {
                out.text.push_str(&tail);
                on_text(&tail);
            }
        }
        out.stop_reason = reason;
        Ok(out)
    }

    /// Keep the longest cached prefix shared with `prompt` and drop the rest
    /// from the KV cache. At least the last prompt token is evaluated again
    /// (its logits are needed).
    fn reuse_prefix(&mut self, prompt: &[LlamaToken]) {
        // The server's rule (`prefix`): a recurrent state keeps only an
        // exact extension, and a sliding-window cache only a cut whose
        // window is still in its cells; `seq_rm` alone succeeds on a
        // sliding-window cache that has already dropped them.
        let memory = prefix::Memory::of(self.engine.model());
        let common = prefix::common_prefix(&self.cached, prompt);
        let keep = prefix::keep(memory, self.cached.len(), common, prompt.len());
        if keep == self.cached.len() {
            return;
        }
        let removed = keep > 0
            && u32::try_from(keep)
                .ok()
                .and_then(|p0| self.ctx.clear_kv_cache_seq(Some(0), Some(p0), None).ok())
                .unwrap_or(false)
            && prefix::window_holds(memory, self.ctx.kv_cache_seq_pos_min(0), keep);
        if removed {
            self.cached.truncate(keep);
        } else {
            self.clear();
        }
    }

    fn sampler(&self, opts: &GenOptions) -> LlamaSampler {
        sampler(self.engine, opts)
    }
}

/// The sampler chain for `opts` (llama.cpp's order: bans, penalties, then
/// greedy, or top-k, top-p, min-p, temperature and the seeded draw).
fn sampler(engine: &Engine, opts: &GenOptions) -> LlamaSampler {
    {
        let s = &opts.sampling;
        let model = &engine.model;
        let mut chain = Vec::new();
        if opts.ignore_eos {
            let bans: Vec<LlamaLogitBias> = engine
                .eog_tokens()
                .into_iter()
                .map(|t| LlamaLogitBias::new(t, f32::NEG_INFINITY))
                .collect();
            chain.push(LlamaSampler::logit_bias(model.n_vocab(), &bans));
        }
        if s.repeat_penalty != 1.0 {
            chain.push(LlamaSampler::penalties(
                model.n_vocab(),
                s.repeat_last_n,
                s.repeat_penalty,
                0.0,
                0.0,
            ));
        }
        if s.temp <= 0.0 {
            chain.push(LlamaSampler::greedy());
        } else {
            if s.top_k > 0 {
                chain.push(LlamaSampler::top_k(s.top_k));
            }
            if s.top_p < 1.0 {
                chain.push(LlamaSampler::top_p(s.top_p, 1));
            }
            if s.min_p > 0.0 {
                chain.push(LlamaSampler::min_p(s.min_p, 1));
            }
            chain.push(LlamaSampler::temp(s.temp));
            chain.push(LlamaSampler::dist(s.seed));
        }
        LlamaSampler::chain_simple(chain)
    }
}

#[cfg(test)]
mod argmax_tests {
    use super::*;

    /// The plain scan `argmax` replaced: first of equals, banned skipped.
    fn scan(logits: &[f32], banned: &[LlamaToken]) -> LlamaToken {
        let mut best = (0usize, f32::NEG_INFINITY);
        for (i, &l) in logits.iter().enumerate() {
            if l > best.1 && !banned.iter().any(|b| b.0 as usize == i) {
                best = (i, l);
            }
        }
        LlamaToken::new(best.0 as i32)
    }

    #[test]
    fn argmax_picks_what_the_scan_picks() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for case in 0..400 {
            let n = 1 + (next() % 700) as usize;
            // Few distinct values, so ties are common.
            let mut logits: Vec<f32> = (0..n).map(|_| (next() % 9) as f32 - 4.0).collect();
            if case % 7 == 0 {
                logits[(next() % n as u64) as usize] = f32::NAN;
            }
            if case % 11 == 0 {
                logits.iter_mut().for_each(|l| *l = f32::NEG_INFINITY);
            }
            let top = scan(&logits, &[]);
            let banned = if case % 3 == 0 { vec![top] } else { Vec::new() };
            assert_eq!(
                argmax(&logits, &banned),
                scan(&logits, &banned),
                "case {case}: {logits:?} banned {banned:?}"
            );
        }
        assert_eq!(argmax(&[f32::NAN; 40], &[]), LlamaToken::new(0));
        assert_eq!(argmax(&[], &[]), LlamaToken::new(0));
    }
}
