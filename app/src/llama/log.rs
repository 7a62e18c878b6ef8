//! llama.cpp's own error lines, kept so a failed load can say what failed.
//!
//! llama-cpp-2 routes llama.cpp's log into `tracing` (target `llama-cpp-2`).
//! [`Capture`] is a `tracing` layer that keeps the last few warnings and
//! errors from that target, whatever the verbosity, so "could not load" can
//! become "failed to allocate CPU buffer of size 1.2 GiB".
//!
//! The C++ shim's calls (accounting, quantization types) keep their own
//! lines instead: the shim puts one permanent callback in front of
//! llama-cpp-2's, which hands a line to the capture of the shim call running
//! on the logging thread, if any, and to `tracing` otherwise
//! (`app/shim/shim_log.h`). Nothing is swapped per call, so the engine
//! logging on another thread meanwhile neither loses lines into a shim
//! call's error nor sees the shim's; the test below holds both to that.

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

#[cfg(test)]
mod tests {
    use super::super::{AccountingError, AccountingParams, accounting, backend, ffi};
    use std::ffi::{CStr, CString, c_char, c_void};
    use std::sync::{Condvar, Mutex};
    use std::thread::{self, ThreadId};
    use std::time::Duration;

    /// In the shim call's own lines (its model path).
    const SHIM_MARK: &str = "headroom-shim-";
    /// In the engine's lines.
    const ENGINE_MARK: &str = "headroom-engine-";

    /// Every line that reached the shim's downstream logger, with the thread
    /// that logged it.
    static DOWNSTREAM: Mutex<Vec<(ThreadId, String)>> = Mutex::new(Vec::new());

    /// Holds the shim call in the middle of its capture until the engine
    /// thread has logged: the interleaving a race would need, forced.
    #[derive(Default)]
    struct Gate {
        armed: bool,
        shim_inside: bool,
        engine_done: bool,
    }
    static GATE: Mutex<Gate> = Mutex::new(Gate {
        armed: false,
        shim_inside: false,
        engine_done: false,
    });
    static GATE_CHANGED: Condvar = Condvar::new();

    /// Waits (at most a minute: a broken design fails the assertions, it
    /// does not hang) until `done` holds.
    fn wait_until(done: impl Fn(&Gate) -> bool) {
        let Ok(gate) = GATE.lock() else { return };
        let _ = GATE_CHANGED.wait_timeout_while(gate, Duration::from_secs(60), |g| !done(g));
    }

    fn update(change: impl FnOnce(&mut Gate)) {
        if let Ok(mut g) = GATE.lock() {
            change(&mut g);
        }
        GATE_CHANGED.notify_all();
    }

    /// Stands in for llama-cpp-2's bridge into `tracing` during the test.
    unsafe extern "C" fn record(
        _level: llama_cpp_sys_2::ggml_log_level,
        text: *const c_char,
        _user_data: *mut c_void,
    ) {
        if text.is_null() {
            return;
        }
        // SAFETY: llama.cpp passes a NUL-terminated line, valid for the call.
        let line = unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned();
        let from_shim = line.contains(SHIM_MARK);
        if let Ok(mut seen) = DOWNSTREAM.lock() {
            seen.push((thread::current().id(), line));
        }
        // A forwarded line of the shim call: its capture is active right
        // now. Let the engine log, and only then let the call go on.
        let first = from_shim
            && GATE.lock().is_ok_and(|mut g| {
                let first = g.armed;
                g.armed = false;
                first
            });
        if first {
            update(|g| g.shim_inside = true);
            wait_until(|g| g.engine_done);
        }
    }

    /// A shim accounting call and llama.cpp logging on another thread (a
    /// failing load, as the engine's own calls would) keep their own lines,
    /// with the engine's line forced to fall inside the shim call's capture
    /// (the downstream logger holds the call there). The capture quotes only
    /// the call's own lines; the engine's line reaches the downstream logger
    /// from the engine's thread; a call that does not forward sends nothing
    /// there. (With the logger swapped around each shim call, as before, the
    /// engine's line landed in the call's capture: crossed, and, without
    /// forwarding, lost.)
    #[test]
    fn shim_captures_and_engine_logs_on_two_threads_keep_their_own_lines() {
        let _ = backend::shared();
        let mut prev_cb: llama_cpp_sys_2::ggml_log_callback = None;
        let mut prev_ud: *mut c_void = std::ptr::null_mut();
        // SAFETY: `record` is a valid callback for the whole process
        // lifetime and ignores its user data; the out-pointers are locals.
        unsafe {
            ffi::hr_log_swap_downstream(
                Some(record),
                std::ptr::null_mut(),
                &raw mut prev_cb,
                &raw mut prev_ud,
            );
        }
        update(|g| {
            *g = Gate {
                armed: true,
                ..Gate::default()
            }
        });

        let (forwarded, engine_thread) = thread::scope(|s| {
            let shim = s.spawn(|| {
                accounting::breakdown(&AccountingParams {
                    forward_logs: true,
                    ..AccountingParams::for_model(format!("/nonexistent/{SHIM_MARK}forwarded.gguf"))
                })
            });
            let engine = s.spawn(|| {
                wait_until(|g| g.shim_inside);
                let path = CString::new(format!("/nonexistent/{ENGINE_MARK}0.gguf"))
                    .expect("no NUL in a formatted path");
                // SAFETY: a valid C string and default parameters; the load
                // fails (no such file) and returns null, having logged why,
                // as llama-cpp-2's LlamaModel::load_from_file would.
                let model = unsafe {
                    llama_cpp_sys_2::llama_model_load_from_file(
                        path.as_ptr(),
                        llama_cpp_sys_2::llama_model_default_params(),
                    )
                };
                update(|g| g.engine_done = true);
                assert!(model.is_null(), "no such file, yet a model");
                thread::current().id()
            });
            (
                shim.join().expect("shim thread"),
                engine.join().expect("engine thread"),
            )
        });
        let quiet = accounting::breakdown(&AccountingParams::for_model(format!(
            "/nonexistent/{SHIM_MARK}quiet.gguf"
        )));

        // SAFETY: puts back the logger that was there (a valid pair, as
        // handed out by the shim).
        unsafe {
            ffi::hr_log_swap_downstream(
                prev_cb,
                prev_ud,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
        }
        let seen = DOWNSTREAM.lock().map(|v| v.clone()).unwrap_or_default();
        let gate_reached = GATE.lock().is_ok_and(|g| g.shim_inside && g.engine_done);
        assert!(gate_reached, "the engine never logged inside the shim call");

        for (name, result) in [("forwarded", &forwarded), ("quiet", &quiet)] {
            let Err(AccountingError::ModelLoad { detail, .. }) = result else {
                panic!("{name}: expected ModelLoad, got {result:?}");
            };
            let (_, said) = detail
                .split_once("llama.cpp said:")
                .unwrap_or_else(|| panic!("{name}: nothing captured: {detail}"));
            assert!(
                said.contains(&format!("{SHIM_MARK}{name}.gguf")),
                "{name}: the capture lacks its own line: {detail}"
            );
            assert!(
                !said.contains(ENGINE_MARK),
                "{name}: an engine line crossed into a shim capture: {detail}"
            );
        }
        assert!(
            seen.iter()
                .any(|(t, line)| *t == engine_thread && line.contains(ENGINE_MARK)),
            "the engine's line never reached the downstream logger: {seen:?}"
        );
        assert!(
            !seen
                .iter()
                .any(|(_, line)| line.contains(&format!("{SHIM_MARK}quiet"))),
            "a call without forwarding sent its lines downstream: {seen:?}"
        );
    }
}
