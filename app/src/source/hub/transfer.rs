//! One file into the cache, resumably: bytes are appended to
//! `blobs/<etag>.incomplete` as they arrive, so an interrupted download (a
//! dropped connection, Ctrl-C, a crash) continues from where it stopped with
//! `Range: bytes=N-`, in this run or the next. The finished file is checked
//! (its size, and its sha256 when the hub gave one) before it is renamed to
//! its blob name and linked from the snapshot.
//!
//! Within one run a transfer that fails is retried from the current length
//! at once while each attempt makes progress, and up to [`STALLED_TRIES`]
//! times with a growing pause when attempts stop making progress.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use super::cache::RepoCache;
use super::progress::Progress;
use crate::source::hub::FetchError;
use crate::source::hub::Hub;

/// Attempts in a row without progress before giving up.
pub const STALLED_TRIES: u32 = 3;

/// A file to fetch.
#[derive(Debug, Clone)]
pub struct Job<'a> {
    /// `org/name`.
    pub repo: &'a str,
    /// The commit to fetch it at.
    pub commit: &'a str,
    /// Its path in the repository.
    pub path: &'a str,
    /// Its exact size.
    pub size: u64,
    /// Its blob name (the LFS sha256, or the git object id).
    pub etag: &'a str,
    /// The sha256 to check, when known.
    pub sha256: Option<&'a str>,
}

/// What fetching a file did.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The snapshot path (a link to the blob).
    pub path: PathBuf,
    /// Bytes transferred by this run.
    pub transferred: u64,
    /// Bytes that were already on disk from an earlier, interrupted run.
    pub resumed_from: u64,
    /// The blob was already complete: nothing was transferred.
    pub cached: bool,
}

/// Whether `blob` is a finished download: a regular file of the announced
/// size. A symlink there (planted in a shared cache) is not taken for one, so
/// nothing outside the cache is ever linked to or loaded as the model.
fn is_blob(blob: &Path, size: u64) -> bool {
    fs::symlink_metadata(blob).is_ok_and(|m| m.is_file() && m.len() == size)
}

/// Open (or create) the partial download for appending, never through a
/// symlink: a link planted at `<etag>.incomplete` would otherwise have the
/// download appended to (or truncated into) whatever file it points at. A
/// link found there is removed and the download starts afresh.
fn open_partial(partial: &Path) -> Result<File> {
    crate::files::open_no_follow(
        partial,
        OpenOptions::new().create(true).read(true).append(true),
    )
    .with_context(|| format!("opening {}", partial.display()))
}

/// Fetch `job` into `cache` (or find it complete there).
///
/// # Errors
/// The hub refuses or keeps failing (the partial file stays for the next
/// run), the disk fails, or the finished file is not what the hub announced
/// (then it is deleted).
pub fn fetch(hub: &Hub, cache: &RepoCache, job: &Job<'_>) -> Result<Fetched> {
    let blob = cache.blob(job.etag);
    if is_blob(&blob, job.size) {
        let path = cache.link(job.commit, job.path, job.etag)?;
        return Ok(Fetched {
            path,
            transferred: 0,
            resumed_from: 0,
            cached: true,
        });
    }
    let _lock = cache.lock(job.etag)?;
    // Another process may have finished it while we waited for the lock.
    if is_blob(&blob, job.size) {
        let path = cache.link(job.commit, job.path, job.etag)?;
        return Ok(Fetched {
            path,
            transferred: 0,
            resumed_from: 0,
            cached: true,
        });
    }
    let partial = cache.incomplete(job.etag);
    if let Some(dir) = partial.parent() {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut file = open_partial(&partial)?;
    let mut have = file
        .metadata()
        .with_context(|| format!("reading {}", partial.display()))?
        .len();
    if have > job.size {
        file.set_len(0)
            .with_context(|| format!("truncating {}", partial.display()))?;
        have = 0;
    }
    let resumed_from = have;
    let mut hasher = job.sha256.map(|_| Sha256::new());
    if let Some(h) = hasher.as_mut()
        && have > 0
    {
        hash_prefix(&mut file, have, h)
            .with_context(|| format!("reading {}", partial.display()))?;
    }
    let label = job.path.rsplit('/').next().unwrap_or(job.path);
    let bar = Progress::download(label, job.size, resumed_from);
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut failures = 0u32;
    let mut last_error: Option<FetchError>;
    while have < job.size {
        let before = have;
        match transfer(hub, job, &mut out, &mut have, hasher.as_mut(), &bar) {
            Ok(()) if have >= job.size => break,
            Ok(()) => {
                last_error = Some(FetchError::Other(format!(
                    "the connection closed at byte {have} of {}",
                    job.size
                )));
            }
            Err(Failure::Fatal(e)) => {
                bar.finish();
                let _ = out.flush();
                return Err(e);
            }
            Err(Failure::Retry(e)) => last_error = Some(e),
        }
        out.flush()
            .with_context(|| format!("writing {}", partial.display()))?;
        if have > before {
            failures = 0;
            continue;
        }
        failures += 1;
        if failures >= STALLED_TRIES {
            bar.finish();
            let why = last_error.map_or_else(String::new, |e| format!(": {e}"));
            bail!(
                "the download of {} stopped at {} of {} bytes{why}; run the same command again to resume it",
                job.path,
                have,
                job.size
            );
        }
        std::thread::sleep(Duration::from_secs(1 << failures));
    }
    bar.update(have);
    bar.finish();
    let file = out
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("writing {}", partial.display()))?;
    file.sync_all()
        .with_context(|| format!("syncing {}", partial.display()))?;
    drop(file);
    if have != job.size {
        let _ = fs::remove_file(&partial);
        bail!(
            "{}: received {have} bytes but the hub announced {}; the partial file was deleted",
            job.path,
            job.size
        );
    }
    if let (Some(h), Some(want)) = (hasher, job.sha256) {
        let got = hex(&h.finalize());
        if !got.eq_ignore_ascii_case(want) {
            let _ = fs::remove_file(&partial);
            bail!(
                "{}: the downloaded file has sha256 {got} but the hub announced {want}; it was deleted",
                job.path
            );
        }
    }
    fs::rename(&partial, &blob)
        .with_context(|| format!("renaming {} to {}", partial.display(), blob.display()))?;
    let path = cache.link(job.commit, job.path, job.etag)?;
    Ok(Fetched {
        path,
        transferred: job.size - resumed_from,
        resumed_from,
        cached: false,
    })
}

/// Why one attempt ended early.
enum Failure {
    /// Worth another attempt from the current length.
    Retry(FetchError),
    /// Not: a refusal, a changed file, a disk error.
    Fatal(anyhow::Error),
}

/// One request: from `have` to the end, appended to `out`.
fn transfer(
    hub: &Hub,
    job: &Job<'_>,
    out: &mut BufWriter<File>,
    have: &mut u64,
    mut hasher: Option<&mut Sha256>,
    bar: &Progress,
) -> Result<(), Failure> {
    let mut body = match hub.open(job.repo, job.commit, job.path, *have, None) {
        Ok(b) => b,
        Err(
            e
            @ (FetchError::Unreachable { .. } | FetchError::Stalled { .. } | FetchError::Other(_)),
        ) => {
            return Err(Failure::Retry(e));
        }
        Err(e) => return Err(Failure::Fatal(e.into())),
    };
    if let Some(total) = body.total
        && total != job.size
    {
        return Err(Failure::Fatal(anyhow::anyhow!(
            "{}: the hub now serves {total} bytes, not the {} it announced; run the command again",
            job.path,
            job.size
        )));
    }
    if body.start != *have {
        // The server ignored the range: start over from its first byte.
        if body.start != 0 {
            return Err(Failure::Fatal(anyhow::anyhow!(
                "{}: asked for byte {have} but the hub sent from byte {}",
                job.path,
                body.start
            )));
        }
        out.flush()
            .and_then(|()| out.get_mut().set_len(0))
            .map_err(|e| {
                Failure::Fatal(anyhow::Error::new(e).context("truncating the partial file"))
            })?;
        *have = 0;
        if let Some(h) = hasher.as_deref_mut() {
            *h = Sha256::new();
        }
    }
    loop {
        let chunk = match body.next_chunk() {
            Ok(Some(c)) => c,
            Ok(None) => return Ok(()),
            Err(e) => return Err(Failure::Retry(e)),
        };
        let room = usize::try_from(job.size - *have).unwrap_or(usize::MAX);
        if chunk.len() > room {
            return Err(Failure::Fatal(anyhow::anyhow!(
                "{}: the hub sent more than the {} bytes it announced",
                job.path,
                job.size
            )));
        }
        out.write_all(&chunk).map_err(|e| {
            Failure::Fatal(anyhow::Error::new(e).context("writing the partial file"))
        })?;
        if let Some(h) = hasher.as_deref_mut() {
            h.update(&chunk);
        }
        *have += chunk.len() as u64;
        bar.update(*have);
    }
}

/// Hash the first `len` bytes of `file`.
fn hash_prefix(file: &mut File, len: u64, hasher: &mut Sha256) -> std::io::Result<()> {
    file.rewind()?;
    let mut taken = file.take(len);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = taken.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        hasher.update(&buf[..n]);
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
