//! llama.cpp's own error lines, kept so a failed load can say what failed.
//!
//! llama-cpp-2 routes llama.cpp's log into `tracing` (target `llama-cpp-2`).
//! [`Capture`] is a `tracing` layer that keeps the last few warnings and
//! errors from that target, whatever the verbosity, so "could not load" can
//! become "failed to allocate CPU buffer of size 1.2 GiB".

use std::collections::VecDeque;
use std::sync::Mutex;

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::Context;

const KEEP: usize = 8;
static LAST: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());

/// The `tracing` layer that records llama.cpp's warnings and errors.
#[derive(Debug, Default, Clone, Copy)]
pub struct Capture;

struct Message(String);

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0 = value.to_string();
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" && self.0.is_empty() {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        if meta.target() != "llama-cpp-2" || *meta.level() > tracing::Level::WARN {
            return;
        }
        let mut m = Message(String::new());
        event.record(&mut m);
        let line = m.0.trim().to_string();
        if line.is_empty() {
            return;
        }
        if let Ok(mut last) = LAST.lock() {
            if last.len() == KEEP {
                last.pop_front();
            }
            last.push_back(line);
        }
    }
}

/// Forget what was captured (call before an operation whose errors you want).
pub fn clear() {
    if let Ok(mut last) = LAST.lock() {
        last.clear();
    }
}

/// The first error-looking line llama.cpp logged since [`clear`] (the
/// cause; later lines tend to be "failed to load model"), if any.
#[must_use]
pub fn first_error() -> Option<String> {
    let last = LAST.lock().ok()?;
    last.iter()
        .find(|l| {
            let l = l.to_ascii_lowercase();
            [
                "fail",
                "error",
                "unable",
                "cannot",
                "insufficient",
                "out of memory",
            ]
            .iter()
            .any(|w| l.contains(w))
        })
        .or_else(|| last.back())
        .cloned()
}
