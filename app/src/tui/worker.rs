//! The model thread: loads the model, then answers [`Request`]s one at a time,
//! streaming text back as [`ModelEvent`]s on the bounded event channel.
//!
//! The engine and its session are created on this thread and never leave it
//! (the session borrows the engine and holds llama.cpp's context). The UI
//! stops a reply through a shared flag that the generation loop polls between
//! tokens, so stopping never waits for the channel.
//!
//! The context policy lives here because it needs the tokenizer: when the
//! conversation no longer leaves room for a reply, the oldest exchanges are
//! left out (the system prompt always stays) and the UI is told how many.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use headroom_planner::plan::Plan;

use super::event::{Event, ModelEvent, Request};
use crate::llama::AccountingParams;
use crate::runner::prompt::{chat_format, tokenize_prompt};
use crate::runner::report::{Report, record};
use crate::runner::template::{ChatFormat, Message, TemplateChoice};
use crate::runner::{Engine, GenOptions, Generation, Session};

/// What the model thread needs.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The load the plan chose.
    pub spec: AccountingParams,
    /// `--chat-template`.
    pub template: TemplateChoice,
    /// Sampling and limits.
    pub opts: GenOptions,
    /// The plan (for the calibration log).
    pub plan: Plan,
}

/// Start the model thread. It loads at once; setting `stop` cancels the load
/// or the reply in progress; dropping the returned sender ends the thread.
///
/// # Errors
/// The thread cannot be started.
pub fn spawn(
    cfg: WorkerConfig,
    events: SyncSender<Event>,
    stop: Arc<AtomicBool>,
) -> Result<(Sender<Request>, JoinHandle<()>)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("chat-model".into())
        .spawn(move || {
            // A panic in llama-cpp-2 or below ends this thread, not the chat:
            // the screen says so and the person can still save and quit.
            let run = std::panic::AssertUnwindSafe(|| serve(&cfg, &events, &stop, &rx));
            if let Err(p) = std::panic::catch_unwind(run) {
                let what = p
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                let _ = events.send(Event::Model(ModelEvent::Crashed(what)));
            }
        })
        .context("starting the model thread")?;
    Ok((tx, handle))
}

fn serve(
    cfg: &WorkerConfig,
    events: &SyncSender<Event>,
    stop: &Arc<AtomicBool>,
    requests: &Receiver<Request>,
) {
    let send = |ev: ModelEvent| events.send(Event::Model(ev)).is_ok();
    let progress_tx = events.clone();
    let cancel = stop.clone();
    let progress: Box<dyn FnMut(f32) -> bool> = Box::new(move |p| {
        // Dropped when the channel is full: the next one will do.
        let _ = progress_tx.try_send(Event::Model(ModelEvent::Progress(p)));
        !cancel.load(Ordering::Relaxed)
    });
    let spec = AccountingParams {
        no_alloc: false,
        ..cfg.spec.clone()
    };
    let engine = match Engine::load(&spec, Some(progress)) {
        Ok(e) => e,
        Err(e) => {
            send(ModelEvent::LoadFailed(format!("{e:#}")));
            return;
        }
    };
    // The template first: it is checked in milliseconds (a hostile one
    // within its fuel), the context takes seconds to create.
    let format = match chat_format(&engine, &cfg.template) {
        Ok(f) => f,
        Err(e) => {
            send(ModelEvent::TemplateFailed(format!("{e:#}")));
            return;
        }
    };
    let mut session = match engine.session() {
        Ok(s) => s,
        Err(e) => {
            send(ModelEvent::LoadFailed(format!("{e:#}")));
            return;
        }
    };
    let opts = GenOptions {
        stop: cfg
            .opts
            .stop
            .iter()
            .cloned()
            .chain(format.stop_strings())
            .collect(),
        ..cfg.opts.clone()
    };
    let rss_after_load = crate::runner::measure::rss_bytes();
    tracing::info!("chat template: {}", format.describe());
    if !send(ModelEvent::Loaded {
        n_ctx: session.n_ctx(),
        template: format.describe(),
        load_s: engine.load_time.as_secs_f64(),
    }) {
        return;
    }
    let mut last: Option<Generation> = None;
    while let Ok(req) = requests.recv() {
        let open = match req {
            Request::Clear => {
                session.clear();
                send(ModelEvent::Cleared)
            }
            Request::Generate { messages, reserve } => {
                let turn = Turn {
                    engine: &engine,
                    format: &format,
                    opts: &opts,
                    stop,
                    events,
                };
                match turn.reply(&mut session, &messages, reserve) {
                    Ok(g) => {
                        let done = ModelEvent::Done {
                            reason: g.stop_reason,
                            ctx_used: session.n_cached(),
                            tokens: g.tokens_generated,
                            tokens_per_s: g.decode_tokens_per_s(),
                        };
                        if g.tokens_generated > 0 {
                            last = Some(g);
                        }
                        send(done)
                    }
                    Err(e) => send(ModelEvent::Failed(format!("{e:#}"))),
                }
            }
        };
        if !open {
            break;
        }
    }
    // One calibration entry per chat: the last reply's speed and the peak.
    if let Some(g) = last {
        let peak = crate::runner::measure::peak_rss_bytes();
        record(
            &cfg.plan,
            &Report::new(&cfg.plan, &engine, &g, rss_after_load, peak),
        );
    }
}

/// What one reply needs besides the session.
struct Turn<'a> {
    engine: &'a Engine,
    format: &'a ChatFormat,
    opts: &'a GenOptions,
    stop: &'a AtomicBool,
    events: &'a SyncSender<Event>,
}

impl Turn<'_> {
    fn reply(
        &self,
        session: &mut Session<'_>,
        messages: &[Message],
        reserve: usize,
    ) -> Result<Generation> {
        let n_ctx = session.n_ctx() as usize;
        let mut count = |m: &[Message]| -> Result<usize> {
            Ok(tokenize_prompt(self.engine, &self.format.render(m, true)?)?.len())
        };
        let dropped = messages_to_drop(messages, n_ctx, reserve, &mut count)?;
        if dropped > 0 {
            self.events
                .send(Event::Model(ModelEvent::Trimmed(dropped)))
                .context("the chat screen is gone")?;
        }
        let kept = keep(messages, dropped);
        let tokens = tokenize_prompt(self.engine, &self.format.render(&kept, true)?)?;
        let base = tokens.len();
        let mut pieces = 0usize;
        let mut first: Option<Instant> = None;
        session.generate(&tokens, self.opts, self.stop, &mut |text| {
            pieces += 1;
            let now = Instant::now();
            let secs = now.duration_since(*first.get_or_insert(now)).as_secs_f64();
            let tokens_per_s = if secs > 0.0 {
                (pieces - 1) as f64 / secs
            } else {
                0.0
            };
            // Blocks while the screen is behind: memory stays bounded.
            self.events
                .send(Event::Model(ModelEvent::Text {
                    text: text.to_string(),
                    ctx_used: (base + pieces).min(n_ctx),
                    tokens_per_s,
                }))
                .is_ok()
        })
    }
}

/// The messages without the `dropped` oldest ones after the system prompt.
#[must_use]
pub fn keep(messages: &[Message], dropped: usize) -> Vec<Message> {
    let sys = messages.iter().take_while(|m| m.role == "system").count();
    messages[..sys]
        .iter()
        .chain(messages[sys..].iter().skip(dropped))
        .cloned()
        .collect()
}

/// How many of the oldest messages after the system prompt to leave out so
/// that the prompt (`count` tokenizes a conversation) leaves `reserve` tokens
/// of `n_ctx` for the reply. Whole exchanges go, so the kept part still starts
/// with a user message; the last user message always stays (when even it
/// leaves less than `reserve`, the reply just gets less room).
///
/// # Errors
/// The last message alone (with the system prompt) fills the context, or
/// `count` fails.
pub fn messages_to_drop(
    messages: &[Message],
    n_ctx: usize,
    reserve: usize,
    count: &mut dyn FnMut(&[Message]) -> Result<usize>,
) -> Result<usize> {
    let sys = messages.iter().take_while(|m| m.role == "system").count();
    let rest = &messages[sys..];
    if rest.is_empty() {
        return Ok(0);
    }
    let mut k = 0;
    loop {
        let n = count(&keep(messages, k))?;
        // The prompt must leave at least one cell: llama.cpp needs room to reply.
        if n + reserve.max(1) <= n_ctx {
            return Ok(k);
        }
        match rest[k + 1..].iter().position(|m| m.role == "user") {
            Some(p) => k += 1 + p,
            None if n < n_ctx => return Ok(k),
            None => bail!(
                "the message is {n} tokens with the system prompt, and the context holds {n_ctx}: shorten it, or restart with a larger --ctx-size"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One token per character, like a very plain tokenizer.
    fn chars(m: &[Message]) -> Result<usize> {
        Ok(m.iter().map(|m| m.content.len()).sum())
    }

    fn convo() -> Vec<Message> {
        vec![
            Message::system("SSSS"),
            Message::user("u1u1u1"),
            Message::assistant("a1a1a1"),
            Message::user("u2u2u2"),
            Message::assistant("a2a2a2"),
            Message::user("u3"),
        ]
    }

    #[test]
    fn nothing_is_dropped_while_it_fits() {
        assert_eq!(messages_to_drop(&convo(), 40, 10, &mut chars).ok(), Some(0));
    }

    #[test]
    fn whole_exchanges_go_oldest_first_and_the_system_prompt_stays() {
        // 30 tokens in all; 20 + reserve 5 leaves room only without the first exchange.
        let k = messages_to_drop(&convo(), 25, 5, &mut chars).expect("fits");
        assert_eq!(k, 2);
        let kept = keep(&convo(), k);
        let roles: Vec<&str> = kept.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        // Tighter: only the system prompt and the last message.
        assert_eq!(messages_to_drop(&convo(), 12, 4, &mut chars).ok(), Some(4));
    }

    #[test]
    fn the_last_message_stays_even_without_the_full_reserve() {
        assert_eq!(messages_to_drop(&convo(), 8, 100, &mut chars).ok(), Some(4));
        let err = messages_to_drop(&convo(), 6, 0, &mut chars).expect_err("cannot fit");
        assert!(format!("{err}").contains("6 tokens"), "{err}");
    }
}
