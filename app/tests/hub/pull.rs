//! `headroom pull` end to end: the real binary against a hub stand-in on
//! 127.0.0.1 (`support/hf_server.rs`) serving the real demo model and small
//! GGUF files, every cache in a temporary folder.
//!
//! Run with `cargo test --release -p headroom --test hub pull::`.

use crate::demo;
use crate::hf_server;
use crate::models;
use crate::sandbox;

use std::fs::File;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom::source::demo::{FILE_NAME, SHA256, SIZE};
use headroom_planner::gguf::GgmlType;
use headroom_planner::synth::{Mix, Shape};
use hf_server::{Body, HfServer, RepoFile};
use sandbox::{Run, Sandbox, files_under};

const REPO: &str = "test-org/gemma-3-270m-GGUF";
const TINY: &str = "test-org/tiny-GGUF";

fn real_repo() -> Vec<RepoFile> {
    vec![
        RepoFile::lfs(FILE_NAME, Body::File(demo::demo_model())).with_sha256(SHA256),
        RepoFile::git("README.md", b"# gemma-3-270m\n"),
    ]
}

/// A repository of two tiny models (Q8_0 and F16), with their bytes.
fn tiny_repo() -> (Vec<RepoFile>, Vec<u8>) {
    let q8 = models::file_bytes(&models::tiny_header(GgmlType::Q8_0), 1);
    let f16 = models::file_bytes(&models::tiny_header(GgmlType::F16), 2);
    let files = vec![
        RepoFile::lfs("tiny-Q8_0.gguf", Body::Bytes(Arc::new(q8.clone()))),
        RepoFile::lfs("tiny-F16.gguf", Body::Bytes(Arc::new(f16))),
        RepoFile::lfs("mmproj-tiny-f16.gguf", Body::Bytes(Arc::new(vec![0; 64]))),
        RepoFile::git("README.md", b"# tiny\n"),
    ];
    (files, q8)
}

/// GET requests for the file's bytes (the CDN), with their `Range`.
fn cdn_gets(server: &HfServer) -> Vec<(Option<String>, u16, u64)> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.target.starts_with("/cdn/"))
        .map(|r| {
            (
                r.header("range").map(str::to_string),
                r.status,
                r.body_bytes,
            )
        })
        .collect()
}

fn sha256_of(path: &Path) -> String {
    headroom::source::demo::sha256_file(path).expect("hash")
}

/// Run with stderr on a pseudo-terminal (so the progress bar is drawn) and
/// stdout on a pipe. `TERM` is set: indicatif draws nothing without one.
fn run_on_tty(sb: &Sandbox, endpoint: &str, args: &[&str]) -> Run {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two descriptors into the given integers; the
    // other arguments may be null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty");
    // SAFETY: both descriptors were just opened and are owned here only.
    let (master, slave) = unsafe { (File::from_raw_fd(master), File::from_raw_fd(slave)) };
    let started = Instant::now();
    let mut cmd = sb.command(endpoint, args, &[("TERM", "xterm")]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::from(slave));
    let mut child = cmd.spawn().expect("spawn headroom");
    drop(cmd); // closes our copy of the terminal's slave side
    let reader = std::thread::spawn(move || {
        let mut master = master;
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        // EIO once every slave descriptor is closed.
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        out
    });
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("piped")
        .read_to_string(&mut stdout)
        .expect("read stdout");
    let status = child.wait().expect("wait");
    let stderr = reader.join().expect("reader");
    Run {
        code: status.code(),
        stdout,
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        took: started.elapsed(),
    }
}

#[test]
fn a_pull_shows_progress_and_writes_the_shared_cache_layout() {
    let server = HfServer::builder()
        .repo(REPO, real_repo())
        .rate_limit(200_000_000)
        .start();
    let sb = Sandbox::new();
    let model = format!("{REPO}:q4_k_m");
    let run = run_on_tty(
        &sb,
        &server.url(),
        &["pull", &model, "--ram", "8GiB", "--vram", "0"],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let repo_dir = sb.repo_dir(REPO);
    let snapshot = repo_dir
        .join("snapshots")
        .join(server.commit())
        .join(FILE_NAME);
    assert_eq!(
        PathBuf::from(run.stdout.trim()),
        snapshot,
        "prints the path"
    );
    let blob = repo_dir.join("blobs").join(SHA256);
    assert_eq!(std::fs::metadata(&blob).map(|m| m.len()).ok(), Some(SIZE));
    let link = std::fs::read_link(&snapshot).expect("the snapshot is a link");
    assert_eq!(
        link,
        PathBuf::from("../../blobs").join(SHA256),
        "relative, as hf-hub writes it"
    );
    assert_eq!(
        std::fs::read_to_string(repo_dir.join("refs/main"))
            .ok()
            .as_deref(),
        Some(server.commit())
    );
    assert_eq!(sha256_of(&snapshot), SHA256);
    assert_eq!(
        files_under(&repo_dir),
        vec![
            format!("blobs/{SHA256}"),
            "refs/main".to_string(),
            format!("snapshots/{}/{FILE_NAME}", server.commit()),
        ],
        "nothing else (no .incomplete left)"
    );
    // The progress bar: redrawn in place, up to 100%, with sizes, a rate and
    // (before the end) the time left.
    let redraws = run.stderr.matches('\r').count();
    assert!(
        redraws >= 5,
        "the bar is redrawn ({redraws}):\n{}",
        run.stderr
    );
    for want in [
        "100%",
        "253.1 MB / 253.1 MB",
        "MB/s",
        " left",
        "█",
        "downloading test-org/gemma-3-270m-GGUF/",
    ] {
        assert!(run.stderr.contains(want), "{want:?} in:\n{}", run.stderr);
    }
    assert!(
        run.stderr.contains("planned from the GGUF header alone"),
        "{}",
        run.stderr
    );

    // A second pull finds it complete: no transfer, same path.
    server.clear_requests();
    let again = sb.run(&server.url(), &["pull", &format!("{REPO}:Q4_K_M")], &[]);
    assert_eq!(again.code, Some(0), "{again:?}");
    assert_eq!(again.stdout.trim(), run.stdout.trim());
    assert!(
        again.stderr.contains("already in the Hugging Face cache"),
        "{}",
        again.stderr
    );
    assert_eq!(server.bytes_served("/cdn/"), 0, "nothing downloaded again");
}

#[test]
fn a_dropped_connection_resumes_with_a_range_request() {
    let cut = 100_000_000;
    let sb = Sandbox::new();
    // Plan it first (as a user would): the header is cached, so the pull's
    // only body is the download, which the second server cuts.
    let first = HfServer::builder().repo(REPO, real_repo()).start();
    let model = format!("{REPO}:Q4_K_M");
    let planned = sb.run(
        &first.url(),
        &["plan", &model, "--ram", "8GiB", "--vram", "0"],
        &[],
    );
    assert_eq!(planned.code, Some(0), "{planned:?}");
    let server = HfServer::builder()
        .repo(REPO, real_repo())
        .cut_after(cut, 1)
        .start();
    let run = sb.run(
        &server.url(),
        &["pull", &format!("{REPO}:Q4_K_M"), "--json"],
        &[],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let gets = cdn_gets(&server);
    assert_eq!(gets.len(), 2, "one cut transfer, one resumed: {gets:?}");
    assert_eq!(gets[0].0, None, "the first asks for the whole file");
    assert_eq!(gets[0].2, cut, "the server cut it");
    let resumed = gets[1].0.clone().expect("the second is a range request");
    assert_eq!(
        resumed,
        format!("bytes={cut}-"),
        "it resumes where the cut was"
    );
    assert_eq!(gets[1].1, 206);
    let served = server.bytes_served("/cdn/");
    assert!(
        (served as f64) < 1.1 * SIZE as f64,
        "served {served} bytes for a {SIZE}-byte file"
    );
    let json = run.json();
    assert_eq!(json["transferred_bytes"], SIZE);
    let path = PathBuf::from(json["path"].as_str().expect("a path"));
    assert_eq!(sha256_of(&path), SHA256, "the resumed file is intact");
    // Stderr is a pipe: no progress bar, only the lines a log can use.
    assert!(
        !run.stderr.contains('\r') && !run.stderr.contains('█'),
        "{}",
        run.stderr
    );
}

#[test]
fn an_interrupted_download_resumes_in_the_next_run() {
    let sb = Sandbox::new();
    let slow = HfServer::builder()
        .repo(REPO, real_repo())
        .rate_limit(40_000_000)
        .start();
    let partial = sb
        .repo_dir(REPO)
        .join("blobs")
        .join(format!("{SHA256}.incomplete"));
    let mut child = sb
        .command(&slow.url(), &["pull", &format!("{REPO}:Q4_K_M")], &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(&partial).map_or(0, |m| m.len()) < 60_000_000 {
        assert!(Instant::now() < deadline, "the download never got going");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("kill"); // as a crash or a closed laptop would
    child.wait().expect("reap");
    let first_served = slow.bytes_served("/cdn/");
    drop(slow);
    let kept = std::fs::metadata(&partial)
        .expect("the partial file stays")
        .len();
    assert!((60_000_000..SIZE).contains(&kept), "{kept}");

    let server = HfServer::builder().repo(REPO, real_repo()).start();
    let run = sb.run(
        &server.url(),
        &["pull", &format!("{REPO}:Q4_K_M"), "--json"],
        &[],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.contains("resuming"), "{}", run.stderr);
    let gets = cdn_gets(&server);
    assert_eq!(gets.len(), 1, "{gets:?}");
    assert_eq!(
        gets[0].0.as_deref(),
        Some(format!("bytes={kept}-").as_str())
    );
    let json = run.json();
    assert_eq!(json["resumed_from_bytes"], kept);
    assert_eq!(json["transferred_bytes"], SIZE - kept);
    let total = first_served + server.bytes_served("/cdn/");
    assert!(
        (total as f64) < 1.1 * SIZE as f64,
        "served {total} bytes over both runs for a {SIZE}-byte file"
    );
    let path = PathBuf::from(json["path"].as_str().expect("a path"));
    assert_eq!(sha256_of(&path), SHA256);
    assert!(!partial.exists());
}

#[test]
fn offline_resolves_from_the_cache_and_fails_clearly_when_absent() {
    let (files, q8) = tiny_repo();
    let server = HfServer::builder().repo(TINY, files).start();
    let sb = Sandbox::new();
    let pulled = sb.run(&server.url(), &["pull", &format!("{TINY}:Q8_0")], &[]);
    assert_eq!(pulled.code, Some(0), "{pulled:?}");
    let path = PathBuf::from(pulled.stdout.trim());
    assert_eq!(std::fs::read(&path).expect("pulled"), q8);

    server.clear_requests();
    let offline = [("HF_HUB_OFFLINE", "1")];
    let again = sb.run(&server.url(), &["pull", &format!("{TINY}:q8_0")], &offline);
    assert_eq!(again.code, Some(0), "{again:?}");
    assert_eq!(PathBuf::from(again.stdout.trim()), path);
    assert!(
        again
            .stderr
            .contains("HF_HUB_OFFLINE is set: using the cache"),
        "{}",
        again.stderr
    );
    // plan and run take the reference too, and find the same file.
    let plan = sb.run(
        &server.url(),
        &["plan", &format!("{TINY}:Q8_0"), "--json"],
        &offline,
    );
    assert_eq!(plan.code, Some(0), "{plan:?}");
    assert_eq!(plan.json()["model"]["path"], path.display().to_string());
    assert!(
        server.requests().is_empty(),
        "offline: {:?}",
        server.requests()
    );

    let missing = sb.run(&server.url(), &["pull", &format!("{TINY}:F16")], &offline);
    assert_eq!(missing.code, Some(1), "{missing:?}");
    let line = missing.error_line();
    assert!(line.contains("HF_HUB_OFFLINE"), "{line}");
    let empty = Sandbox::new();
    let none = empty.run(&server.url(), &["pull", &format!("{TINY}:Q8_0")], &offline);
    assert_eq!(none.code, Some(1), "{none:?}");
    let line = none.error_line();
    assert!(
        line.contains("not in the Hugging Face cache") && line.contains("HF_HUB_OFFLINE"),
        "{line}"
    );
    assert!(
        server.requests().is_empty(),
        "offline: {:?}",
        server.requests()
    );
}

#[test]
fn refusals_say_to_set_hf_token_and_never_print_it() {
    let (files, _) = tiny_repo();
    let server = HfServer::builder()
        .repo(TINY, files.clone())
        .fail(403, "", None)
        .start();
    let sb = Sandbox::new();
    let secret = "hf_do_not_print_0123456789";
    let run = sb.run(
        &server.url(),
        &["pull", &format!("{TINY}:Q8_0")],
        &[("HF_TOKEN", secret)],
    );
    assert_eq!(run.code, Some(1), "{run:?}");
    let line = run.error_line();
    assert!(line.contains("HF_TOKEN") && line.contains("403"), "{line}");
    assert!(!run.stderr.contains(secret) && !run.stdout.contains(secret));
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.header("authorization") == Some(&format!("Bearer {secret}"))),
        "the token is sent"
    );

    let gated = HfServer::builder()
        .repo(TINY, files)
        .require_token("hf_the_right_one")
        .start();
    let run = sb.run(&gated.url(), &["pull", &format!("{TINY}:Q8_0")], &[]);
    assert_eq!(run.code, Some(1), "{run:?}");
    let line = run.error_line();
    assert!(
        line.contains("set HF_TOKEN") && line.contains("401"),
        "{line}"
    );
    let wrong = sb.run(
        &gated.url(),
        &["pull", &format!("{TINY}:Q8_0")],
        &[("HF_TOKEN", secret)],
    );
    let line = wrong.error_line();
    assert!(line.contains("$HF_TOKEN was refused"), "{line}");
    assert!(!wrong.stderr.contains(secret));
    let right = sb.run(
        &gated.url(),
        &["pull", &format!("{TINY}:Q8_0")],
        &[("HF_TOKEN", "hf_the_right_one")],
    );
    assert_eq!(right.code, Some(0), "{right:?}");
}

#[test]
fn without_a_quantization_the_planner_chooses_and_says_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = "test-org/Llama-8B-GGUF";
    let mut files = Vec::new();
    for (i, (mix, q)) in [
        (Mix::Q4KM, "Q4_K_M"),
        (Mix::Q8_0, "Q8_0"),
        (Mix::F16, "F16"),
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("Llama-8B-{q}.gguf");
        let (p, _) = models::sparse(dir.path(), &name, Shape::Llama8B, mix);
        files.push(RepoFile::lfs(&name, Body::File(p)).with_sha256(&models::fake_sha(i as u8)));
    }
    let server = HfServer::builder().repo(repo, files).start();
    let sb = Sandbox::new();
    let pick = |ram: &str| {
        let run = sb.run(
            &server.url(),
            &[
                "pull",
                repo,
                "--dry-run",
                "--json",
                "--ram",
                ram,
                "--vram",
                "0",
            ],
            &[],
        );
        assert_eq!(run.code, Some(0), "{run:?}");
        run.json()
    };
    let small = pick("6GiB");
    assert_eq!(small["quant"], "Q4_K_M", "{small:#}");
    assert_eq!(small["chosen_by_planner"], true);
    assert_eq!(small["downloaded"], false);
    assert_eq!(small["plan"]["verdict"], "fits");
    let why = small["why"].as_str().expect("a reason");
    assert!(why.contains("Q4_K_M"), "{why}");
    let size = small["size_bytes"].as_u64().expect("size");
    let read = small["header_bytes_read"].as_u64().expect("read");
    assert!(
        read > 0 && (read as f64) < 0.05 * size as f64,
        "{read} of {size}"
    );

    let big = pick("64GiB");
    assert_eq!(big["quant"], "F16", "{big:#}");
    assert!(
        big["why"]
            .as_str()
            .is_some_and(|w| w.contains("would take Q4_K_M")),
        "{big:#}"
    );
    for (range, _, _) in cdn_gets(&server) {
        assert!(range.is_some(), "only header ranges were read");
    }
    assert!(
        !sb.repo_dir(repo).join("blobs").exists(),
        "a dry run downloads nothing"
    );

    // Nothing fits: refused (exit 3) without downloading, saying what exists.
    let none = sb.run(
        &server.url(),
        &["pull", repo, "--ram", "1GiB", "--vram", "0"],
        &[],
    );
    assert_eq!(none.code, Some(3), "{none:?}");
    assert!(
        none.stderr
            .contains("nothing in test-org/Llama-8B-GGUF fits"),
        "{}",
        none.stderr
    );
    assert!(none.stderr.contains("Q4_K_M ("), "{}", none.stderr);
}

#[test]
fn free_disk_space_is_checked_before_downloading() {
    let dir = tempfile::tempdir().expect("tempdir");
    let free = {
        let c = std::ffi::CString::new(dir.path().to_str().expect("utf-8")).expect("path");
        let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
        // SAFETY: a valid path and a struct for statvfs to fill.
        assert_eq!(unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) }, 0);
        // SAFETY: statvfs succeeded.
        let st = unsafe { st.assume_init() };
        st.f_bavail * st.f_frsize
    };
    // A valid tiny model followed by a hole twice the free space long.
    let header = models::tiny_header(GgmlType::Q8_0);
    let path = models::write(
        dir.path(),
        "huge-Q8_0.gguf",
        &models::file_bytes(&header, 3),
    );
    File::options()
        .write(true)
        .open(&path)
        .and_then(|f| f.set_len(free * 2 + 1_000_000_000))
        .expect("sparse");
    let server = HfServer::builder()
        .repo(
            TINY,
            vec![
                RepoFile::lfs("huge-Q8_0.gguf", Body::File(path)).with_sha256(&models::fake_sha(9)),
            ],
        )
        .start();
    let sb = Sandbox::new();
    let run = sb.run(&server.url(), &["pull", &format!("{TINY}:Q8_0")], &[]);
    assert_eq!(run.code, Some(1), "{run:?}");
    let line = run.error_line();
    assert!(line.contains("not enough disk space"), "{line}");
    assert!(
        server.bytes_served("/cdn/") < 5_000_000,
        "only the header was read"
    );
    assert!(!sb.repo_dir(TINY).join("blobs").exists());
}

#[test]
fn split_models_are_pulled_whole_and_planned_from_the_first_part() {
    let whole = models::tiny_header(GgmlType::Q8_0);
    let parts = models::split_headers(&whole, 2);
    let files: Vec<RepoFile> = parts
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let name = format!("Q8_0/{}", models::part_name("tiny-Q8_0", i + 1, 2));
            RepoFile::lfs(
                &name,
                Body::Bytes(Arc::new(models::file_bytes(h, 10 + i as u64))),
            )
        })
        .collect();
    let server = HfServer::builder().repo(TINY, files).start();
    let sb = Sandbox::new();
    let run = sb.run(
        &server.url(),
        &["pull", TINY, "--json", "--ram", "4GiB", "--vram", "0"],
        &[],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let json = run.json();
    assert_eq!(json["quant"], "Q8_0");
    assert_eq!(json["files"].as_array().map(Vec::len), Some(2));
    let first = PathBuf::from(json["path"].as_str().expect("path"));
    assert!(
        first.ends_with("Q8_0/tiny-Q8_0-00001-of-00002.gguf"),
        "{first:?}"
    );
    let second = first.with_file_name("tiny-Q8_0-00002-of-00002.gguf");
    assert!(second.is_file(), "both parts are in the snapshot");

    let plan = sb.run(
        &server.url(),
        &["plan", first.to_str().expect("utf-8"), "--json"],
        &[],
    );
    assert_eq!(plan.code, Some(0), "{plan:?}");
    let whole_profile = headroom_planner::profile::profile(&whole).expect("profile");
    assert_eq!(plan.json()["model"]["n_params"], whole_profile.n_params);
}

#[test]
fn a_corrupt_download_is_deleted_and_said_so() {
    let (mut files, _) = tiny_repo();
    files[0] = files[0].clone().with_sha256(&"0".repeat(64));
    let server = HfServer::builder().repo(TINY, files).start();
    let sb = Sandbox::new();
    let run = sb.run(&server.url(), &["pull", &format!("{TINY}:Q8_0")], &[]);
    assert_eq!(run.code, Some(1), "{run:?}");
    let line = run.error_line();
    assert!(
        line.contains("sha256") && line.contains("deleted"),
        "{line}"
    );
    let left = files_under(&sb.repo_dir(TINY));
    assert!(
        left.iter()
            .all(|f| !f.starts_with("blobs/") && !f.starts_with("snapshots/")),
        "{left:?}"
    );
}
