//! The real `headroom` binary with every cache and data directory in a
//! temporary folder, the hub pointed at a test server, and no token, proxy
//! or offline flag inherited from the machine running the tests.

#![allow(dead_code)] // Each test binary uses a different part of it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// Temporary caches for one test.
pub struct Sandbox {
    pub dir: TempDir,
}

/// What a run printed and how it ended.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

impl Run {
    /// The one `headroom: error:` line; fails when there is not exactly one.
    pub fn error_line(&self) -> &str {
        let errors: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| l.starts_with("headroom: error:"))
            .collect();
        assert_eq!(errors.len(), 1, "one error line expected:\n{}", self.stderr);
        errors[0]
    }

    /// stdout as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!("not JSON ({e}):\n{}\nstderr:\n{}", self.stdout, self.stderr)
        })
    }
}

const CLEARED: &[&str] = &[
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HF_TOKEN_PATH",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_HUB_DISABLE_IMPLICIT_TOKEN",
    "HUGGINGFACE_HUB_CACHE",
    "HEADROOM_CATALOG",
    "PIP_FIND_LINKS",
    "PIP_EXTRA_INDEX_URL",
    "RUST_LOG",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

impl Sandbox {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn headroom_cache(&self) -> PathBuf {
        self.dir.path().join("headroom-cache")
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("headroom-data")
    }

    pub fn hub_cache(&self) -> PathBuf {
        self.dir.path().join("hf").join("hub")
    }

    /// `models--org--name` in the hub cache.
    pub fn repo_dir(&self, repo: &str) -> PathBuf {
        self.hub_cache()
            .join(format!("models--{}", repo.replace('/', "--")))
    }

    /// The command, with the sandbox's environment.
    pub fn command(&self, endpoint: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_headroom"));
        cmd.args(args)
            .env("HEADROOM_CACHE_DIR", self.headroom_cache())
            .env("HEADROOM_DATA_DIR", self.data_dir())
            .env("HF_HOME", self.dir.path().join("hf"))
            .env("HF_HUB_CACHE", self.hub_cache())
            .env("HF_ENDPOINT", endpoint)
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("no_proxy", "127.0.0.1,localhost")
            .stdin(Stdio::null());
        for var in CLEARED {
            cmd.env_remove(var);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Run `headroom ARGS` to the end.
    pub fn run(&self, endpoint: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
        let started = Instant::now();
        let out = self
            .command(endpoint, args, env)
            .output()
            .expect("run headroom");
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            took: started.elapsed(),
        }
    }
}

/// Every file under `dir` (not following links), relative to it.
pub fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(dir) {
                out.push(rel.display().to_string());
            }
        }
    }
    out.sort();
    out
}
