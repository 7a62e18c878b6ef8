//! Names from the hub, the catalog and the command line never lead outside
//! the cache (issue #6): `..`, absolute paths, a hostile commit id, and
//! symlinks planted in a shared cache. And a write that fails (here: a
//! file-size limit) never truncates the file it was replacing.
//!
//! The real binary runs against a hub stand-in on 127.0.0.1 with every cache
//! in a temporary folder; after each hostile case the test checks which
//! files exist, inside the sandbox and at the places the names point to.
//!
//! Run with `cargo test --release -p headroom --test hub paths:: -- --nocapture`.

use crate::demo;
use crate::hf_server;
use crate::models;
use crate::sandbox;

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use headroom_planner::gguf::GgmlType;
use hf_server::{Body, HfServer, RepoFile};
use sandbox::{Run, Sandbox, files_under};
use sha2::{Digest, Sha256};

const TINY: &str = "test-org/tiny-GGUF";

fn tiny_q8() -> Vec<u8> {
    models::file_bytes(&models::tiny_header(GgmlType::Q8_0), 1)
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A place outside the sandbox a hostile name aims at, unique to this run.
fn target_outside(label: &str) -> PathBuf {
    std::env::temp_dir().join(format!("headroom-escape-{}-{label}", std::process::id()))
}

/// A relative name that climbs from any cache folder (24 times `..`) to
/// the absolute `target`.
fn climbing_to(target: &Path) -> String {
    let rel = target.display().to_string();
    format!("{}{}", "../".repeat(24), rel.trim_start_matches('/'))
}

/// The tiny model as the one file of a repository.
fn tiny_repo() -> Vec<RepoFile> {
    vec![RepoFile::lfs(
        "tiny-Q8_0.gguf",
        Body::Bytes(Arc::new(tiny_q8())),
    )]
}

/// Fails unless `run` ended with exit `code` and one `headroom: error:` line
/// holding every piece of `words`.
fn assert_refused(run: &Run, code: i32, words: &[&str], what: &str) {
    assert_eq!(run.code, Some(code), "{what}: {run:?}");
    let line = run.error_line();
    for w in words {
        assert!(line.contains(w), "{what}: {w:?} not in {line:?}");
    }
    println!("{what}: {line}");
}

/// Every file in the sandbox must be in the hub cache or headroom's cache
/// (or be one the test put there itself).
fn assert_contained(sb: &Sandbox, own: &[&Path], what: &str) {
    for rel in files_under(sb.dir.path()) {
        let p = sb.dir.path().join(&rel);
        let inside = p.starts_with(sb.hub_cache())
            || p.starts_with(sb.headroom_cache())
            || p.starts_with(sb.data_dir())
            || own.iter().any(|o| p == *o);
        assert!(inside, "{what}: {rel} was written outside the caches");
    }
}

#[test]
fn hostile_file_names_from_the_hub_are_refused() {
    let sb = Sandbox::new();
    let q8 = Arc::new(tiny_q8());
    let abs = target_outside("abs-Q8_0.gguf");
    let up = target_outside("up-Q4_K_M.gguf");
    let names = [
        // Climbs out of snapshots/<commit>/ to /tmp.
        ("Q4_K_M", climbing_to(&up)),
        // Absolute.
        ("Q8_0", abs.display().to_string()),
        // Down, then up and out.
        ("F16", "sub/../../../../escape-F16.gguf".to_string()),
    ];
    let repo = "test-org/evil-GGUF";
    let files = names
        .iter()
        .map(|(_, n)| RepoFile::lfs(n, Body::Bytes(q8.clone())))
        .chain([RepoFile::git("README.md", b"# evil\n")])
        .collect();
    let server = HfServer::builder().repo(repo, files).start();
    for (quant, name) in &names {
        for cmd in ["pull", "plan"] {
            let run = sb.run(&server.url(), &[cmd, &format!("{repo}:{quant}")], &[]);
            assert_eq!(run.code, Some(1), "{cmd} {quant} ({name}): {run:?}");
            println!("{cmd} {quant}: {}", run.error_line());
        }
    }
    assert!(!abs.exists() && !up.exists(), "a file was written outside");
    let escaped = sb.hub_cache().join("escape-F16.gguf");
    assert!(!escaped.exists() && !sb.dir.path().join("hf/escape-F16.gguf").exists());
    assert_contained(&sb, &[], "hostile names");
    // Nothing of the hostile files was fetched: the names were refused first.
    let fetched = server
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.target.starts_with("/cdn/"))
        .count();
    assert_eq!(fetched, 0, "{:?}", server.requests());
}

#[test]
fn a_hostile_commit_id_is_refused() {
    let sb = Sandbox::new();
    let out = target_outside("commit");
    let commit = climbing_to(&out);
    let server = HfServer::builder()
        .repo(TINY, tiny_repo())
        .commit(&commit)
        .start();
    for cmd in ["pull", "plan"] {
        let run = sb.run(&server.url(), &[cmd, &format!("{TINY}:Q8_0")], &[]);
        assert_eq!(run.code, Some(1), "{cmd}: {run:?}");
        println!("{cmd} at a hostile commit: {}", run.error_line());
    }
    assert!(!out.exists(), "{} was created", out.display());
    assert_contained(&sb, &[], "hostile commit");
}

#[test]
fn names_from_the_command_line_and_the_catalog_stay_inside() {
    let sb = Sandbox::new();
    let server = HfServer::builder().repo(TINY, tiny_repo()).start();
    let url = server.url();
    for bad in [
        "../../tmp:Q4_K_M",
        "org/..:Q4_K_M",
        "test-org/tiny-GGUF:../../x",
        "test-org/tiny-GGUF:/etc/passwd",
    ] {
        let run = sb.run(&url, &["pull", bad], &[]);
        assert!(matches!(run.code, Some(1 | 2)), "{bad}: {run:?}");
        println!("pull {bad}: {}", run.error_line());
    }

    // A catalog naming files outside its repository.
    let out = target_outside("catalog-Q4_K_M.gguf");
    let catalog = sb.dir.path().join("catalog.toml");
    for (i, file) in [climbing_to(&out), out.display().to_string()]
        .iter()
        .enumerate()
    {
        let text = format!(
            "[[model]]\nid = \"evil\"\nname = \"Evil\"\nfamily = \"Evil\"\nparams_b = 0.1\n\
             license = \"mit\"\nuse = [\"small\"]\nrepo = \"{TINY}\"\nsources = [\"test\"]\n\n\
             [model.arch]\narchitecture = \"llama\"\nblock_count = 2\n\n\
             [[model.quant]]\nname = \"Q4_K_M\"\nfile = \"{file}\"\nbytes = 1000\n"
        );
        std::fs::write(&catalog, text).expect("write catalog");
        let cat = catalog.to_str().expect("UTF-8 path");
        for args in [
            &["pull", "evil:Q4_K_M"][..],
            &["fit"],
            &["plan", "evil:Q4_K_M"],
        ] {
            let run = sb.run(&url, args, &[("HEADROOM_CATALOG", cat)]);
            // A bad catalog file is an error of that file (1) whichever command reads it.
            assert_refused(
                &run,
                1,
                &["catalog.toml"],
                &format!("catalog {i}: {args:?}"),
            );
        }
    }
    assert!(!out.exists());
    assert_contained(&sb, &[&catalog], "command line and catalog");
}

#[test]
fn symlinks_planted_in_a_shared_cache_are_never_written_through() {
    let sb = Sandbox::new();
    let bytes = tiny_q8();
    let etag = sha256_hex(&bytes);
    let server = HfServer::builder()
        .repo(
            TINY,
            vec![
                RepoFile::lfs("tiny-Q8_0.gguf", Body::Bytes(Arc::new(bytes.clone())))
                    .with_sha256(&etag),
            ],
        )
        .start();
    // Someone else's files, and links to them where headroom writes.
    let victims = sb.dir.path().join("victims");
    std::fs::create_dir_all(&victims).expect("mkdir");
    let precious = victims.join("precious.txt");
    let same_size = victims.join("same-size.bin");
    let lock_victim = victims.join("lock-victim.txt");
    std::fs::write(&precious, b"precious: must stay").expect("write");
    std::fs::write(&same_size, vec![7u8; bytes.len()]).expect("write");
    std::fs::write(&lock_victim, b"also precious").expect("write");
    let repo = sb.repo_dir(TINY);
    let blobs = repo.join("blobs");
    let locks = sb
        .hub_cache()
        .join(".locks")
        .join("models--test-org--tiny-GGUF");
    std::fs::create_dir_all(&blobs).expect("mkdir");
    std::fs::create_dir_all(&locks).expect("mkdir");
    let link = |target: &Path, at: PathBuf| {
        std::os::unix::fs::symlink(target, &at)
            .unwrap_or_else(|e| panic!("symlink {}: {e}", at.display()));
    };
    // A "finished" blob that is a link to a file of the right size,
    link(&same_size, blobs.join(&etag));
    // a partial download that is a link (resuming would append to it),
    link(&precious, blobs.join(format!("{etag}.incomplete")));
    // and a lock file that is a link (creating it would truncate it).
    link(&lock_victim, locks.join(format!("{etag}.lock")));

    let run = sb.run(&server.url(), &["pull", &format!("{TINY}:Q8_0")], &[]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(
        std::fs::read(&precious).expect("read"),
        b"precious: must stay"
    );
    assert_eq!(
        std::fs::read(&same_size).expect("read"),
        vec![7u8; bytes.len()]
    );
    assert_eq!(std::fs::read(&lock_victim).expect("read"), b"also precious");
    // The model is the hub's, in a regular blob inside the cache.
    let blob = blobs.join(&etag);
    assert!(std::fs::symlink_metadata(&blob).expect("blob").is_file());
    let path = PathBuf::from(run.stdout.trim());
    let resolved = std::fs::canonicalize(&path).expect("the pulled path resolves");
    assert!(
        resolved.starts_with(std::fs::canonicalize(&repo).expect("repo dir")),
        "{} resolves to {}",
        path.display(),
        resolved.display()
    );
    assert_eq!(std::fs::read(&resolved).expect("read"), bytes);
}

/// `headroom ARGS` with a file-size limit (`RLIMIT_FSIZE`) and `SIGXFSZ`
/// ignored, so a write past the limit fails with `EFBIG` like a full disk.
fn run_with_fsize_limit(sb: &Sandbox, args: &[&str], limit: u64) -> Run {
    let mut cmd = sb.command("http://127.0.0.1:1", args, &[("HF_HUB_OFFLINE", "1")]);
    // SAFETY: signal(2) and setrlimit(2) are async-signal-safe; nothing else
    // runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let started = std::time::Instant::now();
    let out = cmd.output().expect("run headroom");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        took: started.elapsed(),
    }
}

#[test]
fn a_failed_write_never_truncates_the_calibration_log() {
    let sb = Sandbox::new();
    let model = demo::demo_model();
    let model = model.to_str().expect("UTF-8 path");
    let args = ["run", model, "-p", "Hi", "-n", "2", "-c", "256"];
    let first = sb.run("http://127.0.0.1:1", &args, &[]);
    assert_eq!(first.code, Some(0), "{first:?}");
    let log = sb.data_dir().join("calibration.jsonl");
    let line = std::fs::read_to_string(&log).expect("the first run wrote the log");
    // A long history: 200 entries, far over the limit set below.
    let history = line.repeat(200);
    std::fs::write(&log, &history).expect("write history");
    let limit = 4096;
    assert!(history.len() as u64 > 4 * limit);

    let run = run_with_fsize_limit(&sb, &args, limit);
    assert_eq!(run.code, Some(0), "the answer still comes: {run:?}");
    assert!(
        run.stderr
            .lines()
            .any(|l| l.starts_with("headroom: warning: calibration log not written")),
        "the failure is reported: {}",
        run.stderr
    );
    assert_eq!(
        std::fs::read_to_string(&log).expect("read"),
        history,
        "the log is exactly as it was"
    );
    let stray: Vec<String> = files_under(&sb.data_dir())
        .into_iter()
        .filter(|f| f.contains(".tmp-"))
        .collect();
    assert!(stray.is_empty(), "temporary files left: {stray:?}");
    println!(
        "with RLIMIT_FSIZE={limit}: {}",
        run.stderr
            .lines()
            .find(|l| l.contains("calibration"))
            .unwrap_or("")
    );
}
