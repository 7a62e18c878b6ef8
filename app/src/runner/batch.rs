//! Several sequences on one context, advanced together (continuous
//! batching): the engine behind `serve`.
//!
//! One llama.cpp context holds every slot (`n_seq_max` = slots; llama.cpp
//! gives each sequence `n_ctx / n_seq_max` cells). Each step builds one
//! batch: the next token of every generating slot, then the pending prompt
//! tokens of newly admitted ones, up to `n_batch`; one `llama_decode`
//! evaluates them all, and every slot whose logits came back samples its
//! next token. A request never waits for another to finish while a slot is
//! free.
//!
//! Admission is bounded: a request takes a free slot, or waits in a FIFO of
//! at most `max_queue`; beyond that [`Admission::submit`] refuses it at once
//! ([`Rejected::Full`]), so a burst costs a refusal, not memory.
//! A request whose receiver is dropped (its client went away) frees its slot
//! at the next step.
//!
//! A slot keeps its KV cells when its job ends, with the tokens they hold:
//! the next job goes to the free slot sharing the longest prefix with its
//! prompt and evaluates only the rest ([`super::prefix`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::vocab::LlamaVocab;
use tokio::sync::mpsc::UnboundedSender;

use super::prefix::{self, Memory};
use super::text::{Matched, StopMatcher, Utf8Stream};
use super::{Engine, GenOptions, StopReason, argmax, sampler};

/// One request for a slot.
pub struct Job {
    /// The prompt, tokenized (at least one token, shorter than a slot).
    pub prompt: Vec<LlamaToken>,
    /// Sampling, the token limit (already clamped to the slot) and stop strings.
    pub opts: GenOptions,
    /// Where its events go; dropping the receiver cancels the job.
    pub events: UnboundedSender<Event>,
    /// Report each generated token's log-probability and this many
    /// alternatives ([`Event::Logprob`]); `None`: nothing is computed.
    pub logprobs: Option<usize>,
}

/// A token's log-probability: the log-softmax of the model's raw logits at
/// its position (before temperature, penalties or truncation), as
/// llama-server reports by default (`post_sampling_probs` off).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    /// The token's text (its bytes, lossily decoded).
    pub token: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Its natural-log probability.
    pub logprob: f32,
    /// The most likely tokens at this position, most likely first.
    pub top: Vec<(String, Vec<u8>, f32)>,
}

/// What a job reports, in order: text pieces, then one `Done` or `Failed`.
#[derive(Debug, Clone)]
pub enum Event {
    /// Generated text, safe to show (whole UTF-8 characters, no stop text).
    Text(String),
    /// A generated token's log-probability, sent before the text it makes
    /// (only for jobs that asked).
    Logprob(TokenLogprob),
    /// The job ended.
    Done(Summary),
    /// The job failed (llama.cpp could not evaluate it).
    Failed(String),
}

/// How a job ended.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    /// Prompt tokens.
    pub tokens_prompt: usize,
    /// Prompt tokens found in the slot's cache, not evaluated again.
    pub tokens_cached: usize,
    /// Tokens generated.
    pub tokens_generated: usize,
    /// Why it ended.
    pub stop_reason: StopReason,
    /// From admission to the first generated token.
    pub time_to_first_token: Option<Duration>,
}

/// Why a job was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejected {
    /// Every slot is busy and the queue is full.
    Full,
    /// The server is shutting down.
    Closed,
}

struct Queue {
    waiting: VecDeque<Job>,
    /// Slots with no job and none of the waiting jobs promised to them.
    free: usize,
    max_queue: usize,
    closed: bool,
}

/// The bounded queue in front of the slots.
pub struct Admission {
    queue: Mutex<Queue>,
    ready: Condvar,
}

impl Admission {
    /// Room for `slots` running jobs and `max_queue` waiting ones.
    #[must_use]
    pub fn new(slots: usize, max_queue: usize) -> Admission {
        Admission {
            queue: Mutex::new(Queue {
                waiting: VecDeque::new(),
                free: slots,
                max_queue,
                closed: false,
            }),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A panic while holding this lock leaves plain counters behind: go on.
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Admit `job`, or refuse it at once.
    ///
    /// # Errors
    /// [`Rejected::Full`] when every slot is taken and `max_queue` jobs
    /// wait; [`Rejected::Closed`] once [`Admission::close`] was called.
    pub fn submit(&self, job: Job) -> Result<(), (Rejected, Job)> {
        let mut q = self.lock();
        if q.closed {
            return Err((Rejected::Closed, job));
        }
        if q.waiting.len() >= q.free + q.max_queue {
            return Err((Rejected::Full, job));
        }
        q.waiting.push_back(job);
        drop(q);
        self.ready.notify_one();
        Ok(())
    }

    /// Whether a job submitted now would be admitted (a free slot or room in
    /// the queue): lets a server refuse a request before it does any work
    /// for it. [`Admission::submit`] still decides.
    #[must_use]
    pub fn has_room(&self) -> Result<(), Rejected> {
        let q = self.lock();
        if q.closed {
            Err(Rejected::Closed)
        } else if q.waiting.len() >= q.free + q.max_queue {
            Err(Rejected::Full)
        } else {
            Ok(())
        }
    }

    /// Jobs waiting for a slot (not counting those a free slot is about to take).
    #[must_use]
    pub fn queued(&self) -> usize {
        let q = self.lock();
        q.waiting.len().saturating_sub(q.free)
    }

    /// Refuse new jobs from now on; the scheduler ends the running and
    /// waiting ones and returns.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// Whether [`Admission::close`] was called.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Take up to `n` jobs for free slots; with `wait` and nothing running,
    /// block until one arrives or the queue closes (`None` then).
    fn take(&self, n: usize, wait: bool) -> Option<Vec<Job>> {
        let mut q = self.lock();
        loop {
            if q.closed {
                return None;
            }
            if !q.waiting.is_empty() || !wait {
                let k = n.min(q.waiting.len());
                q.free -= k.min(q.free);
                return Some(q.waiting.drain(..k).collect());
            }
            q = self
                .ready
                .wait_timeout(q, Duration::from_millis(200))
                .map_or_else(|e| e.into_inner().0, |(g, _)| g);
        }
    }

    fn release(&self) {
        self.lock().free += 1;
        self.ready.notify_one();
    }

    fn drain(&self) -> Vec<Job> {
        self.lock().waiting.drain(..).collect()
    }
}

/// Counters the scheduler keeps, read by `/metrics` and `/health`.
#[derive(Debug, Default)]
pub struct Stats {
    /// Slots running a job.
    pub active: AtomicUsize,
    /// KV cells in use, over all slots.
    pub cells_used: AtomicUsize,
    /// Prompt tokens evaluated.
    pub prompt_tokens: AtomicU64,
    /// Prompt tokens taken from a slot's cache instead of evaluated.
    pub prompt_tokens_cached: AtomicU64,
    /// Tokens generated.
    pub generated_tokens: AtomicU64,
    /// Nanoseconds spent in decode steps that evaluated prompt tokens.
    pub prompt_nanos: AtomicU64,
    /// Nanoseconds spent in decode steps that only generated.
    pub decode_nanos: AtomicU64,
    /// Inputs the embedding context embedded (`serve --embeddings`).
    pub embedding_inputs: AtomicU64,
    /// The scheduler has loaded the model and is taking jobs.
    pub ready: AtomicBool,
}

/// A running job.
struct Active {
    job: Job,
    /// Prompt tokens already sent to llama.cpp (or found in the cache).
    fed: usize,
    /// Prompt tokens found in the cache.
    reused: usize,
    /// The tokens this sequence's cells hold, in position order.
    tokens: Vec<LlamaToken>,
    sampler: Option<LlamaSampler>,
    /// The job's grammar, apart from the chain: it sees only generated
    /// tokens, never the prompt (as llama.cpp's common sampler keeps it).
    grammar: Option<LlamaSampler>,
    utf8: Utf8Stream,
    stops: StopMatcher,
    generated: usize,
    /// The token sampled last, to evaluate in the next step.
    next: Option<LlamaToken>,
    /// Its row in this step's batch, when it asked for logits.
    row: Option<i32>,
    admitted: Instant,
    first_token: Option<Duration>,
}

/// What a step did for one slot.
enum Outcome {
    Continue,
    Finished(StopReason),
}

/// Runs jobs on `engine` in `slots` sequences until `admission` closes.
pub struct Scheduler<'e> {
    engine: &'e Engine,
    slots: Vec<Option<Active>>,
    /// What each idle slot's cells hold (a running slot's are in `Active`).
    cached: Vec<Vec<LlamaToken>>,
    /// When each slot last took a job (the scheduler's own clock).
    used: Vec<u64>,
    clock: u64,
    memory: Memory,
    n_ctx_slot: usize,
    admission: Arc<Admission>,
    stats: Arc<Stats>,
}

impl<'e> Scheduler<'e> {
    /// A scheduler over `slots` sequences of one context.
    #[must_use]
    pub fn new(
        engine: &'e Engine,
        slots: usize,
        admission: Arc<Admission>,
        stats: Arc<Stats>,
    ) -> Scheduler<'e> {
        let n_ctx = engine.spec().n_ctx as usize;
        Scheduler {
            engine,
            slots: (0..slots.max(1)).map(|_| None).collect(),
            cached: vec![Vec::new(); slots.max(1)],
            used: vec![0; slots.max(1)],
            clock: 0,
            memory: Memory::of(engine.model()),
            n_ctx_slot: n_ctx / slots.max(1),
            admission,
            stats,
        }
    }

    /// Cells each slot holds.
    #[must_use]
    pub fn n_ctx_slot(&self) -> usize {
        self.n_ctx_slot
    }

    /// Create the context and run jobs until the admission queue closes;
    /// then end every running and waiting job (each gets its `Done`).
    ///
    /// # Errors
    /// llama.cpp failing to create the context.
    pub fn run(mut self) -> Result<()> {
        let session = self.engine.session()?;
        let mut ctx = session.ctx;
        let n_batch = ctx.n_batch() as usize;
        let mut batch = LlamaBatch::new(n_batch.max(1), 1);
        self.stats.ready.store(true, Ordering::Release);
        let vocab = self.engine.model.vocab();
        let eog = self.engine.eog_tokens();
        loop {
            // Admit: block only when nothing runs.
            let free: Vec<usize> = (0..self.slots.len())
                .filter(|&i| self.slots[i].is_none())
                .collect();
            let idle = free.len() == self.slots.len();
            let jobs = if free.is_empty() {
                if self.admission.is_closed() {
                    None
                } else {
                    Some(Vec::new())
                }
            } else {
                self.admission.take(free.len(), idle)
            };
            let Some(jobs) = jobs else {
                break;
            };
            let mut free = free;
            for job in jobs {
                let slot = prefix::pick_slot(&free, &self.cached, &self.used, &job.prompt);
                free.retain(|&i| i != slot);
                self.start(&mut ctx, slot, job);
            }
            // Cancelled jobs (their client went away) free their slot now.
            for i in 0..self.slots.len() {
                if self.slots[i]
                    .as_ref()
                    .is_some_and(|a| a.job.events.is_closed())
                {
                    self.finish(i, StopReason::Interrupted);
                }
            }
            // One batch: every generating slot's next token first, then
            // prompt chunks in the room left.
            batch.clear();
            let mut has_prompt = false;
            for (i, slot) in self.slots.iter_mut().enumerate() {
                let Some(a) = slot else { continue };
                a.row = None;
                if let Some(t) = a.next {
                    a.row = Some(batch.n_tokens());
                    batch.add(t, i32::try_from(a.tokens.len())?, &[seq(i)], true)?;
                    a.tokens.push(t);
                }
            }
            for (i, slot) in self.slots.iter_mut().enumerate() {
                let Some(a) = slot else { continue };
                if a.next.is_some() || a.fed >= a.job.prompt.len() {
                    continue;
                }
                let room = n_batch.saturating_sub(batch.n_tokens() as usize);
                if room == 0 {
                    break;
                }
                let end = a.job.prompt.len().min(a.fed + room);
                for k in a.fed..end {
                    let last = k + 1 == a.job.prompt.len();
                    if last {
                        a.row = Some(batch.n_tokens());
                    }
                    let t = a.job.prompt[k];
                    batch.add(t, i32::try_from(a.tokens.len())?, &[seq(i)], last)?;
                    a.tokens.push(t);
                }
                self.stats
                    .prompt_tokens
                    .fetch_add((end - a.fed) as u64, Ordering::Relaxed);
                a.fed = end;
                has_prompt = true;
            }
            if batch.n_tokens() == 0 {
                continue;
            }
            let t0 = Instant::now();
            if let Err(e) = ctx.decode(&mut batch) {
                let why = format!(
                    "llama.cpp failed to evaluate a batch: {}",
                    crate::llama::decode::describe(&e)
                );
                for i in 0..self.slots.len() {
                    if let Some(a) = self.slots[i].take() {
                        let _ = a.job.events.send(Event::Failed(why.clone()));
                        self.admission.release();
                    }
                }
                ctx.clear_kv_cache();
                self.cached.iter_mut().for_each(Vec::clear);
                self.update_cells();
                continue;
            }
            let spent = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
            if has_prompt {
                self.stats.prompt_nanos.fetch_add(spent, Ordering::Relaxed);
            } else {
                self.stats.decode_nanos.fetch_add(spent, Ordering::Relaxed);
            }
            // Sample for every slot whose logits came back.
            for i in 0..self.slots.len() {
                let outcome = match self.slots[i].as_mut() {
                    Some(a) if a.row.is_some() => sample(
                        self.engine,
                        &self.stats,
                        a,
                        &ctx,
                        &vocab,
                        &eog,
                        self.n_ctx_slot,
                    )?,
                    _ => continue,
                };
                if let Outcome::Finished(reason) = outcome {
                    self.finish(i, reason);
                }
            }
            self.update_cells();
        }
        // Shutting down: every running and waiting job gets its end.
        for i in 0..self.slots.len() {
            if self.slots[i].is_some() {
                self.finish(i, StopReason::Interrupted);
            }
        }
        for job in self.admission.drain() {
            let _ = job.events.send(Event::Done(Summary {
                tokens_prompt: job.prompt.len(),
                tokens_cached: 0,
                tokens_generated: 0,
                stop_reason: StopReason::Interrupted,
                time_to_first_token: None,
            }));
        }
        self.stats.ready.store(false, Ordering::Release);
        Ok(())
    }

    /// Put `job` in `slot`, keeping the part of the slot's cache its prompt
    /// starts with.
    fn start(&mut self, ctx: &mut llama_cpp_2::context::LlamaContext<'_>, slot: usize, job: Job) {
        // The server loaded this grammar once already; failing now is an
        // error for this job only.
        let grammar = match job.opts.grammar.as_deref() {
            None => None,
            Some(g) => match grammar_sampler(self.engine.model(), g, &job.opts.grammar_triggers) {
                Ok(s) => Some(s),
                Err(e) => {
                    let _ = job.events.send(Event::Failed(format!(
                        "llama.cpp could not load the grammar: {e}"
                    )));
                    self.admission.release();
                    return;
                }
            },
        };
        let mut tokens = std::mem::take(&mut self.cached[slot]);
        let common = prefix::common_prefix(&tokens, &job.prompt);
        let mut keep = prefix::keep(self.memory, tokens.len(), common, job.prompt.len());
        if keep < tokens.len() {
            keep = self.cut(ctx, slot, keep);
        }
        tokens.truncate(keep);
        self.clock += 1;
        self.used[slot] = self.clock;
        self.stats
            .prompt_tokens_cached
            .fetch_add(keep as u64, Ordering::Relaxed);
        let greedy = job.opts.sampling.temp <= 0.0
            && job.opts.sampling.repeat_penalty == 1.0
            && grammar.is_none();
        let sampler = (!greedy).then(|| {
            let mut s = sampler(self.engine, &job.opts);
            s.accept_many(job.prompt.iter());
            s
        });
        let stops = StopMatcher::new(job.opts.stop.iter().cloned());
        self.slots[slot] = Some(Active {
            job,
            fed: keep,
            reused: keep,
            tokens,
            sampler,
            grammar,
            utf8: Utf8Stream::default(),
            stops,
            generated: 0,
            next: None,
            row: None,
            admitted: Instant::now(),
            first_token: None,
        });
        self.stats.active.fetch_add(1, Ordering::Relaxed);
    }

    /// Cut `slot`'s cells back to its first `keep` positions; where llama.cpp
    /// cannot, or the cache would miss what the next position attends to,
    /// clear the slot. The tokens kept.
    fn cut(
        &self,
        ctx: &mut llama_cpp_2::context::LlamaContext<'_>,
        slot: usize,
        keep: usize,
    ) -> usize {
        let Ok(s) = u32::try_from(slot) else {
            return 0;
        };
        let cut = keep > 0
            && u32::try_from(keep)
                .ok()
                .and_then(|p0| ctx.clear_kv_cache_seq(Some(s), Some(p0), None).ok())
                .unwrap_or(false)
            && prefix::window_holds(self.memory, ctx.kv_cache_seq_pos_min(seq(slot)), keep);
        if cut {
            return keep;
        }
        if !ctx.clear_kv_cache_seq(Some(s), None, None).unwrap_or(false) {
            tracing::warn!("llama.cpp could not clear slot {slot}'s cells");
        }
        0
    }

    /// End the job in `slot`: flush held-back text, report, free the cells
    /// and the slot.
    fn finish(&mut self, slot: usize, reason: StopReason) {
        let Some(mut a) = self.slots[slot].take() else {
            return;
        };
        if reason != StopReason::StopString {
            let mut tail = a.utf8.finish();
            tail.insert_str(0, &a.stops.finish());
            if !tail.is_empty() {
                let _ = a.job.events.send(Event::Text(tail));
            }
        }
        let _ = a.job.events.send(Event::Done(Summary {
            tokens_prompt: a.job.prompt.len(),
            tokens_cached: a.reused,
            tokens_generated: a.generated,
            stop_reason: reason,
            time_to_first_token: a.first_token,
        }));
        // The cells stay: the slot's next job may start with these tokens.
        self.cached[slot] = a.tokens;
        self.stats.active.fetch_sub(1, Ordering::Relaxed);
        self.admission.release();
    }

    fn update_cells(&self) {
        let used = self
            .slots
            .iter()
            .zip(&self.cached)
            .map(|(a, c)| a.as_ref().map_or(c.len(), |a| a.tokens.len()))
            .sum();
        self.stats.cells_used.store(used, Ordering::Relaxed);
    }
}

/// A sampler for `grammar` (root rule `root`): lazy when there are
/// `triggers`, regular expressions over the text generated so far (`^…$`
/// to match all of it), the grammar taking over where the first match's
/// first group starts.
///
/// # Errors
/// llama.cpp could not parse the grammar.
pub fn grammar_sampler(
    model: &llama_cpp_2::model::LlamaModel,
    grammar: &str,
    triggers: &[String],
) -> Result<LlamaSampler, llama_cpp_2::GrammarError> {
    if triggers.is_empty() {
        LlamaSampler::grammar(model, grammar, "root")
    } else {
        LlamaSampler::grammar_lazy_patterns(model, grammar, "root", triggers, &[])
    }
}

/// Sample the next token of `a` from its row of the last batch.
fn sample(
    engine: &Engine,
    stats: &Stats,
    a: &mut Active,
    ctx: &llama_cpp_2::context::LlamaContext<'_>,
    vocab: &LlamaVocab<'_>,
    eog: &[LlamaToken],
    n_ctx_slot: usize,
) -> Result<Outcome> {
    let row = a.row.take().ok_or_else(|| anyhow!("no logits"))?;
    let opts = &a.job.opts;
    let token = match (a.grammar.as_mut(), a.sampler.as_mut()) {
        (Some(g), Some(s)) => {
            let mut candidates = ctx.token_data_array_ith(row);
            candidates.apply_sampler(g);
            candidates.apply_sampler(s);
            // The grammar always leaves the end-of-generation tokens once
            // it is complete; nothing selected is the end all the same.
            let Some(t) = candidates.selected_token() else {
                return Ok(Outcome::Finished(StopReason::EndOfGeneration));
            };
            g.accept(t);
            s.accept(t);
            t
        }
        (_, Some(s)) => s.sample(ctx, row),
        (_, None) => {
            let banned: &[LlamaToken] = if opts.ignore_eos { eog } else { &[] };
            argmax(ctx.get_logits_ith(row), banned)
        }
    };
    if a.first_token.is_none() {
        a.first_token = Some(a.admitted.elapsed());
    }
    if !opts.ignore_eos && vocab.is_eog(token) {
        return Ok(Outcome::Finished(StopReason::EndOfGeneration));
    }
    if vocab.is_control(token) && opts.stop.contains(&engine.token_text(token)) {
        return Ok(Outcome::Finished(StopReason::StopString));
    }
    a.generated += 1;
    stats.generated_tokens.fetch_add(1, Ordering::Relaxed);
    let bytes = crate::llama::vocab::token_to_piece(vocab, token, false)?;
    if let Some(n) = a.job.logprobs {
        let lp = token_logprob(ctx.get_logits_ith(row), token, bytes.clone(), n, |t| {
            crate::llama::vocab::token_to_piece(vocab, t, false).unwrap_or_default()
        });
        let _ = a.job.events.send(Event::Logprob(lp));
    }
    let piece = a.utf8.push(&bytes);
    match a.stops.push(&piece) {
        Matched::Go(text) => {
            if !text.is_empty() {
                let _ = a.job.events.send(Event::Text(text));
            }
        }
        Matched::Stop(text, _) => {
            if !text.is_empty() {
                let _ = a.job.events.send(Event::Text(text));
            }
            a.stops = StopMatcher::new(std::iter::empty());
            a.utf8 = Utf8Stream::default();
            return Ok(Outcome::Finished(StopReason::StopString));
        }
    }
    if opts.n_predict.is_some_and(|n| a.generated >= n as usize) {
        return Ok(Outcome::Finished(StopReason::MaxTokens));
    }
    if a.tokens.len() >= n_ctx_slot {
        return Ok(Outcome::Finished(StopReason::ContextFull));
    }
    a.next = Some(token);
    Ok(Outcome::Continue)
}

/// `token`'s log-probability under `logits` (log-softmax) and the `n` most
/// likely tokens', most likely first (the first of equals first); `piece`
/// gives a token's bytes.
pub fn token_logprob(
    logits: &[f32],
    token: LlamaToken,
    bytes: Vec<u8>,
    n: usize,
    mut piece: impl FnMut(LlamaToken) -> Vec<u8>,
) -> TokenLogprob {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&l| f64::from(l - max).exp()).sum();
    #[allow(clippy::cast_possible_truncation)]
    let log_z = max + sum.ln() as f32;
    let at = |t: usize| logits.get(t).map_or(f32::NEG_INFINITY, |l| l - log_z);
    // The top n by one pass over a short sorted list (n is at most 20).
    let mut top: Vec<(usize, f32)> = Vec::with_capacity(n + 1);
    if n > 0 {
        for (i, &l) in logits.iter().enumerate() {
            if top.len() == n && top.last().is_some_and(|&(_, m)| l <= m) {
                continue;
            }
            let pos = top.partition_point(|&(_, m)| m >= l);
            top.insert(pos, (i, l));
            top.truncate(n);
        }
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    TokenLogprob {
        token: text(&bytes),
        logprob: usize::try_from(token.0).map_or(f32::NEG_INFINITY, at),
        bytes,
        top: top
            .into_iter()
            .map(|(i, _)| {
                let b = piece(LlamaToken::new(i32::try_from(i).unwrap_or(0)));
                (text(&b), b, at(i))
            })
            .collect(),
    }
}

fn seq(slot: usize) -> i32 {
    i32::try_from(slot).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logprobs_are_the_log_softmax_and_the_top_is_sorted() {
        let logits = [1.0f32, 3.0, 2.0, 3.0, -1.0];
        let z: f32 = logits.iter().map(|l| l.exp()).sum::<f32>().ln();
        let lp = token_logprob(&logits, LlamaToken::new(2), b"c".to_vec(), 3, |t| {
            vec![b'a' + u8::try_from(t.0).unwrap()]
        });
        assert_eq!(lp.token, "c");
        assert!((lp.logprob - (2.0 - z)).abs() < 1e-5);
        let top: Vec<&str> = lp.top.iter().map(|t| t.0.as_str()).collect();
        // Equals keep vocabulary order, as the greedy sampler picks.
        assert_eq!(top, ["b", "d", "c"]);
        assert!((lp.top[0].2 - (3.0 - z)).abs() < 1e-5);
        let p: f32 = logits.iter().map(|l| (l - z).exp()).sum();
        assert!((p - 1.0).abs() < 1e-5);
        let none = token_logprob(&logits, LlamaToken::new(0), vec![], 0, |_| vec![]);
        assert!(none.top.is_empty());
    }
}
