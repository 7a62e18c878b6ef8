//! Helpers shared by the CLI tests: running the built `headroom` binary,
//! reading its JSON, and the checks every error path must pass.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// One GiB.
pub const GIB: u64 = 1 << 30;
/// One MiB.
pub const MIB: u64 = 1 << 20;

/// The binary under test (built by cargo for this test target).
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_headroom")
}

/// A hardware profile from the planner's fixtures.
pub fn hw_fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../planner/tests/fixtures/hw")
        .join(name)
}

/// What a finished run of the binary left behind.
#[derive(Debug)]
pub struct Output {
    /// Exit code; `None` when a signal ended it (an abort or a crash).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs `headroom ARGS…` to completion.
pub fn run<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new(bin());
    cmd.args(args);
    output_of(cmd)
}

/// Runs a prepared command to completion and decodes its output.
pub fn output_of(mut cmd: Command) -> Output {
    // Logging stays at its default: tests must see exactly what a user sees.
    cmd.env_remove("RUST_LOG");
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    Output {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `headroom ARGS…`, expects exit `code`, and parses stdout as JSON.
pub fn json<I, S>(args: I, code: i32) -> Value
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<S> = args.into_iter().collect();
    let shown: Vec<String> = args
        .iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect();
    let out = run(args);
    assert_eq!(
        out.code,
        Some(code),
        "headroom {shown:?}: wrong exit code; stderr: {}",
        out.stderr
    );
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "headroom {shown:?}: stdout is not JSON ({e}):\n{}",
            out.stdout
        )
    })
}

pub use crate::checks::{arr_at, f64_at, str_at, u64_at};

/// The failure contract for `headroom: error:` lines ([`crate::checks::assert_one_line`]).
pub fn assert_one_line_error(out: &Output, code: i32, needles: &[&str], what: &str) {
    crate::checks::assert_one_line(
        (out.code, &out.stdout, &out.stderr),
        code,
        "headroom: error: ",
        needles,
        what,
    );
}
