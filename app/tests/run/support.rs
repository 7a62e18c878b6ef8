//! Helpers for the `headroom run` tests: the binary, the real test model, a
//! private data directory per test (so the calibration log never touches the
//! user's), running to completion, and the checks every error path shares.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

/// One MiB.
pub const MIB: u64 = 1 << 20;

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_headroom")
}

/// A greedy raw run that would go on for ever (end of generation ignored,
/// 100,000 tokens asked for): what stops it is what a test is about (a
/// full context, Ctrl-C).
pub const ENDLESS_GREEDY: [&str; 8] = [
    "--raw",
    "-p",
    "Once upon a time",
    "--temp",
    "0",
    "--ignore-eos",
    "-n",
    "100000",
];

/// The real test model: `HEADROOM_TEST_MODEL` when set (scripts/test.sh sets
/// it), else whatever `headroom demo-model` gives (fetching it if needed).
pub fn model() -> &'static Path {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    MODEL.get_or_init(|| {
        if let Some(p) = std::env::var_os("HEADROOM_TEST_MODEL") {
            return PathBuf::from(p);
        }
        let out = Command::new(bin())
            .args(["demo-model", "demo-base"])
            .output()
            .unwrap_or_else(|e| panic!("cannot run headroom demo-model: {e}"));
        assert!(
            out.status.success(),
            "headroom demo-model failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// Set in the child process that does the work of an in-process test.
const CHILD: &str = "HEADROOM_TEST_IN_CHILD";

/// Runs test `name` of this binary again, alone, in a child process with
/// `env` set, and fails with its output when it fails. Returns true in the
/// child itself, where the caller then does the work.
///
/// For tests that change llama.cpp's process-wide state: a variable ggml
/// reads once at start (lavapipe's), or RPC devices, which stay in ggml's
/// device registry for the life of the process, so that any later in-process
/// load in this binary would reach a worker already stopped (and llama.cpp
/// aborts when it cannot connect).
pub fn in_child(name: &str, env: &[(&str, &str)]) -> bool {
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .envs(env.iter().copied())
        .output()
        .expect("the test binary starts again");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "{name} in a child process:\n{text}");
    assert!(
        text.contains("1 passed"),
        "{name}: the child ran no test:\n{text}"
    );
    false
}

/// Model runs take the machine's cores; running them one at a time keeps each
/// one's timing sane and the whole binary no slower on two cores.
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    static GATE: Mutex<()> = Mutex::new(());
    // A failed test poisons the lock; the others still run.
    GATE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What a finished run left behind.
#[derive(Debug)]
pub struct Output {
    /// Exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// Standard output (the tests require it to be UTF-8).
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Output {
    fn from_parts(status: ExitStatus, stdout: Vec<u8>, stderr: &[u8], what: &str) -> Self {
        Output {
            code: status.code(),
            stdout: String::from_utf8(stdout)
                .unwrap_or_else(|e| panic!("{what}: stdout is not UTF-8: {e}")),
            stderr: String::from_utf8_lossy(stderr).into_owned(),
        }
    }

    /// Expects exit code 0 (with the command and stderr in the message).
    pub fn ok(self, what: &str) -> Self {
        assert_eq!(
            self.code,
            Some(0),
            "{what}: exit code; stderr: {}",
            self.stderr
        );
        self
    }

    /// Parses stdout as exactly one JSON document and nothing else.
    pub fn json(&self, what: &str) -> Value {
        let mut docs = serde_json::Deserializer::from_str(&self.stdout).into_iter::<Value>();
        let first = docs
            .next()
            .unwrap_or_else(|| panic!("{what}: no JSON on stdout"))
            .unwrap_or_else(|e| panic!("{what}: stdout is not JSON ({e}):\n{}", self.stdout));
        assert!(
            docs.next().is_none(),
            "{what}: more than one JSON document on stdout:\n{}",
            self.stdout
        );
        first
    }
}

/// headroom's cache folder as the binary finds it: `$HEADROOM_CACHE_DIR`,
/// else `~/.cache/headroom` (the demo models, the tools the tests build).
pub fn headroom_cache() -> PathBuf {
    std::env::var_os("HEADROOM_CACHE_DIR").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/headroom"),
        PathBuf::from,
    )
}

/// A private `HEADROOM_DATA_DIR` and commands that use it.
pub struct Sandbox {
    dir: TempDir,
}

impl Sandbox {
    /// A fresh, empty data directory.
    pub fn new() -> Self {
        Sandbox {
            dir: tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}")),
        }
    }

    /// The data directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `headroom ARGS…` with this data directory and default logging.
    pub fn cmd<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(bin());
        cmd.args(args)
            .env("HEADROOM_DATA_DIR", self.dir.path())
            // Tests must see exactly what a user sees.
            .env_remove("RUST_LOG")
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `headroom ARGS…` to completion with stdin empty.
    pub fn run<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        output_of(self.cmd(args))
    }

    /// `run MODEL ARGS…` on the test model.
    pub fn run_model(&self, args: &[&str]) -> Output {
        let mut all = vec!["run".as_ref(), model().as_os_str()];
        all.extend(args.iter().map(OsStr::new));
        self.run(all)
    }

    /// `plan MODEL ARGS… --json` on the test model; expects `code`.
    pub fn plan_json(&self, args: &[&str], code: i32) -> Value {
        let mut all = vec!["plan".as_ref(), model().as_os_str(), "--json".as_ref()];
        all.extend(args.iter().map(OsStr::new));
        let out = self.run(all);
        let what = format!("plan {args:?}");
        assert_eq!(
            out.code,
            Some(code),
            "{what}: exit code; stderr: {}",
            out.stderr
        );
        out.json(&what)
    }
}

/// Runs a prepared command to completion, stdout and stderr captured.
pub fn output_of(mut cmd: Command) -> Output {
    let what = format!("{cmd:?}");
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    Output::from_parts(out.status, out.stdout, &out.stderr, &what)
}

/// Waits for `child` for at most `limit`, killing it (and failing) after.
pub fn wait_within(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status,
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what}: still running after {limit:?}; killed");
            }
            Err(e) => panic!("{what}: wait: {e}"),
        }
    }
}

/// The failure contract ([`crate::checks::assert_one_line`]).
pub fn assert_one_line(out: &Output, code: i32, prefix: &str, needles: &[&str], what: &str) {
    crate::checks::assert_one_line(
        (out.code, &out.stdout, &out.stderr),
        code,
        prefix,
        needles,
        what,
    );
}

pub use crate::checks::{f64_at, str_at, u64_at};

/// The text `run` prints without `--json` for a generation whose `--json`
/// text is `text`: the text, and a newline when it does not end with one.
pub fn as_printed(text: &str) -> String {
    if text.ends_with('\n') {
        text.to_string()
    } else {
        format!("{text}\n")
    }
}

/// A prompt of about 64 tokens on the demo model's tokenizer.
pub const PROMPT_64: &str = "The history of the city begins with a small settlement on the banks \
of a wide river, where farmers and fishermen traded grain, salt and cloth. Over the centuries the \
settlement grew into a market town, then a walled city with a cathedral, a university and a harbour \
that sent ships to distant ports across the sea.";
