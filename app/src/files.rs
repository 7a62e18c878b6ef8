//! How headroom reads and writes its own and other people's files.
//!
//! - Replaced whole or not at all ([`write`], [`update`]): conversations, the
//!   calibration log, cache markers and refs are written to a temporary file
//!   beside the target, synced, then renamed over it. A full disk, a
//!   file-size limit or a crash leaves the old file as it was (and no
//!   temporary file behind, save after a crash), never a truncated one.
//! - Never through a planted symlink ([`open_no_follow`]).
//! - Read with a size cap ([`read_text`]): a catalog, a saved chat or a
//!   template from somewhere else cannot make headroom allocate without bound.
//!
//! Hand-written rather than `tempfile::NamedTempFile::persist`: that creates
//! its files with mode 0600, so every saved conversation would silently lose
//! the permissions the user's umask gives a new file.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};

/// Tells apart the temporary files of threads in one process.
static SEQ: AtomicU64 = AtomicU64::new(0);

/// The directory `path` is in (`.` for a bare file name).
fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Replace `path` with `bytes`: a synced temporary file beside it, then a
/// rename. On any error the temporary file is removed and `path` is as it
/// was; a symlink at `path` is replaced, never written through.
///
/// # Errors
/// The directory is not writable, the disk is full, a size limit is hit.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path
        .file_name()
        .with_context(|| format!("{}: not a file name", path.display()))?;
    let tmp = dir_of(path).join(format!(
        ".{}.tmp-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| -> std::io::Result<()> {
        // create_new: never follow a link or reuse a file someone left there.
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        anyhow::Error::new(e).context(format!("writing {}", path.display()))
    })
}

/// The text of a file read whole, refused (before anything is allocated
/// for it) when it holds more than `cap` bytes: `what` names it in the
/// error, as "FILE: 70 MiB is too large for a saved chat (at most 64 MiB)".
///
/// # Errors
/// The file cannot be opened or read, is over `cap`, or is not UTF-8.
pub fn read_text(path: &Path, cap: u64, what: &str) -> Result<String> {
    use std::io::Read as _;
    // The caller says what the file is ("reading chat template: PATH: …").
    let file = File::open(path).with_context(|| path.display().to_string())?;
    let too_large = |n: u64| {
        anyhow::anyhow!(
            "{}: {} is too large for {what} (at most {})",
            path.display(),
            mib(n),
            mib(cap)
        )
    };
    if let Ok(m) = file.metadata()
        && m.is_file()
        && m.len() > cap
    {
        return Err(too_large(m.len()));
    }
    // Pipes and /proc files report no size: read one byte past the cap at most.
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .with_context(|| path.display().to_string())?;
    if bytes.len() as u64 > cap {
        return Err(anyhow::anyhow!(
            "{}: more than {} is too large for {what}",
            path.display(),
            mib(cap)
        ));
    }
    String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("{}: not UTF-8 text", path.display()))
}

fn mib(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / f64::from(1 << 20))
    } else {
        format!("{n} bytes")
    }
}

/// Open `path` with `options` (which must create it when absent), never
/// through a symlink: a link found there (planted in a shared cache, say) is
/// removed and a file of our own created in its place, so whatever it
/// pointed at is neither truncated nor appended to.
///
/// # Errors
/// As [`OpenOptions::open`]; the link cannot be removed.
pub fn open_no_follow(path: &Path, options: &OpenOptions) -> std::io::Result<File> {
    let mut options = options.clone();
    options.custom_flags(libc::O_NOFOLLOW);
    match options.open(path) {
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            fs::remove_file(path)?;
            options.open(path)
        }
        other => other,
    }
}

/// A lock file at `path`, created if absent, never truncated, never
/// followed ([`open_no_follow`]).
///
/// # Errors
/// As [`open_no_follow`].
pub fn open_lock_file(path: &Path) -> std::io::Result<File> {
    open_no_follow(
        path,
        File::options().create(true).truncate(false).write(true),
    )
}

/// Read `path` (None when absent), let `edit` make the new contents, and
/// [`write`] them, all under an exclusive lock on `PATH.lock`, so that two
/// processes updating the same file (two runs appending to the calibration
/// log) never lose each other's change.
///
/// # Errors
/// The lock file cannot be created or locked; reading or [`write`] fails;
/// `edit` fails.
pub fn update(path: &Path, edit: impl FnOnce(Option<Vec<u8>>) -> Result<Vec<u8>>) -> Result<()> {
    let mut lock_name = path.as_os_str().to_owned();
    lock_name.push(".lock");
    let lock_path = PathBuf::from(lock_name);
    let lock =
        open_lock_file(&lock_path).with_context(|| format!("opening {}", lock_path.display()))?;
    // std's File::lock is flock(2) on Unix, as hf-hub and Python's filelock.
    lock.lock()
        .with_context(|| format!("locking {}", lock_path.display()))?;
    let old = match fs::read(path) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(anyhow::Error::new(e).context(format!("reading {}", path.display()))),
    };
    let new = edit(old)?;
    write(path, &new)
    // The lock is released when `lock` is closed.
}

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

/// headroom's data directory (the calibration log, verified catalog facts):
/// `$HEADROOM_DATA_DIR`, else the XDG data directory.
///
/// # Errors
/// No home directory and no `HEADROOM_DATA_DIR`.
pub fn data_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("HEADROOM_DATA_DIR") {
        return Ok(PathBuf::from(dir));
    }
    directories::ProjectDirs::from("", "", "headroom")
        .map(|d| d.data_dir().to_path_buf())
        .context("no home directory for headroom's data (set HEADROOM_DATA_DIR)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = dir.path().join("a.json");
        write(&p, b"first").expect("write");
        write(&p, b"second, longer").expect("rewrite");
        assert_eq!(fs::read(&p).expect("read"), b"second, longer");
        let names: Vec<_> = fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("a.json")]);
    }

    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = dir.path().join("keep.md");
        write(&p, b"precious").expect("write");
        // The target is a directory: the rename fails after the temp file was written.
        let d = dir.path().join("sub");
        fs::create_dir(&d).expect("mkdir");
        fs::write(d.join("x"), b"x").expect("fill");
        assert!(write(&d, b"nope").is_err());
        assert_eq!(fs::read(&p).expect("read"), b"precious");
        let stray: Vec<_> = fs::read_dir(dir.path())
            .expect("list")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
            .collect();
        assert!(stray.is_empty(), "temporary files left: {stray:?}");
    }

    #[test]
    fn a_symlink_is_replaced_not_written_through() {
        let dir = tempfile::tempdir().expect("temp dir");
        let outside = dir.path().join("outside.txt");
        fs::write(&outside, b"not yours").expect("write");
        let link = dir.path().join("conversation.md");
        std::os::unix::fs::symlink(&outside, &link).expect("symlink");
        write(&link, b"saved").expect("write");
        assert_eq!(fs::read(&outside).expect("read"), b"not yours");
        assert!(!fs::symlink_metadata(&link).expect("stat").is_symlink());
        assert_eq!(fs::read(&link).expect("read"), b"saved");
    }

    #[test]
    fn reads_are_capped_before_allocating() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = dir.path().join("big.json");
        fs::write(&p, vec![b'x'; 4097]).expect("write");
        let e = read_text(&p, 4096, "a saved chat").expect_err("over the cap");
        let msg = format!("{e:#}");
        assert!(
            msg.contains("4097 bytes is too large for a saved chat (at most 4096 bytes)"),
            "{msg}"
        );
        assert_eq!(read_text(&p, 4097, "x").expect("at the cap").len(), 4097);
        // No size to go by (a FIFO-like source): the take() bound still holds.
        let e = read_text(Path::new("/dev/zero"), 1024, "a catalog").expect_err("endless");
        assert!(
            format!("{e:#}").contains("too large for a catalog"),
            "{e:#}"
        );
        fs::write(&p, [0xffu8, 0xfe]).expect("write");
        assert!(format!("{:#}", read_text(&p, 10, "x").expect_err("binary")).contains("not UTF-8"));
    }

    #[test]
    fn concurrent_updates_lose_nothing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = dir.path().join("log.jsonl");
        std::thread::scope(|s| {
            for t in 0..4 {
                let p = &p;
                s.spawn(move || {
                    for i in 0..25 {
                        update(p, |old| {
                            let mut b = old.unwrap_or_default();
                            b.extend_from_slice(format!("{t}-{i}\n").as_bytes());
                            Ok(b)
                        })
                        .expect("update");
                    }
                });
            }
        });
        let text = fs::read_to_string(&p).expect("read");
        assert_eq!(text.lines().count(), 100, "{text}");
    }
}
