//! `headroom chat`: a terminal chat that shows how close the process is to its
//! memory budget and how full the context is, while it talks.
//!
//! Elm-style, in parts that do not know each other's insides:
//!
//! * [`state`]: everything on screen, as data ([`App`]);
//! * [`event`]: what happens (keys, memory samples, model output) and what the
//!   main loop is asked to do ([`Effect`]);
//! * [`update`]: `App::update(Event) -> Vec<Effect>`, no I/O;
//! * [`view`]: `render(&App, &mut Frame)`, no state changes;
//! * [`worker`]: the model thread (load, then replies streamed over the
//!   bounded channel); [`save`]: `/save` and `/load`; [`markdown`]: how
//!   replies are drawn; [`terminal`]: taking the terminal and giving it back.
//!
//! [`run`] is the main loop that joins them: it owns the channel, draws,
//! carries out effects, and logs key-to-frame latency when
//! `HEADROOM_CHAT_LATENCY_LOG` names a file.

pub mod event;
pub mod markdown;
pub mod save;
pub mod slash;
pub mod state;
pub mod terminal;
pub mod theme;
pub mod update;
pub mod view;
pub mod worker;

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

pub use event::{Effect, Event, ModelEvent, Request};
pub use state::{App, Mode, PlanInfo};
use terminal::{TerminalGuard, Tui};
use theme::Level;
pub use theme::Theme;
use worker::WorkerConfig;

/// Shortest time between two frames while text streams (keys draw at once).
const FRAME: Duration = Duration::from_millis(16);
/// Longest wait for the model thread to finish at exit.
const WORKER_EXIT_WAIT: Duration = Duration::from_secs(10);

/// Makes the load of the nearest plan that fits, and the screen's view of it.
pub type MakeNearest = Box<dyn FnOnce() -> Result<(WorkerConfig, PlanInfo)>>;

/// How the chat starts.
pub enum Start {
    /// Load this model now.
    Load(Box<WorkerConfig>),
    /// The plan was refused; if the person takes the nearest plan, this makes
    /// its load (and the screen's view of it).
    Refused(MakeNearest),
}

/// How the chat ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The person quit.
    Quit,
    /// The person quit at the refusal.
    Refused,
    /// The model could not be loaded (the reason).
    LoadFailed(String),
    /// SIGTERM or SIGHUP ended it.
    Signalled,
}

/// Where the chat writes.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Standard error goes here while the screen is up.
    pub log: Option<PathBuf>,
    /// Key-to-frame latencies, one line each: `streaming micros`.
    pub latency_log: Option<PathBuf>,
}

/// The model thread, once started.
struct Worker {
    requests: Sender<Request>,
    handle: JoinHandle<()>,
}

/// Everything the main loop holds besides the app.
struct Runtime {
    /// Set by SIGTERM or SIGHUP.
    ended: Arc<AtomicBool>,
    tx: std::sync::mpsc::SyncSender<Event>,
    cancel: Arc<AtomicBool>,
    worker: Option<Worker>,
    accept: Option<MakeNearest>,
}

/// Run the chat until the person quits.
///
/// # Errors
/// The terminal cannot be set up or drawn on, or a thread cannot start.
pub fn run(mut app: App, start: Start, opts: &Options) -> Result<Outcome> {
    // Before anything loads: the GPUs' use by others.
    let vram_before = crate::runner::measure::vram_used_bytes();
    let (guard, mut terminal) = TerminalGuard::enter(opts.log.as_deref())?;
    let size = terminal.size().context("reading the terminal size")?;
    app.size = (size.width, size.height);
    let (tx, rx) = sync_channel(event::CHANNEL_CAPACITY);
    let stop_threads = Arc::new(AtomicBool::new(false));
    let input = event::spawn_input(tx.clone(), stop_threads.clone())?;
    let monitor = event::spawn_monitor(tx.clone(), stop_threads.clone(), vram_before)?;
    // SIGTERM and SIGHUP end the chat through the main loop, so the
    // terminal is restored rather than left raw.
    let ended = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        signal_hook::flag::register(sig, ended.clone()).context("installing signal handlers")?;
    }
    let mut rt = Runtime {
        ended,
        tx,
        cancel: Arc::new(AtomicBool::new(false)),
        worker: None,
        accept: None,
    };
    match start {
        Start::Load(cfg) => rt.start_worker(*cfg)?,
        Start::Refused(f) => rt.accept = Some(f),
    }
    let latency = match &opts.latency_log {
        Some(p) => Some(BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => None,
    };
    let result = main_loop(&mut app, &mut terminal, &rx, &mut rt, latency);

    // Stop everything, give the terminal back, then let the model thread end.
    rt.cancel.store(true, Ordering::SeqCst);
    stop_threads.store(true, Ordering::SeqCst);
    drop(rx);
    // The input thread is not joined: on a terminal that hung up, crossterm's
    // read can spin without returning, and the process must still end.
    drop(input);
    let _ = monitor.join();
    drop(terminal);
    drop(guard);
    if let Some(w) = rt.worker.take() {
        drop(w.requests);
        let t0 = Instant::now();
        while !w.handle.is_finished() && t0.elapsed() < WORKER_EXIT_WAIT {
            std::thread::sleep(Duration::from_millis(10));
        }
        if w.handle.is_finished() {
            let _ = w.handle.join();
        }
    }
    result?;
    if rt.ended.load(Ordering::Relaxed) {
        return Ok(Outcome::Signalled);
    }
    Ok(match &app.mode {
        Mode::Refused { .. } => Outcome::Refused,
        Mode::Failed(_) => Outcome::LoadFailed(last_error(&app).unwrap_or_default()),
        _ => Outcome::Quit,
    })
}

fn last_error(app: &App) -> Option<String> {
    app.entries.iter().rev().find_map(|e| match e {
        state::Entry::Notice(n) if n.level == Level::Error => Some(n.text.clone()),
        _ => None,
    })
}

fn main_loop(
    app: &mut App,
    terminal: &mut Tui,
    rx: &Receiver<Event>,
    rt: &mut Runtime,
    mut latency: Option<BufWriter<std::fs::File>>,
) -> Result<()> {
    // Keys handled since the last frame: when read, and whether a reply was streaming.
    let mut keys: Vec<(Instant, bool)> = Vec::new();
    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    loop {
        let due = last_draw.is_none_or(|t| t.elapsed() >= FRAME);
        if dirty && (due || !keys.is_empty()) {
            terminal
                .draw(|f| view::render(app, f))
                .context("drawing the chat")?;
            let now = Instant::now();
            if let Some(log) = latency.as_mut() {
                for (t, streaming) in keys.drain(..) {
                    let us = now.duration_since(t).as_micros();
                    writeln!(log, "{} {us}", u8::from(streaming))
                        .context("writing the latency log")?;
                }
                log.flush().context("writing the latency log")?;
            }
            keys.clear();
            last_draw = Some(now);
            dirty = false;
        }
        if app.quit || rt.ended.load(Ordering::Relaxed) {
            return Ok(());
        }
        let timeout = match (dirty, last_draw) {
            (true, Some(t)) => FRAME.saturating_sub(t.elapsed()),
            _ => Duration::from_millis(500),
        };
        let first = match rx.recv_timeout(timeout) {
            Ok(ev) => ev,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        };
        // Everything already waiting, then one frame.
        let more = std::iter::from_fn(|| rx.try_recv().ok()).take(4 * event::CHANNEL_CAPACITY);
        for ev in std::iter::once(first).chain(more) {
            if let Event::Key(_, t) = &ev {
                keys.push((*t, app.mode == Mode::Streaming));
            }
            for fx in app.update(ev) {
                rt.apply(app, fx);
            }
            dirty = true;
            if app.quit {
                break;
            }
        }
    }
}

impl Runtime {
    fn start_worker(&mut self, cfg: WorkerConfig) -> Result<()> {
        self.cancel.store(false, Ordering::SeqCst);
        let (requests, handle) = worker::spawn(cfg, self.tx.clone(), self.cancel.clone())?;
        self.worker = Some(Worker { requests, handle });
        Ok(())
    }

    /// Carry out one effect.
    fn apply(&mut self, app: &mut App, fx: Effect) {
        match fx {
            Effect::Request(r) => {
                if matches!(r, Request::Generate { .. }) {
                    // Only the UI clears the flag, and only here: a stop
                    // pressed after this reaches the new reply.
                    self.cancel.store(false, Ordering::SeqCst);
                }
                let sent = self
                    .worker
                    .as_ref()
                    .is_some_and(|w| w.requests.send(r).is_ok());
                if !sent {
                    app.update(Event::Model(ModelEvent::Failed(
                        "the model thread has stopped".into(),
                    )));
                }
            }
            Effect::Stop => self.cancel.store(true, Ordering::SeqCst),
            Effect::AcceptNearest => {
                let Some(make) = self.accept.take() else {
                    return;
                };
                match make().and_then(|(cfg, info)| {
                    self.start_worker(cfg)?;
                    Ok(info)
                }) {
                    Ok(info) => app.start_plan(info),
                    Err(e) => {
                        app.mode = Mode::Failed("the nearest plan cannot start");
                        app.notice(
                            Level::Error,
                            format!("the nearest plan cannot start: {e:#}"),
                        );
                    }
                }
            }
            Effect::Save(path) => save_to(app, &path),
            Effect::Load(path) => match save::load(&path) {
                Ok(chat) => app.replace_conversation(chat, &path),
                Err(e) => app.notice(Level::Error, format!("{e:#}")),
            },
            Effect::Quit => app.quit = true,
        }
    }
}

fn save_to(app: &mut App, path: &Path) {
    let chat = save::snapshot(app);
    let n = chat.messages.len();
    match save::save(&chat, path) {
        Ok(()) => app.notice(
            Level::Info,
            format!("saved {n} messages to {}", path.display()),
        ),
        Err(e) => app.notice(Level::Error, format!("{e:#}")),
    }
}

impl App {
    /// Switch to another plan (the nearest one that fits) and start loading it.
    pub fn start_plan(&mut self, info: PlanInfo) {
        self.notice(Level::Info, "starting the nearest plan that fits");
        for n in info.banner() {
            self.entries.push(state::Entry::Notice(n));
        }
        self.ctx.n_ctx = info.n_ctx;
        self.plan = info;
        self.mode = Mode::Loading(0.0);
    }
}
