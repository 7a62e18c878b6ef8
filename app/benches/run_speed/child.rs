//! Running one program to completion and reading its own peak RSS.
//!
//! The peak comes from `wait4`'s `rusage`, which belongs to that child alone;
//! `getrusage(RUSAGE_CHILDREN)` would give the largest peak of every child
//! reaped so far, so a big llama-completion run would hide a smaller headroom
//! one after it.

use std::io::Read;
use std::process::{Command, Stdio};
use std::thread;

use anyhow::{Context, Result, bail};

/// What a finished child left: its output and its own peak RSS.
pub struct Measured {
    pub stdout: String,
    pub stderr: String,
    /// Peak resident set size, bytes.
    pub max_rss: u64,
}

/// Runs `cmd` (standard input closed) to completion and reaps it with
/// `wait4`. Fails on a non-zero exit, quoting the end of its stderr.
pub fn measure(mut cmd: Command) -> Result<Measured> {
    let shown = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {shown}"))?;
    // Drain both pipes while the child runs, so a full pipe never blocks it.
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let pid = libc::pid_t::try_from(child.id()).context("child pid out of range")?;
    let (status, usage) = wait4(pid).with_context(|| format!("waiting for {shown}"))?;
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        let lines: Vec<&str> = stderr.lines().collect();
        let tail = lines[lines.len().saturating_sub(15)..].join("\n");
        bail!("{shown} failed (wait status {status:#x}):\n{tail}");
    }
    // Linux reports ru_maxrss in KiB.
    let max_rss = u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024;
    Ok(Measured {
        stdout,
        stderr,
        max_rss,
    })
}

/// Reads a pipe to its end on a thread; lossy UTF-8 (llama.cpp may print
/// half a character at a token boundary).
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut p) = pipe {
            // A read error only truncates what is parsed later, which then
            // fails with its own message.
            let _ = p.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// `wait4(pid)`, retried on EINTR: the exit status and the child's rusage.
fn wait4(pid: libc::pid_t) -> Result<(libc::c_int, libc::rusage)> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data, for which all-zero bytes are valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both pointers are to live locals of the right types, and
        // `pid` is our own child, not yet reaped (std's `Child` never waits
        // unless asked).
        let r = unsafe { libc::wait4(pid, &raw mut status, 0, &raw mut usage) };
        if r == pid {
            return Ok((status, usage));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e).context("wait4");
        }
    }
}
