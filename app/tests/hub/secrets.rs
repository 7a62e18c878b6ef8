//! The Hugging Face token never leaves the process except in the
//! `Authorization` header it is meant for (issue #6): not in any command's
//! output (human or `--json`, at every log level, success or failure), not
//! in any file headroom writes (hub and headroom caches, the calibration log,
//! saved conversations, the chat's log), and not on the chat's screen.
//!
//! Every command that can touch the hub, or that writes something, runs
//! against a hub stand-in on 127.0.0.1 that demands the token, with the
//! token coming from each place headroom reads it: `$HF_TOKEN`,
//! `$HF_TOKEN_PATH` and `$HF_HOME/token`. The test first proves the token was
//! really read and sent (else a leak could not happen and the test would be
//! empty), then searches everything for it, and for a shorter piece of it
//! in case something prints it cut short.
//!
//! Run with `cargo test --release -p headroom --test hub secrets:: -- --nocapture`.

use crate::demo;
use crate::hf_server;
use crate::models;
use crate::sandbox;
use crate::tmux;

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;

use headroom::source::demo::{FILE_NAME, SHA256};
use headroom_planner::gguf::GgmlType;
use hf_server::{Body, HfServer, RepoFile};
use sandbox::{Run, Sandbox, files_under};

const REPO: &str = "test-org/gemma-3-270m-GGUF";
const TINY: &str = "test-org/tiny-GGUF";
const TINY_PATH: &str = "test-org/tiny-by-path-GGUF";
const TINY_HOME: &str = "test-org/tiny-by-home-GGUF";

/// The three tokens, one per place a token is read from.
const FROM_VAR: &str = "hf_VarSecret4e1b9c27d0a85f36";
const FROM_PATH: &str = "hf_PathSecret7c2e0d91b4a36f58";
const FROM_HOME: &str = "hf_HomeSecret9a4f1e63c07b2d85";

/// The token and a piece of it long enough to be unmistakable: a message
/// that shortened it (`hf_VarSecret4e1b…`) still leaks most of it.
fn needles(token: &str) -> [&str; 2] {
    [token, &token[3..15]]
}

fn all_needles() -> Vec<&'static str> {
    [FROM_VAR, FROM_PATH, FROM_HOME]
        .iter()
        .flat_map(|t| needles(t))
        .collect()
}

/// Fails if any token (or a piece of one) is in `text`.
fn assert_clean(what: &str, text: &[u8]) {
    for n in all_needles() {
        assert!(
            !contains(text, n.as_bytes()),
            "{what} contains the token piece {n:?}:\n{}",
            String::from_utf8_lossy(text)
        );
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Whether the hub was sent `token` as a bearer token.
fn sent(server: &HfServer, token: &str) -> bool {
    let want = format!("Bearer {token}");
    server
        .requests()
        .iter()
        .any(|r| r.header("authorization") == Some(want.as_str()))
}

fn real_repo() -> Vec<RepoFile> {
    vec![
        RepoFile::lfs(FILE_NAME, Body::File(demo::demo_model())).with_sha256(SHA256),
        RepoFile::git("README.md", b"# gemma-3-270m\n"),
    ]
}

fn tiny_repo() -> Vec<RepoFile> {
    let q8 = models::file_bytes(&models::tiny_header(GgmlType::Q8_0), 1);
    vec![
        RepoFile::lfs("tiny-Q8_0.gguf", Body::Bytes(Arc::new(q8))),
        RepoFile::git("README.md", b"# tiny\n"),
    ]
}

/// Checks every command's output as it comes, and counts them.
struct Checked {
    runs: usize,
}

impl Checked {
    fn check(&mut self, what: &str, run: Run) -> Run {
        println!(
            "{what}: exit {:?}, {} bytes out, {} bytes err",
            run.code,
            run.stdout.len(),
            run.stderr.len()
        );
        assert_clean(&format!("stdout of {what}"), run.stdout.as_bytes());
        assert_clean(&format!("stderr of {what}"), run.stderr.as_bytes());
        self.runs += 1;
        run
    }
}

#[test]
fn the_hf_token_never_appears_in_output_logs_json_or_files() {
    let sb = Sandbox::new();
    let mut checked = Checked { runs: 0 };
    let quant = format!("{REPO}:Q4_K_M");
    let tiny = format!("{TINY}:Q8_0");
    let var = [("HF_TOKEN", FROM_VAR)];
    // Most log output there is: every crate at trace level (HTTP clients
    // included), llama.cpp's own log at -vv.
    let trace = [("HF_TOKEN", FROM_VAR), ("RUST_LOG", "trace")];

    // 1. $HF_TOKEN, against a hub that serves only to it.
    let hub = HfServer::builder()
        .repo(REPO, real_repo())
        .repo(TINY, tiny_repo())
        .require_token(FROM_VAR)
        .start();
    let url = hub.url();
    let r = checked.check(
        "plan from the header, --json",
        sb.run(&url, &["plan", &quant, "--json", "-vv"], &trace),
    );
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(sent(&hub, FROM_VAR), "the token from $HF_TOKEN is sent");
    let r = checked.check(
        "plan from the header",
        sb.run(&url, &["plan", &quant, "-vv"], &trace),
    );
    assert_eq!(r.code, Some(0), "{r:?}");
    let r = checked.check("pull", sb.run(&url, &["pull", &quant, "-vv"], &trace));
    assert_eq!(r.code, Some(0), "{r:?}");
    let r = checked.check(
        "pull, --json",
        sb.run(&url, &["pull", &tiny, "--json"], &var),
    );
    assert_eq!(r.code, Some(0), "{r:?}");
    // A run writes the calibration log; -vv shows llama.cpp's whole log.
    let r = checked.check(
        "run, --json",
        sb.run(
            &url,
            &["run", &quant, "-p", "Hello", "-n", "4", "--json", "-vv"],
            &trace,
        ),
    );
    assert_eq!(r.code, Some(0), "{r:?}");
    let r = checked.check(
        "run refused, --json",
        sb.run(
            &url,
            &["run", &quant, "-p", "Hello", "--ram", "64MiB", "--json"],
            &var,
        ),
    );
    assert_eq!(r.code, Some(3), "{r:?}");
    let r = checked.check(
        "plan of the downloaded file, with its last run",
        sb.run(&url, &["plan", &quant, "--json"], &var),
    );
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(
        r.json()["last_run"].is_object(),
        "the calibration log was written and read: {}",
        r.stdout
    );
    for args in [&["list", "--json"][..], &["list"], &["fit", "--json"]] {
        let r = checked.check(&args.join(" "), sb.run(&url, args, &trace));
        assert_eq!(r.code, Some(0), "{r:?}");
    }

    // 2. Failures, where a token is most tempting to print: refused (401),
    // forbidden (403), no hub at all, offline without the file.
    let wrong = HfServer::builder()
        .repo(TINY, tiny_repo())
        .require_token("hf_someone_elses")
        .start();
    for cmd in ["pull", "plan"] {
        let r = checked.check(
            &format!("{cmd} with a refused token"),
            sb.run(&wrong.url(), &[cmd, &format!("{TINY}:F16"), "-vv"], &trace),
        );
        assert_eq!(r.code, Some(1), "{r:?}");
        assert!(r.error_line().contains("$HF_TOKEN was refused"), "{r:?}");
    }
    assert!(sent(&wrong, FROM_VAR));
    let forbidden = HfServer::builder()
        .repo(TINY, tiny_repo())
        .fail(403, "", None)
        .start();
    let r = checked.check(
        "pull, forbidden",
        sb.run(
            &forbidden.url(),
            &["pull", "test-org/other-GGUF", "--json"],
            &trace,
        ),
    );
    assert_eq!(r.code, Some(1), "{r:?}");
    let r = checked.check(
        "pull, no hub listening",
        sb.run(
            "http://127.0.0.1:1",
            &["pull", "test-org/other-GGUF"],
            &trace,
        ),
    );
    assert_eq!(r.code, Some(1), "{r:?}");
    let offline = [("HF_TOKEN", FROM_VAR), ("HF_HUB_OFFLINE", "1")];
    let r = checked.check(
        "plan, offline, not in the cache",
        sb.run(&url, &["plan", "test-org/other-GGUF:Q4_K_M"], &offline),
    );
    assert_eq!(r.code, Some(1), "{r:?}");

    // 3. The token in a file: $HF_TOKEN_PATH, then $HF_HOME/token.
    let token_file = sb.dir.path().join("token-elsewhere");
    std::fs::write(&token_file, format!("{FROM_PATH}\n")).expect("write token file");
    let by_path = HfServer::builder()
        .repo(TINY_PATH, tiny_repo())
        .require_token(FROM_PATH)
        .start();
    let path_env = [
        (
            "HF_TOKEN_PATH",
            token_file.to_str().expect("UTF-8 temp path"),
        ),
        ("RUST_LOG", "trace"),
    ];
    let r = checked.check(
        "plan, token from $HF_TOKEN_PATH",
        sb.run(
            &by_path.url(),
            &["plan", &format!("{TINY_PATH}:F16"), "--json"],
            &path_env,
        ),
    );
    assert_eq!(r.code, Some(1), "F16 is not in the repository: {r:?}");
    let r = checked.check(
        "pull, token from $HF_TOKEN_PATH",
        sb.run(
            &by_path.url(),
            &["pull", &format!("{TINY_PATH}:Q8_0")],
            &path_env,
        ),
    );
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(sent(&by_path, FROM_PATH), "the token file is read and sent");
    let home_token = sb.dir.path().join("hf").join("token");
    std::fs::write(&home_token, FROM_HOME).expect("write $HF_HOME/token");
    let by_home = HfServer::builder()
        .repo(TINY_HOME, tiny_repo())
        .require_token(FROM_HOME)
        .start();
    let r = checked.check(
        "plan, token from $HF_HOME/token",
        sb.run(
            &by_home.url(),
            &["plan", &format!("{TINY_HOME}:Q8_0"), "--json", "-vv"],
            &[("RUST_LOG", "trace")],
        ),
    );
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(sent(&by_home, FROM_HOME), "$HF_HOME/token is read and sent");
    let r = checked.check(
        "plan, $HF_HOME/token refused",
        sb.run(&wrong.url(), &["plan", &format!("{TINY}:F16")], &[]),
    );
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.error_line().contains("refused"), "{r:?}");

    // 4. The chat, in a terminal: its screen, its log, its saved conversation.
    let chat_dir = sb.dir.path().join("chat");
    std::fs::create_dir_all(&chat_dir).expect("chat dir");
    let log = sb.dir.path().join("chat.log");
    let screens = chat(&sb, &url, &quant, &chat_dir, &log);
    for (i, s) in screens.iter().enumerate() {
        assert_clean(&format!("chat screen {i}"), s.as_bytes());
    }
    assert!(chat_dir.join("talk.json").is_file() && chat_dir.join("talk.md").is_file());

    // 5. Every file headroom wrote: caches, calibration log, chat files.
    let root = sb.dir.path();
    let mut scanned = 0;
    let mut bytes = 0;
    for rel in files_under(root) {
        let path = root.join(&rel);
        if path == token_file || path == home_token {
            continue;
        }
        let Ok(content) = std::fs::read(&path) else {
            continue; // a dangling link, say: nothing in it to leak
        };
        assert_clean(&rel, &content);
        scanned += 1;
        bytes += content.len();
    }
    let calibration = sb.data_dir().join("calibration.jsonl");
    assert!(calibration.is_file(), "the calibration log was scanned");
    assert!(log.is_file(), "the chat log was scanned");
    println!(
        "{} runs and {} chat screens clean; {scanned} files ({bytes} bytes) clean",
        checked.runs,
        screens.len()
    );
}

/// A short chat with the token in its environment: a message, a reply,
/// both saves, quit. Returns the screens it showed.
fn chat(sb: &Sandbox, url: &str, model: &str, dir: &Path, log: &Path) -> Vec<String> {
    let env: [(&str, &dyn AsRef<OsStr>); 7] = [
        ("HEADROOM_CACHE_DIR", &sb.headroom_cache()),
        ("HEADROOM_DATA_DIR", &sb.data_dir()),
        ("HF_HOME", &sb.dir.path().join("hf")),
        ("HF_HUB_CACHE", &sb.hub_cache()),
        ("HF_ENDPOINT", &url),
        ("HF_TOKEN", &FROM_VAR),
        ("HEADROOM_CHAT_LOG", &log),
    ];
    let term = tmux::Tmux::start("secrets", &env);
    let mut screens = vec![tmux::launch(&term, dir, model, "-c 512 -n 8 --seed 1", log)];
    term.type_text("Hello there");
    term.keys(&["Enter"]);
    screens.push(term.wait_for("the reply", 120, log, |s| {
        s.contains("Enter sends") && !s.contains("streaming")
    }));
    for file in ["talk.json", "talk.md"] {
        term.type_text(&format!("/save {file}"));
        term.keys(&["Enter"]);
        screens.push(term.wait_for("the save", 10, log, |s| s.contains(&format!("to {file}"))));
    }
    term.type_text("/plan");
    term.keys(&["Enter"]);
    screens.push(term.wait_for("the plan", 10, log, |s| s.contains("fits")));
    term.keys(&["C-d"]);
    screens.push(term.wait_for("the shell", 20, log, |s| {
        s.lines().any(|l| l.starts_with("EXIT="))
    }));
    assert!(
        screens.last().is_some_and(|s| s.contains("EXIT=0")),
        "{screens:?}"
    );
    screens
}
