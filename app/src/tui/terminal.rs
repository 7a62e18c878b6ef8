//! Taking the terminal over and always giving it back.
//!
//! Entering: raw mode, the alternate screen, mouse reporting (for the wheel),
//! bracketed paste and, where the terminal has it, the kitty keyboard
//! protocol (so Shift+Enter is told apart from Enter). Leaving undoes each,
//! whether the chat ends normally, with an error, or with a panic: the panic
//! hook restores the terminal before the panic message is printed.
//!
//! While the screen is up nothing may write to it but ratatui, so standard
//! error (our tracing output and anything llama.cpp prints) goes to a log
//! file, and is put back before the terminal is released.

use std::fs::File;
use std::io::{Stdout, Write, stdout};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, Once};
use std::thread::ThreadId;

use anyhow::{Context, Result};
use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
    KeyboardEnhancementFlags, PopKeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use crossterm::{cursor, execute};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

/// The terminal is in the chat's modes.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The keyboard protocol was pushed and must be popped.
static KEYBOARD_PUSHED: AtomicBool = AtomicBool::new(false);
/// Standard error's original descriptor while it points at the log; -1 otherwise.
static SAVED_STDERR: AtomicI32 = AtomicI32::new(-1);
static HOOK: Once = Once::new();
/// The thread that draws: only its panics end the chat. A panic elsewhere
/// (the model thread catches its own) must not pull the screen away while
/// the chat goes on.
static UI_THREAD: Mutex<Option<ThreadId>> = Mutex::new(None);

/// The ratatui terminal the chat draws on.
pub type Tui = Terminal<CrosstermBackend<Stdout>>;

/// Holds the terminal; dropping it restores everything.
#[derive(Debug)]
pub struct TerminalGuard(());

impl TerminalGuard {
    /// Take the terminal over; standard error goes to `log` when given.
    ///
    /// # Errors
    /// The terminal refuses a mode (it is then restored), or the log cannot
    /// be opened.
    pub fn enter(log: Option<&Path>) -> Result<(TerminalGuard, Tui)> {
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                let ui = UI_THREAD.lock().ok().and_then(|t| *t);
                if ui == Some(std::thread::current().id()) {
                    restore();
                }
                previous(info);
            }));
        });
        if let Ok(mut t) = UI_THREAD.lock() {
            *t = Some(std::thread::current().id());
        }
        // A lost RPC worker ends the process inside llama.cpp (its abort);
        // the screen comes back before the one line saying so.
        crate::llama::rpc::on_abort(restore);
        let guard = TerminalGuard(());
        if let Some(path) = log {
            redirect_stderr(path)?;
        }
        ACTIVE.store(true, Ordering::SeqCst);
        enable_raw_mode().context("switching the terminal to raw mode")?;
        let mut out = stdout();
        execute!(
            out,
            EnterAlternateScreen,
            EnableMouseCapture,
            EnableBracketedPaste,
            cursor::Hide
        )
        .context("setting up the terminal")?;
        if crossterm::terminal::supports_keyboard_enhancement().unwrap_or(false) {
            let flags = KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES;
            if execute!(out, PushKeyboardEnhancementFlags(flags)).is_ok() {
                KEYBOARD_PUSHED.store(true, Ordering::SeqCst);
            }
        }
        let terminal =
            Terminal::new(CrosstermBackend::new(stdout())).context("starting ratatui")?;
        Ok((guard, terminal))
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Put the terminal and standard error back; safe to call more than once.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let mut out = stdout();
        if KEYBOARD_PUSHED.swap(false, Ordering::SeqCst) {
            let _ = execute!(out, PopKeyboardEnhancementFlags);
        }
        let _ = disable_raw_mode();
        let _ = execute!(
            out,
            DisableBracketedPaste,
            DisableMouseCapture,
            LeaveAlternateScreen,
            cursor::Show
        );
        let _ = out.flush();
    }
    let saved = SAVED_STDERR.swap(-1, Ordering::SeqCst);
    if saved >= 0 {
        // SAFETY: `saved` is the descriptor dup'ed from 2 in redirect_stderr;
        // it is put back on 2 and closed once (the swap above owns it).
        unsafe {
            libc::dup2(saved, 2);
            libc::close(saved);
        }
    }
}

fn redirect_stderr(path: &Path) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let file =
        File::create(path).with_context(|| format!("creating the log {}", path.display()))?;
    let _ = std::io::stderr().flush();
    // SAFETY: plain descriptor calls on descriptors this process owns; the
    // duplicate of 2 is kept in SAVED_STDERR until `restore` puts it back.
    unsafe {
        let saved = libc::dup(2);
        if saved < 0 {
            return Err(std::io::Error::last_os_error()).context("saving standard error");
        }
        if libc::dup2(file.as_raw_fd(), 2) < 0 {
            libc::close(saved);
            return Err(std::io::Error::last_os_error()).context("redirecting standard error");
        }
        SAVED_STDERR.store(saved, Ordering::SeqCst);
    }
    Ok(())
}
