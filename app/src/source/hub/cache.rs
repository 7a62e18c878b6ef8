//! The Hugging Face cache layout, written and read by hand: the same files
//! `hf-hub`, the Python client and llama.cpp write, so a model pulled by one
//! is found by the others.
//!
//! ```text
//! <cache>/models--org--name/blobs/<etag>             the file (sha256 for LFS files)
//! <cache>/models--org--name/blobs/<etag>.incomplete  a download in progress (resumable)
//! <cache>/models--org--name/snapshots/<commit>/<path> -> ../../blobs/<etag>
//! <cache>/models--org--name/refs/main                 the commit main was at
//! <cache>/.locks/models--org--name/<etag>.lock        held while writing the blob
//! ```

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::source::hub::{HubEnv, repo_folder};
use crate::source::modelref;

/// One repository's folder in the cache.
#[derive(Debug, Clone)]
pub struct RepoCache {
    cache_dir: PathBuf,
    repo: String,
    root: PathBuf,
}

impl RepoCache {
    /// The folder of `repo` in `env`'s cache.
    #[must_use]
    pub fn new(env: &HubEnv, repo: &str) -> Self {
        Self::at(&env.cache_dir, repo)
    }

    /// The folder of `repo` in the cache at `cache_dir`.
    #[must_use]
    pub fn at(cache_dir: &Path, repo: &str) -> Self {
        Self {
            cache_dir: cache_dir.to_path_buf(),
            repo: repo.to_string(),
            root: cache_dir.join(repo_folder(repo)),
        }
    }

    /// `models--org--name`.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the blob named `etag` lives.
    #[must_use]
    pub fn blob(&self, etag: &str) -> PathBuf {
        self.root.join("blobs").join(etag)
    }

    /// Where its download in progress lives.
    #[must_use]
    pub fn incomplete(&self, etag: &str) -> PathBuf {
        self.root.join("blobs").join(format!("{etag}.incomplete"))
    }

    /// The snapshot path of `file` at `commit`.
    #[must_use]
    pub fn snapshot(&self, commit: &str, file: &str) -> PathBuf {
        self.root.join("snapshots").join(commit).join(file)
    }

    /// Point `snapshots/<commit>/<file>` at the blob `etag` with a relative
    /// link, as the other clients do; returns the snapshot path.
    ///
    /// # Errors
    /// An unsafe name, or a link that cannot be made.
    pub fn link(&self, commit: &str, file: &str, etag: &str) -> Result<PathBuf> {
        check_name(commit)?;
        check_name(etag)?;
        check_rel_path(file)?;
        let pointer = self.snapshot(commit, file);
        let dir = pointer.parent().context("snapshot path has no folder")?;
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        // snapshots/<commit>/<dirs…>/<file> → up one per folder, then blobs/<etag>.
        let depth = 2 + file.matches('/').count();
        let mut target = PathBuf::new();
        for _ in 0..depth {
            target.push("..");
        }
        target.push("blobs");
        target.push(etag);
        match fs::symlink_metadata(&pointer) {
            Ok(_) => fs::remove_file(&pointer)
                .with_context(|| format!("replacing {}", pointer.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("reading {}", pointer.display())),
        }
        std::os::unix::fs::symlink(&target, &pointer)
            .with_context(|| format!("linking {} to {}", pointer.display(), target.display()))?;
        Ok(pointer)
    }

    /// Record that `revision` is at `commit` (`refs/<revision>`).
    ///
    /// # Errors
    /// An unsafe name, or the file cannot be written.
    pub fn write_ref(&self, revision: &str, commit: &str) -> Result<()> {
        check_name(revision)?;
        check_name(commit)?;
        let dir = self.root.join("refs");
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        crate::files::write(&dir.join(revision), commit.as_bytes())
    }

    /// The commit `refs/<revision>` names.
    #[must_use]
    pub fn read_ref(&self, revision: &str) -> Option<String> {
        check_name(revision).ok()?;
        let commit = fs::read_to_string(self.root.join("refs").join(revision)).ok()?;
        let commit = commit.trim();
        check_name(commit).ok().map(|()| commit.to_string())
    }

    /// The model files present in `snapshots/<commit>/` (paths relative to
    /// it, links that resolve), with their sizes.
    #[must_use]
    pub fn snapshot_files(&self, commit: &str) -> Vec<(String, u64)> {
        if check_name(commit).is_err() {
            return Vec::new();
        }
        let root = self.root.join("snapshots").join(commit);
        let mut out = Vec::new();
        walk_files(&root, &root, &mut out);
        out.retain(|(p, _)| modelref::is_model_file(p));
        out.sort();
        out
    }

    /// [`Self::snapshot_files`] as a listing, like the hub's (no sha256).
    #[must_use]
    pub fn snapshot_listing(&self, commit: &str) -> Vec<crate::source::hub::RemoteFile> {
        self.snapshot_files(commit)
            .into_iter()
            .map(|(path, size)| crate::source::hub::RemoteFile {
                path,
                size,
                sha256: None,
            })
            .collect()
    }

    /// Take the cache's lock for blob `etag` (the lock `hf-hub` and the
    /// Python client take), waiting for another download of the same file
    /// to finish. Released when the returned file is dropped.
    ///
    /// # Errors
    /// The lock file cannot be created or locked.
    pub fn lock(&self, etag: &str) -> Result<File> {
        check_name(etag)?;
        let dir = self.cache_dir.join(".locks").join(repo_folder(&self.repo));
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(format!("{etag}.lock"));
        // Never through a symlink, and never truncating: File::create on a
        // link planted here would empty whatever file it points at.
        let file = crate::files::open_lock_file(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        // flock(2), as hf-hub (std's File::lock) and Python's filelock take it.
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => {
                eprintln!(
                    "headroom: another process is downloading this file ({}); waiting for it…",
                    path.display()
                );
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", path.display()));
            }
        }
        file.lock()
            .with_context(|| format!("locking {}", path.display()))?;
        Ok(file)
    }
}

/// Regular files under `dir` (following links), relative to `root`.
pub(crate) fn walk_files(root: &Path, dir: &Path, out: &mut Vec<(String, u64)>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let Ok(meta) = fs::metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            walk_files(root, &p, out);
        } else if let Ok(rel) = p.strip_prefix(root)
            && let Some(s) = rel.to_str()
        {
            out.push((s.to_string(), meta.len()));
        }
    }
}

/// A single path component that cannot escape its folder.
fn check_name(s: &str) -> Result<()> {
    if s.is_empty() || s.starts_with('.') || s.contains(['/', '\\', '\0']) {
        bail!("{s:?} is not a safe name in the cache");
    }
    Ok(())
}

/// A relative path inside a repository that stays inside it.
fn check_rel_path(s: &str) -> Result<()> {
    if !crate::source::hub::is_path_inside_repo(s) {
        bail!("{s:?} is not a file path inside a repository");
    }
    Ok(())
}

/// Free bytes for an unprivileged user on the file system holding `path`
/// (or its nearest existing ancestor).
///
/// # Errors
/// The file system cannot be asked (`statvfs` fails).
pub fn free_bytes(path: &Path) -> Result<u64> {
    let mut probe = path;
    while !probe.exists() {
        probe = probe.parent().unwrap_or(Path::new("/"));
        if probe.as_os_str().is_empty() {
            probe = Path::new(".");
            break;
        }
    }
    fs4::available_space(probe).with_context(|| format!("free space of {}", probe.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_relative_and_resolve_to_the_blob() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = RepoCache::at(dir.path(), "org/name");
        let etag = "e".repeat(64);
        let commit = "c".repeat(40);
        fs::create_dir_all(cache.blob(&etag).parent().expect("dir")).expect("mkdir");
        fs::write(cache.blob(&etag), b"GGUF").expect("write blob");
        for file in ["m.gguf", "sub/dir/m.gguf"] {
            let p = cache.link(&commit, file, &etag).expect("link");
            assert!(fs::read_link(&p).expect("a link").is_relative());
            assert_eq!(
                fs::canonicalize(&p).expect("resolves"),
                fs::canonicalize(cache.blob(&etag)).expect("blob")
            );
        }
        // Linking again replaces the link.
        cache.link(&commit, "m.gguf", &etag).expect("relink");
        assert_eq!(
            cache.snapshot_files(&commit),
            vec![("m.gguf".to_string(), 4), ("sub/dir/m.gguf".to_string(), 4)]
        );
        cache.write_ref("main", &commit).expect("ref");
        assert_eq!(cache.read_ref("main"), Some(commit.clone()));
        assert!(cache.link(&commit, "../escape.gguf", &etag).is_err());
        assert!(cache.link("../c", "m.gguf", &etag).is_err());
        assert!(cache.write_ref("main", "../../x").is_err());
    }

    #[test]
    fn free_space_is_read_for_missing_paths_too() {
        let dir = tempfile::tempdir().expect("tempdir");
        let free = free_bytes(&dir.path().join("not/yet/there")).expect("statvfs");
        assert!(free > 0);
    }

    #[test]
    fn the_lock_is_exclusive_between_handles() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = RepoCache::at(dir.path(), "org/name");
        let held = cache.lock("abc").expect("lock");
        let path = dir.path().join(".locks/models--org--name/abc.lock");
        let other = File::open(&path).expect("open");
        let try_lock = |f: &File| {
            use std::os::fd::AsRawFd;
            // SAFETY: flock on an open descriptor.
            unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
        };
        assert!(!try_lock(&other), "held by the first handle");
        drop(held);
        assert!(try_lock(&other));
    }
}
