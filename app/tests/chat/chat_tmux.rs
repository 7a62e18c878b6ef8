//! `headroom chat` end to end, in a real terminal: tmux runs the binary on the
//! real test model (80×24), the test types with `send-keys` and reads the
//! screen with `capture-pane`.
//!
//! It sends a message and sees the reply stream with the status bar; types
//! while the reply streams (those key presses are timed by the chat itself,
//! through `HEADROOM_CHAT_LATENCY_LOG`: key read → frame drawn); stops the
//! reply with Esc; saves the conversation as JSON and Markdown and checks the
//! files; quits with Ctrl+D; and checks the terminal was given back (the
//! shell's screen again, no alternate screen, no mouse reporting, canonical
//! mode and echo on).
//!
//! A GGUF whose chat template never finishes is refused: within 5 s the
//! screen shows one error line saying so, and the chat has exited 1.
//!
//! The base demo model (Gemma 3 270M) rambles, so most tests here do not
//! depend on what it says; one asks the instruct demo model (SmolLM2-135M-
//! Instruct, with its ChatML template) a question and checks the answer.
//! Run alone with `cargo test --release -p headroom --test chat chat_tmux -- --nocapture`
//! to see the latency figures.

use crate::tmux;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::rpc_worker::Worker;
use tmux::{Tmux, launch};

/// One chat at a time: two models decoding at once on a small machine would
/// distort the latency figures.
static SERIAL: Mutex<()> = Mutex::new(());

/// What most tests here start from: their turn (one chat at a time), the
/// model, a temporary folder with the chat's log, and a terminal.
struct Setup {
    _serial: std::sync::MutexGuard<'static, ()>,
    model: PathBuf,
    dir: tempfile::TempDir,
    log: PathBuf,
    tmux: Tmux,
}

impl Setup {
    fn new(name: &str) -> Setup {
        let serial = SERIAL
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("chat.log");
        let tmux = Tmux::start(name, &[("HEADROOM_CHAT_LOG", &log)]);
        Setup {
            _serial: serial,
            model: model(),
            dir,
            log,
            tmux,
        }
    }
}

fn model() -> PathBuf {
    crate::demo::demo_model()
}

/// The lines of the last reply under the model's header line.
fn reply_lines(screen: &str, model: &str) -> Vec<String> {
    let lines: Vec<&str> = screen.lines().collect();
    let Some(at) = lines.iter().rposition(|l| l.trim_end() == model) else {
        return Vec::new();
    };
    lines[at + 1..]
        .iter()
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Whether the input box holds `text`.
fn in_input(screen: &str, text: &str) -> bool {
    screen
        .lines()
        .any(|l| l.starts_with('│') && l.contains(text))
}

/// Tokens in the context, from the status bar (`ctx ███░░ 123/2048`).
fn ctx_used(screen: &str) -> usize {
    screen
        .lines()
        .find(|l| l.starts_with(" ctx "))
        .and_then(|l| l.split_whitespace().find(|w| w.contains('/')))
        .and_then(|w| w.split('/').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Starts a chat at -c 512 and returns its pid (the shell's only child).
fn chat_at_512(tmux: &Tmux, model: &Path, dir: &Path, log: &Path) -> i32 {
    launch(tmux, dir, &model.display().to_string(), "-c 512", log);
    let shell: i32 = tmux.flag("pane_pid").parse().expect("pane pid");
    let children = children_of(shell);
    let [pid] = children.as_slice() else {
        panic!("one child of the shell: {children:?}")
    };
    *pid
}

/// Processes whose parent is `ppid` (from /proc, no procps needed).
fn children_of(ppid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            // /proc/PID/stat: "pid (comm) state ppid ..."; comm may hold spaces.
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|st| {
                    let after = &st[st.rfind(')')? + 1..];
                    after.split_whitespace().nth(1)?.parse::<i32>().ok()
                })
                == Some(ppid)
        })
        .collect()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The shell's `EXIT=N` line. Not the typed command's own `EXIT=$?`, which
/// the terminal puts at the start of a line when the command wraps just
/// before it (it does for some checkout paths' lengths).
fn exit_line(l: &str) -> bool {
    l.strip_prefix("EXIT=")
        .is_some_and(|code| code.starts_with(|c: char| c.is_ascii_digit()))
}

/// Waits for the shell's `EXIT=` line and checks the terminal is the shell's
/// again: its screen, no alternate screen, no mouse reporting, icanon and echo.
fn assert_restored(tmux: &Tmux, log: &Path, code: &str) -> String {
    let s = tmux.wait_for("the chat to exit", 20, log, |s| s.lines().any(exit_line));
    assert!(s.contains(&format!("EXIT={code}")), "exit status:\n{s}");
    let first_line = s.lines().next().unwrap_or_default();
    assert!(
        first_line.contains(" cd "),
        "the shell's screen is back:\n{s}"
    );
    assert_eq!(tmux.flag("alternate_on"), "0", "alternate screen left");
    assert_eq!(tmux.flag("mouse_any_flag"), "0", "mouse reporting off");
    tmux.type_text(
        "stty -a | tr -s ' ;' '\\n' | grep -xE -- '-?(icanon|echo)' | tr '\\n' ' '; echo",
    );
    tmux.keys(&["Enter"]);
    let t = tmux.wait_for("stty", 10, log, |s| {
        s.contains("icanon echo") || s.contains("-icanon") || s.contains("-echo")
    });
    assert!(
        t.contains("icanon echo") && !t.contains("-icanon") && !t.contains("-echo "),
        "tty modes restored:\n{t}"
    );
    s
}

#[test]
fn chat_in_a_real_terminal() {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let model = model();
    let stem = model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .expect("model file name");
    let dir = tempfile::tempdir().expect("temp dir");
    let latency = dir.path().join("latency.log");
    let log = dir.path().join("chat.log");
    let tmux = Tmux::start(
        "main",
        &[
            ("HEADROOM_CHAT_LATENCY_LOG", &latency),
            ("HEADROOM_CHAT_LOG", &log),
        ],
    );

    // Start: the shell's screen shows the command line; the chat takes over.
    // --ignore-eos keeps the reply going until Esc stops it.
    let s = launch(
        &tmux,
        dir.path(),
        &model.display().to_string(),
        "-c 2048 --ignore-eos --seed 7",
        &log,
    );
    assert_eq!(
        tmux.flag("alternate_on"),
        "1",
        "the chat uses the alternate screen"
    );
    assert!(
        s.contains(" RAM ") && s.contains(" ctx "),
        "status bar:\n{s}"
    );
    assert!(s.contains("plan: fits"), "banner:\n{s}");

    // A message; the reply streams, the status bar shows the live speed.
    tmux.type_text("Hello there");
    tmux.keys(&["Enter"]);
    // The live speed appears with the first streamed text.
    let s = tmux.wait_for("a streamed reply", 60, &log, |s| s.contains("tok/s ▸"));
    assert!(s.contains("streaming · Esc stops"), "{s}");
    // The reply shows under the model's name (unless it already scrolled
    // past the top, which takes more lines still).
    let header = s.lines().any(|l| l.trim_end() == stem);
    assert!(
        !header || !reply_lines(&s, &stem).is_empty(),
        "reply text:\n{s}"
    );
    let first = ctx_used(&s);

    // Type while it streams: each key press is timed by the chat.
    for c in "/save conversation.json".chars() {
        tmux.type_text(&c.to_string());
        std::thread::sleep(Duration::from_millis(60));
    }
    let s = tmux.wait_for("the typed text", 10, &log, |s| {
        in_input(s, "/save conversation.json")
    });
    assert!(
        s.contains("streaming · Esc stops"),
        "still streaming after typing:\n{s}"
    );
    // It goes on growing (on a busy machine a token can take a while).
    tmux.wait_for("the reply to grow", 60, &log, |s| ctx_used(s) > first);

    // Esc stops it.
    let t_esc = Instant::now();
    tmux.keys(&["Escape"]);
    let s = tmux.wait_for("the reply to stop", 30, &log, |s| s.contains("[stopped]"));
    let stop_ms = t_esc.elapsed().as_millis();
    assert!(s.contains("Enter sends"), "idle again:\n{s}");

    // Save (the command typed during the reply), then Markdown too.
    tmux.keys(&["Enter"]);
    tmux.wait_for("the JSON save", 10, &log, |s| {
        s.contains("saved 2 messages to conversation.json")
    });
    tmux.type_text("/save conversation.md");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the Markdown save", 10, &log, |s| {
        s.contains("saved 2 messages to conversation.md")
    });
    let json = std::fs::read_to_string(dir.path().join("conversation.json")).expect("JSON saved");
    let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    let msgs = v["messages"].as_array().expect("messages");
    assert_eq!(msgs.len(), 2, "{json}");
    assert_eq!(msgs[0]["role"], "user");
    assert_eq!(msgs[0]["content"], "Hello there");
    assert_eq!(msgs[1]["role"], "assistant");
    let reply = msgs[1]["content"].as_str().expect("reply text");
    assert!(
        !reply.trim().is_empty(),
        "the stopped reply is saved: {json}"
    );
    assert_eq!(v["model"], stem.as_str());
    let md = std::fs::read_to_string(dir.path().join("conversation.md")).expect("Markdown saved");
    assert!(md.contains("## You\n\nHello there\n"), "{md}");
    assert!(
        md.contains(&format!("## {stem}\n\n{}", reply.trim_end())),
        "{md}"
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");

    // Load it back after clearing.
    tmux.type_text("/clear");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the clear", 10, &log, |s| {
        s.contains("conversation cleared") && !s.contains("Hello there")
    });
    tmux.type_text("/load conversation.json");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the load", 10, &log, |s| {
        s.contains("loaded 2 messages from conversation.json") && s.contains("  Hello there")
    });

    // Quit; the terminal is the shell's again.
    tmux.keys(&["C-d"]);
    let s = assert_restored(&tmux, &log, "0");
    assert!(s.contains("chat ended; peak RSS"), "{s}");

    // Key-to-frame latency while the reply streamed.
    let text = std::fs::read_to_string(&latency).expect("latency log written");
    let mut streaming: Vec<f64> = text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(flag, _)| *flag == "1")
        .filter_map(|(_, us)| us.parse::<f64>().ok())
        .map(|us| us / 1000.0)
        .collect();
    streaming.sort_by(f64::total_cmp);
    assert!(
        streaming.len() >= 20,
        "key presses timed while streaming: {} ({text})",
        streaming.len()
    );
    let (p50, p90, max) = (
        percentile(&streaming, 0.5),
        percentile(&streaming, 0.9),
        percentile(&streaming, 1.0),
    );
    println!(
        "key press → frame while streaming: {} presses, median {p50:.2} ms, p90 {p90:.2} ms, max {max:.2} ms; Esc → [stopped] on screen {stop_ms} ms (tmux polling included)",
        streaming.len()
    );
    assert!(
        p90 <= 50.0,
        "90% of key presses within 50 ms: median {p50:.2}, p90 {p90:.2}, max {max:.2} ms"
    );
}

#[test]
fn sigterm_restores_the_terminal() {
    let Setup {
        _serial,
        model,
        dir,
        log,
        tmux,
    } = Setup::new("sigterm");
    let pid = chat_at_512(&tmux, &model, dir.path(), &log);
    // SAFETY: kill(2) with a pid we just read and a plain signal number.
    let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(rc, 0, "kill -TERM {pid}");
    let s = assert_restored(&tmux, &log, "143");
    assert!(s.contains("chat ended by a signal"), "{s}");
}

#[test]
fn a_full_context_drops_the_oldest_turns() {
    let Setup {
        _serial,
        model,
        dir,
        log,
        tmux,
    } = Setup::new("full");
    // 256 tokens of context, replies of exactly 48 tokens: the fourth or
    // fifth message no longer leaves 48 free.
    launch(
        &tmux,
        dir.path(),
        &model.display().to_string(),
        "-c 256 -n 48 --ignore-eos --seed 3",
        &log,
    );
    tmux.type_text("/system Answer briefly.");
    tmux.keys(&["Enter"]);
    let mut dropped = false;
    for i in 1..=8 {
        let question = format!("Question number {i}, please answer it");
        tmux.type_text(&question);
        tmux.wait_for("the typed question", 10, &log, |s| in_input(s, &question));
        tmux.keys(&["Enter"]);
        // Sent (the input box is empty again), then answered (idle again).
        let s = tmux.wait_for("the reply to finish", 120, &log, |s| {
            !in_input(s, &question) && s.contains("Enter sends")
        });
        assert!(!s.contains("[failed]") && !s.contains("✗"), "{s}");
        let used = ctx_used(&s);
        assert!(used > 0 && used <= 256, "context use {used}:\n{s}");
        // The notice wraps at 80 columns; its first line is enough.
        if s.contains("oldest messages were dropped from the") {
            dropped = true;
            break;
        }
    }
    assert!(dropped, "the context filled and old turns were dropped");
    // Scroll to the top: the first exchange is still shown, marked as dropped.
    // Wait for the marked turn itself: the notice at the bottom says
    // "dropped from the context" too, and is on screen before the scroll
    // is drawn.
    tmux.keys(&["Home"]);
    tmux.wait_for("the first turn, marked as dropped", 10, &log, |s| {
        s.contains("You · dropped from the context")
    });
    tmux.keys(&["C-d"]);
    assert_restored(&tmux, &log, "0");
}

/// The instruct demo model, `chat`'s default, answers a plain question with
/// its own chat template at temperature 0.
#[test]
fn the_instruct_demo_answers_a_question() {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let model = crate::demo::instruct_model();
    let stem = model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .expect("model file name");
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("chat.log");
    let tmux = Tmux::start("question", &[("HEADROOM_CHAT_LOG", &log)]);
    launch(
        &tmux,
        dir.path(),
        &model.display().to_string(),
        "-c 1024 -n 32 --temp 0",
        &log,
    );
    let question = "What is the capital of France?";
    tmux.type_text(question);
    tmux.wait_for("the typed question", 10, &log, |s| in_input(s, question));
    tmux.keys(&["Enter"]);
    let s = tmux.wait_for("the answer", 120, &log, |s| {
        !in_input(s, question) && s.contains("Enter sends") && !reply_lines(s, &stem).is_empty()
    });
    let answer = reply_lines(&s, &stem).join(" ");
    assert!(answer.contains("Paris"), "answer {answer:?}:\n{s}");
    tmux.keys(&["C-d"]);
    assert_restored(&tmux, &log, "0");
}

#[test]
fn a_closed_terminal_ends_the_chat() {
    let Setup {
        _serial,
        model,
        dir,
        log,
        tmux,
    } = Setup::new("hangup");
    let pid = chat_at_512(&tmux, &model, dir.path(), &log);
    // Closing the terminal (the whole tmux server) hangs the chat's tty up.
    drop(tmux);
    let t0 = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() {
        if t0.elapsed() > Duration::from_secs(20) {
            // SAFETY: kill(2) on the pid this test started, so it does not outlive the test.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the chat (pid {pid}) was still running 20 s after its terminal closed");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A chat forced past its memory limit (`ulimit -v`, i.e. `RLIMIT_AS`, 600
/// MiB: too little for the KV cache at -c 32768, 96 MiB; the chat's own
/// threads and screen take more address space than `run`) shows why the load
/// failed, naming the allocation; on leaving it prints the same as one error
/// line, exits 1, and gives the terminal back.
#[test]
fn a_load_that_fails_under_a_memory_limit_gives_the_terminal_back() {
    let Setup {
        _serial,
        model,
        dir,
        log,
        tmux,
    } = Setup::new("limit");
    tmux.wait_for("the shell's prompt", 10, &log, |s| !s.trim().is_empty());
    // The limit in a subshell, so the shell checking the terminal keeps its own;
    // raised by the address space this build's backends take to start (as
    // `hw --json` measures it), so it leaves room for the same things in
    // every build.
    let hw = std::process::Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["hw", "--json"])
        .output()
        .expect("hw runs");
    let hw: serde_json::Value = serde_json::from_slice(&hw.stdout).expect("hw --json");
    let runtime_kib = hw["ram"]["runtime_virtual_bytes"].as_u64().unwrap_or(0) / 1024;
    let cmd = format!(
        "cd {} && (ulimit -v {}; exec {} chat {} -c 32768 --force); echo EXIT=$?",
        dir.path().display(),
        600 * 1024 + runtime_kib,
        env!("CARGO_BIN_EXE_headroom"),
        model.display()
    );
    tmux.type_text(&cmd);
    tmux.keys(&["Enter"]);
    let s = tmux.wait_for("the failed load", 60, &log, |s| {
        s.contains("the model could not be loaded │")
    });
    // The notice wraps at 80 columns: join its rows to read it.
    let joined: String = s.lines().map(str::trim_end).collect();
    assert!(joined.contains("attempted to allocate"), "{s}");
    tmux.keys(&["C-d"]);
    let s = assert_restored(&tmux, &log, "1");
    let printed: String = s.lines().collect();
    let errors = printed.matches("headroom: error:").count();
    assert_eq!(errors, 1, "one error line:\n{s}");
    assert!(printed.contains("attempted to allocate"), "{s}");
}

/// The screen's text without spaces, line breaks and box edges, so that a
/// message wrapped at 80 columns is found whole.
fn squeezed(screen: &str) -> String {
    screen
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '│')
        .collect()
}

/// A GGUF whose chat template loops for ever: the refusal is on the screen
/// within 5 s of starting (the model loads first), as one error line, and
/// the chat exits 1 and gives the terminal back.
#[test]
fn a_gguf_whose_template_never_ends_is_refused() {
    let Setup {
        _serial,
        model,
        dir,
        log,
        tmux,
    } = Setup::new("endless");
    let endless =
        "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}";
    let gguf = dir.path().join("endless.gguf");
    crate::demo::with_chat_template(&model, &gguf, endless);
    let refusal = "the model's chat template did not finish (ran out of fuel after 10000000 steps)";
    tmux.wait_for("the shell's prompt", 10, &log, |s| !s.trim().is_empty());
    tmux.type_text(&format!(
        "cd {} && {} chat {} -c 512; echo EXIT=$?",
        dir.path().display(),
        env!("CARGO_BIN_EXE_headroom"),
        gguf.display()
    ));
    let t0 = Instant::now();
    tmux.keys(&["Enter"]);
    let s = tmux.wait_for("the refusal", 30, &log, |s| {
        squeezed(s).contains(&squeezed(refusal))
    });
    let took = t0.elapsed();
    println!(
        "endless template: refused on screen {:.2} s after Enter (tmux polling included)",
        took.as_secs_f64()
    );
    assert!(took < Duration::from_secs(5), "{took:?}:\n{s}");
    // The chat ends by itself on a failed start; were it to show the
    // failure and wait instead, leaving is Ctrl+D.
    if !s.contains("EXIT=") {
        tmux.keys(&["C-d"]);
    }
    let s = assert_restored(&tmux, &log, "1");
    let printed: String = s.lines().collect();
    assert_eq!(
        printed.matches("headroom: error:").count(),
        1,
        "one error line:\n{s}"
    );
    let error = &printed[printed.find("headroom: error:").unwrap_or(0)..];
    assert!(squeezed(error).contains(&squeezed(refusal)), "{s}");
}

/// A worker lost while the reply streams (`--rpc`, one of two workers
/// killed): llama.cpp aborts inside its RPC client, and the chat ends within
/// 10 s with one error line naming the workers, exit status 1, and the
/// terminal given back to the shell.
#[test]
fn a_worker_lost_mid_reply_ends_the_chat_with_one_line_and_the_terminal_restored() {
    let Setup {
        _serial,
        dir,
        log,
        tmux,
        ..
    } = Setup::new("rpc");
    let model = crate::demo::instruct_model();
    let mut workers = [Worker::start(None), Worker::start(None)];
    let list = format!("{},{}", workers[0].endpoint, workers[1].endpoint);
    launch(
        &tmux,
        dir.path(),
        &model.display().to_string(),
        &format!("-c 1024 --ignore-eos --rpc {list}"),
        &log,
    );
    tmux.type_text("Tell me a long story about the sea.");
    tmux.keys(&["Enter"]);
    tmux.wait_for("a streamed reply", 60, &log, |s| s.contains("tok/s ▸"));
    workers[1].kill();
    let t0 = Instant::now();
    tmux.wait_for("the chat to exit", 10, &log, |s| s.lines().any(exit_line));
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(10), "{took:?}");
    let s = assert_restored(&tmux, &log, "1");
    // The error line, as the terminal wrapped it (80 columns), up to EXIT=.
    let lines: Vec<&str> = s.lines().collect();
    let errors: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("headroom: error:"))
        .collect();
    let [at] = errors.as_slice() else {
        panic!("one error line:\n{s}")
    };
    let line: String = lines[*at..]
        .iter()
        .take_while(|l| !exit_line(l))
        .copied()
        .collect();
    assert!(
        line.contains(&workers[1].endpoint) && line.contains("RPC"),
        "the line names the workers: {line}"
    );
    println!("worker killed → chat exited in {took:?}: {line}");
}
