//! What the benchmarks that compare headroom with llama.cpp's own programs
//! share: the environment knobs, the machine's load, and the programs
//! `scripts/llama-tools.sh` builds.

#![allow(dead_code)] // Each benchmark uses a different part of it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, ensure};

/// `HEADROOM_BENCH_STRICT=1`: a MISS fails the benchmark.
pub fn strict() -> bool {
    std::env::var("HEADROOM_BENCH_STRICT").is_ok_and(|v| v == "1")
}

/// A whole number from the environment, if set.
pub fn env_number(name: &str) -> Result<Option<usize>> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .map(Some)
            .with_context(|| format!("{name}: {v:?} is not a number")),
        Err(_) => Ok(None),
    }
}

/// The 1-minute load average, where Linux reports it.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// llama.cpp's programs as `scripts/llama-tools.sh` builds them (or finds
/// them built): the paths it prints, in its order (llama-bench,
/// llama-completion, llama-server, ggml-rpc-server). The `--rpc` tests use
/// it too.
pub fn llama_tools() -> Result<Vec<PathBuf>> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/llama-tools.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    ensure!(
        out.status.success(),
        "{} failed ({})",
        script.display(),
        out.status
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let paths: Vec<PathBuf> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect();
    ensure!(
        paths.len() >= 3,
        "{} printed {} tool paths, not 3: {text:?}",
        script.display(),
        paths.len()
    );
    Ok(paths)
}
