//! A terminal for end-to-end tests of `headroom chat`: a tmux server of the
//! test's own (80×24), typed into with `send-keys` and read with
//! `capture-pane`.

#![allow(dead_code)] // Each test binary uses a different part of it.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of our own (its own socket), killed when dropped.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    pub fn start(name: &str, env: &[(&str, &dyn AsRef<OsStr>)]) -> Tmux {
        let socket = format!("headroom-chat-{name}-{}", std::process::id());
        let t = Tmux { socket };
        let mut cmd = Command::new("tmux");
        cmd.args(["-L", &t.socket, "-f", "/dev/null", "new-session", "-d"])
            .args(["-x", "80", "-y", "24", "-s", "chat"])
            .arg("bash --norc --noprofile")
            .env_remove("NO_COLOR")
            .env_remove("RUST_LOG");
        for (k, v) in env {
            cmd.env(k, v.as_ref());
        }
        let status = cmd.status().unwrap_or_else(|e| {
            panic!("tmux is needed for this test (scripts/setup.sh installs it): {e}")
        });
        assert!(status.success(), "tmux new-session failed");
        // Esc must reach the program at once, not wait for a possible Alt sequence.
        t.tmux(&["set", "-s", "escape-time", "0"]);
        t
    }

    pub fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("tmux {args:?}: {e}"));
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Type text literally.
    pub fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "chat", "-l", text]);
    }

    /// Press named keys (`Enter`, `Escape`, `C-d`).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "chat"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "chat"])
    }

    pub fn flag(&self, name: &str) -> String {
        self.tmux(&["display", "-p", "-t", "chat", &format!("#{{{name}}}")])
            .trim()
            .to_string()
    }

    /// Wait until the screen satisfies `ok`; on timeout, fail with the screen
    /// and the chat's log.
    pub fn wait_for(&self, what: &str, secs: u64, log: &Path, ok: impl Fn(&str) -> bool) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            if t0.elapsed() > Duration::from_secs(secs) {
                let log = std::fs::read_to_string(log).unwrap_or_default();
                panic!(
                    "timed out after {secs} s waiting for {what}; screen:\n{s}\nchat log:\n{log}"
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// Starts `headroom chat MODEL ARGS` from the shell in `dir`, with `echo
/// EXIT=$?` after it, and waits for the model to load.
pub fn launch(tmux: &Tmux, dir: &Path, model: &str, args: &str, log: &Path) -> String {
    tmux.wait_for("the shell's prompt", 10, log, |s| !s.trim().is_empty());
    let cmd = format!(
        "cd {} && {} chat {} {args}; echo EXIT=$?",
        dir.display(),
        env!("CARGO_BIN_EXE_headroom"),
        model
    );
    tmux.type_text(&cmd);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the model to load", 180, log, |s| s.contains("· loaded in"))
}
