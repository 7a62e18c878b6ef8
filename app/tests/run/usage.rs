//! Bad usage ends before any model loads: exit 2 with one line (or clap's
//! own message), a missing model exit 1 with one line — never a hang waiting
//! on a terminal, never a panic.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::Duration;

use crate::support::{Output, Sandbox, assert_one_line, model, output_of, wait_within};

const ERROR: &str = "headroom: error: ";

#[test]
fn no_prompt_on_an_empty_or_closed_stdin_is_bad_usage() {
    let sb = Sandbox::new();
    let m = model().display().to_string();
    let empty = sb.run(["run", &m]);
    assert_one_line(&empty, 2, ERROR, &["prompt"], "stdin /dev/null");

    let mut cmd = sb.cmd(["run", &m]);
    // SAFETY: only close(2) runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::close(0);
            Ok(())
        });
    }
    assert_one_line(&output_of(cmd), 2, ERROR, &["prompt"], "stdin closed");
}

/// A pseudo-terminal: the master end (kept open while the child runs) and
/// the terminal itself.
fn terminal() -> (File, File) {
    // SAFETY: plain libc calls on a descriptor this function owns; ptsname_r
    // writes a NUL-terminated name into the buffer it is given.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(
            master >= 0,
            "posix_openpt: {}",
            std::io::Error::last_os_error()
        );
        let master_file = <File as std::os::fd::FromRawFd>::from_raw_fd(master);
        assert_eq!(libc::grantpt(master), 0, "grantpt");
        assert_eq!(libc::unlockpt(master), 0, "unlockpt");
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(
            libc::ptsname_r(master, name.as_mut_ptr(), name.len()),
            0,
            "ptsname_r"
        );
        let path = std::ffi::CStr::from_ptr(name.as_ptr())
            .to_string_lossy()
            .into_owned();
        let tty = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open(&path)
            .unwrap_or_else(|e| panic!("opening {path}: {e}"));
        (master_file, tty)
    }
}

#[test]
fn no_prompt_on_a_terminal_is_bad_usage_not_a_wait() {
    let sb = Sandbox::new();
    let m = model().display().to_string();
    let (_master, tty) = terminal();
    let mut cmd = sb.cmd(["run", &m]);
    cmd.stdin(Stdio::from(tty))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let status = wait_within(&mut child, Duration::from_secs(60), "run on a terminal");
    let read = |r: Option<&mut dyn std::io::Read>| {
        let mut s = String::new();
        if let Some(r) = r {
            let _ = r.read_to_string(&mut s);
        }
        s
    };
    let out = Output {
        code: status.code(),
        stdout: read(child.stdout.as_mut().map(|s| s as &mut dyn std::io::Read)),
        stderr: read(child.stderr.as_mut().map(|s| s as &mut dyn std::io::Read)),
    };
    assert_one_line(
        &out,
        2,
        ERROR,
        &["no prompt", "-p", "-f"],
        "stdin a terminal",
    );
}

#[test]
fn bad_sampling_and_template_options_are_bad_usage() {
    let sb = Sandbox::new();
    let m = model().display().to_string();

    // clap reads `-1` as an argument: its own message, but exit 2.
    let out = sb.run(["run", &m, "-p", "hi", "--temp", "-1"]);
    assert_eq!(out.code, Some(2), "--temp -1: {}", out.stderr);
    assert!(out.stdout.is_empty(), "--temp -1: {}", out.stdout);

    let out = sb.run(["run", &m, "-p", "hi", "--temp=-1"]);
    assert_one_line(&out, 2, ERROR, &["--temp"], "--temp=-1");

    let out = sb.run(["run", &m, "-p", "hi", "--chat-template", "nosuch"]);
    assert_one_line(
        &out,
        2,
        ERROR,
        &["nosuch", "known names", "chatml", "gemma", "llama3"],
        "--chat-template nosuch",
    );

    let out = sb.run(["run", &m, "-p", "hi", "--raw", "--chat-template", "gemma"]);
    assert_one_line(&out, 2, ERROR, &["--raw"], "--raw with --chat-template");

    let missing = sb.path().join("nosuch.jinja").display().to_string();
    let out = sb.run(["run", &m, "-p", "hi", "--chat-template", &missing]);
    assert_one_line(&out, 2, ERROR, &[&missing], "--chat-template FILE missing");
}

#[test]
fn a_missing_model_is_one_line_and_exit_1() {
    let sb = Sandbox::new();
    let missing = sb.path().join("nosuch.gguf").display().to_string();
    let out = sb.run(["run", &missing, "-p", "hi"]);
    assert_one_line(&out, 1, ERROR, &[&missing], "missing model");
}
