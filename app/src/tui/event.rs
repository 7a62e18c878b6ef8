//! What happens to the chat, as values on one bounded channel: keys, paste,
//! mouse and resize from the input thread, memory samples from the monitor
//! thread, text and results from the model thread. The other way, requests to
//! the model thread ([`Request`]) and effects for the main loop ([`Effect`]).
//!
//! The channel is bounded: when the screen falls behind, the model thread
//! waits in `send` instead of queueing text without limit.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use crossterm::event::{self as ct, KeyEvent, KeyEventKind, MouseEvent, MouseEventKind};

use super::state::Usage;
use crate::runner::StopReason;
use crate::runner::template::Message;

/// Room in the event channel.
pub const CHANNEL_CAPACITY: usize = 64;

/// Everything the main loop reacts to.
#[derive(Debug, Clone)]
pub enum Event {
    /// A key press, with when the input thread read it.
    Key(KeyEvent, Instant),
    /// Pasted text (bracketed paste).
    Paste(String),
    /// The mouse wheel: positive scrolls down.
    Scroll(i16),
    /// The terminal's new size.
    Resize(u16, u16),
    /// Memory in use now.
    Usage(Usage),
    /// The terminal can no longer be read (why), or a signal asked us to end.
    InputLost(String),
    /// From the model thread.
    Model(ModelEvent),
}

/// What the model thread reports.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// Load progress, 0.0…1.0.
    Progress(f32),
    /// The model is loaded and the context created.
    Loaded {
        /// llama.cpp's context size.
        n_ctx: u32,
        /// The chat template, described.
        template: String,
        /// Load time in seconds.
        load_s: f64,
    },
    /// The load failed; the chat cannot go on.
    LoadFailed(String),
    /// The model loaded, but its chat template cannot be used (it does not
    /// finish, or it raises): the chat cannot go on.
    TemplateFailed(String),
    /// The prompt did not fit: this many of the oldest messages after the
    /// system prompt were left out.
    Trimmed(usize),
    /// Streamed text.
    Text {
        /// The text.
        text: String,
        /// Tokens in the context now (prompt plus pieces so far).
        ctx_used: usize,
        /// Decode speed so far.
        tokens_per_s: f64,
    },
    /// The reply ended.
    Done {
        /// Why.
        reason: StopReason,
        /// Tokens in the context.
        ctx_used: usize,
        /// Tokens generated.
        tokens: usize,
        /// Decode speed.
        tokens_per_s: f64,
    },
    /// The reply failed.
    Failed(String),
    /// The context was emptied (`/clear`).
    Cleared,
    /// The model thread panicked (the message) and has ended.
    Crashed(String),
}

/// What the main loop asks of the model thread.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Reply to this conversation (the part already in the KV cache is reused);
    /// keep `reserve` tokens free for the reply, dropping the oldest turns.
    Generate {
        /// System prompt and turns.
        messages: Vec<Message>,
        /// Tokens to keep free.
        reserve: usize,
    },
    /// Empty the KV cache.
    Clear,
}

/// What [`update`](super::update) asks the main loop to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Send this to the model thread (a `Generate` first clears the stop flag).
    Request(Request),
    /// Stop the reply now (sets the stop flag the model thread polls).
    Stop,
    /// Start with the nearest plan that fits.
    AcceptNearest,
    /// Write the conversation to this file.
    Save(PathBuf),
    /// Read a conversation from this file.
    Load(PathBuf),
    /// End the program.
    Quit,
}

/// Reads terminal events until `stop` is set or the channel closes.
///
/// # Errors
/// The thread cannot be started.
pub fn spawn_input(tx: SyncSender<Event>, stop: Arc<AtomicBool>) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("chat-input".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match ct::poll(Duration::from_millis(50)) {
                    Ok(false) => continue,
                    Ok(true) => {}
                    Err(e) => {
                        let _ = tx.send(Event::InputLost(format!("reading the terminal: {e}")));
                        return;
                    }
                }
                let ev = match ct::read() {
                    Ok(ev) => ev,
                    Err(e) => {
                        let _ = tx.send(Event::InputLost(format!("reading the terminal: {e}")));
                        return;
                    }
                };
                let now = Instant::now();
                let ev = match ev {
                    ct::Event::Key(k) if k.kind != KeyEventKind::Release => Event::Key(k, now),
                    ct::Event::Paste(s) => Event::Paste(s),
                    ct::Event::Resize(w, h) => Event::Resize(w, h),
                    ct::Event::Mouse(MouseEvent { kind, .. }) => match kind {
                        MouseEventKind::ScrollUp => Event::Scroll(-3),
                        MouseEventKind::ScrollDown => Event::Scroll(3),
                        _ => continue,
                    },
                    _ => continue,
                };
                if tx.send(ev).is_err() {
                    return;
                }
            }
        })
        .context("starting the input thread")
}

/// Samples memory use about once a second, until `stop` is set or the
/// channel closes. NVML is slow to open, so this never runs on the UI thread.
/// NVML reports what a GPU holds for every process: `vram_before` (the use
/// before the model was loaded) is subtracted, leaving what the chat added.
///
/// # Errors
/// The thread cannot be started.
pub fn spawn_monitor(
    tx: SyncSender<Event>,
    stop: Arc<AtomicBool>,
    vram_before: Vec<u64>,
) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("chat-monitor".into())
        .spawn(move || {
            let gpus = !vram_before.is_empty();
            while !stop.load(Ordering::Relaxed) {
                let usage = Usage {
                    rss: crate::runner::measure::rss_bytes(),
                    peak: crate::runner::measure::peak_rss_bytes(),
                    vram: if gpus {
                        crate::runner::measure::vram_used_bytes()
                            .iter()
                            .enumerate()
                            .map(|(i, b)| {
                                b.saturating_sub(vram_before.get(i).copied().unwrap_or(0))
                            })
                            .collect()
                    } else {
                        Vec::new()
                    },
                };
                match tx.try_send(Event::Usage(usage)) {
                    Ok(()) | Err(TrySendError::Full(_)) => {}
                    Err(TrySendError::Disconnected(_)) => return,
                }
                // Sleep in short steps so quitting is not held up.
                for _ in 0..10 {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        })
        .context("starting the memory monitor")
}
