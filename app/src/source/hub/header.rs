//! A model's GGUF header read over HTTP ranges, never its weights, and kept
//! in headroom's cache so the next plan of the same file makes no request.
//!
//! The header's length is not known up front (the vocabulary dominates it:
//! 2–10 MB for today's tokenizers), so the read starts with the first
//! [`FIRST_READ`] bytes and grows: the parser reports how long a prefix it
//! needs to get further, and the next request fetches only the missing bytes,
//! at least doubling the prefix, so a header costs a few requests and at most
//! twice its own size.
//!
//! The cache mirrors the hub's: `headers/models--org--name/<commit>/<path>`
//! holds the header bytes of that file at that commit (immutable), and
//! `refs/<branch>` the commit last seen, for planning offline.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use headroom_planner::gguf::{self, GgufError, Header};

use super::{Hub, RemoteFile};
use crate::source::hub::repo_folder;

/// The first range requested: enough for most headers' metadata.
pub const FIRST_READ: u64 = 2 << 20;
/// No header is allowed to be longer (gguf.cpp's own limits allow more,
/// but no real model comes near).
pub const MAX_HEADER: u64 = 256 << 20;

/// Headers read before, by repository, commit and path.
#[derive(Debug, Clone)]
pub struct HeaderCache {
    dir: PathBuf,
}

impl HeaderCache {
    /// A cache rooted at `dir`.
    #[must_use]
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// The cache in headroom's cache directory (`<cache>/headers`).
    ///
    /// # Errors
    /// No cache directory can be found.
    pub fn open_default() -> Result<Self> {
        Ok(Self::new(crate::files::cache_dir()?.join("headers")))
    }

    fn repo_dir(&self, repo: &str) -> PathBuf {
        self.dir.join(repo_folder(repo))
    }

    fn path(&self, repo: &str, commit: &str, file: &str) -> Option<PathBuf> {
        safe_name(commit)?;
        if file
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == "..")
        {
            return None;
        }
        Some(self.repo_dir(repo).join(commit).join(file))
    }

    /// The cached header of `file`, if it was read before.
    #[must_use]
    pub fn get(&self, repo: &str, commit: &str, file: &str) -> Option<Header> {
        let bytes = fs::read(self.path(repo, commit, file)?).ok()?;
        gguf::parse_header(&bytes).ok()
    }

    /// Keep the header bytes of `file`. A cache that cannot be written only
    /// costs the next plan a read.
    pub fn put(&self, repo: &str, commit: &str, file: &str, bytes: &[u8]) {
        let Some(path) = self.path(repo, commit, file) else {
            return;
        };
        if let Some(dir) = path.parent()
            && fs::create_dir_all(dir).is_ok()
        {
            let _ = crate::files::write(&path, bytes);
        }
    }

    /// Remember that `revision` of `repo` was at `commit`.
    pub fn set_ref(&self, repo: &str, revision: &str, commit: &str) {
        let (Some(_), Some(_)) = (safe_name(revision), safe_name(commit)) else {
            return;
        };
        let dir = self.repo_dir(repo).join("refs");
        if fs::create_dir_all(&dir).is_ok() {
            let _ = crate::files::write(&dir.join(revision), commit.as_bytes());
        }
    }

    /// The commit `revision` of `repo` was at when last seen.
    #[must_use]
    pub fn get_ref(&self, repo: &str, revision: &str) -> Option<String> {
        safe_name(revision)?;
        let commit = fs::read_to_string(self.repo_dir(repo).join("refs").join(revision)).ok()?;
        let commit = commit.trim();
        safe_name(commit).map(str::to_string)
    }

    /// The files of `repo` at `commit` whose headers are cached.
    #[must_use]
    pub fn files(&self, repo: &str, commit: &str) -> Vec<String> {
        let Some(root) = safe_name(commit).map(|c| self.repo_dir(repo).join(c)) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        walk(&root, &root, &mut out);
        out.sort();
        out
    }
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(root, &p, out);
        } else if let Ok(rel) = p.strip_prefix(root)
            && let Some(s) = rel.to_str()
            && !s.contains(".tmp.")
        {
            out.push(s.to_string());
        }
    }
}

/// A branch or commit name that is safe as one path component.
fn safe_name(s: &str) -> Option<&str> {
    (!s.is_empty() && !s.starts_with('.') && !s.contains(['/', '\\'])).then_some(s)
}

/// A header and what reading it cost.
#[derive(Debug, Clone)]
pub struct HeaderRead {
    /// The parsed header.
    pub header: Header,
    /// Bytes fetched from the hub for it (0 when it came from the cache).
    pub fetched: u64,
}

/// Read the header of `file` of `repo` at `commit`: from the cache, else
/// over growing HTTP ranges (then cached).
///
/// # Errors
/// The hub fails, or the file is not a GGUF llama.cpp would load (a header
/// longer than the file, tensors past its end).
pub fn read(
    hub: &Hub,
    cache: &HeaderCache,
    repo: &str,
    commit: &str,
    file: &RemoteFile,
) -> Result<HeaderRead> {
    if let Some(header) = cache.get(repo, commit, &file.path) {
        return Ok(HeaderRead { header, fetched: 0 });
    }
    let size = file.size;
    let mut buf: Vec<u8> = Vec::new();
    let mut want = FIRST_READ.min(size);
    loop {
        let have = buf.len() as u64;
        let more = hub
            .read_range(repo, commit, &file.path, have, want)
            .with_context(|| format!("reading the header of {repo}/{}", file.path))?;
        if more.is_empty() {
            bail!(
                "{repo}/{}: the hub sent no bytes at offset {have} of {size}",
                file.path
            );
        }
        buf.extend_from_slice(&more);
        match gguf::parse_header(&buf) {
            Ok(header) => {
                check_fits(&header, size).with_context(|| format!("{repo}/{}", file.path))?;
                let keep = usize::try_from(header.header_bytes)
                    .unwrap_or(buf.len())
                    .min(buf.len());
                cache.put(repo, commit, &file.path, &buf[..keep]);
                return Ok(HeaderRead {
                    header,
                    fetched: buf.len() as u64,
                });
            }
            Err(GgufError::Truncated { needed, .. }) => {
                let have = buf.len() as u64;
                if needed > size || needed > MAX_HEADER {
                    bail!(
                        "{repo}/{}: the GGUF header needs {needed} bytes but the file has {size}",
                        file.path
                    );
                }
                want = needed.max(have.saturating_mul(2)).min(size).min(MAX_HEADER);
                if want <= have {
                    bail!("{repo}/{}: the GGUF header does not end", file.path);
                }
            }
            Err(e) => {
                return Err(e).with_context(|| format!("{repo}/{}: not a usable GGUF", file.path));
            }
        }
    }
}

/// llama.cpp's loader check: every tensor ends within the file.
fn check_fits(header: &Header, size: u64) -> Result<()> {
    let end = header.min_file_len().context("tensor offsets overflow")?;
    if end > size {
        bail!("its tensors end at byte {end} but the file has only {size} bytes");
    }
    Ok(())
}

/// Read the header of a model: one file, or every part of a split one
/// (merged as llama.cpp loads them).
///
/// # Errors
/// As [`read`], or parts that do not belong together.
pub fn read_model(
    hub: &Hub,
    cache: &HeaderCache,
    repo: &str,
    commit: &str,
    parts: &[RemoteFile],
) -> Result<HeaderRead> {
    let mut headers = Vec::with_capacity(parts.len());
    let mut fetched = 0;
    for part in parts {
        let r = read(hub, cache, repo, commit, part)?;
        fetched += r.fetched;
        headers.push(r.header);
    }
    let header = if headers.len() == 1 {
        headers.remove(0)
    } else {
        crate::source::split::merge(headers).with_context(|| format!("{repo}: split model"))?
    };
    Ok(HeaderRead { header, fetched })
}

/// The merged header of a model's parts from the cache alone (offline).
#[must_use]
pub fn cached_model(
    cache: &HeaderCache,
    repo: &str,
    commit: &str,
    parts: &[String],
) -> Option<Header> {
    let mut headers = parts
        .iter()
        .map(|p| cache.get(repo, commit, p))
        .collect::<Option<Vec<_>>>()?;
    if headers.len() == 1 {
        headers.pop()
    } else {
        crate::source::split::merge(headers).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_refuses_paths_that_escape_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = HeaderCache::new(dir.path().to_path_buf());
        cache.put("o/n", "c0ffee", "../../x.gguf", b"GGUF");
        cache.put("o/n", "../c", "x.gguf", b"GGUF");
        assert!(cache.files("o/n", "c0ffee").is_empty());
        cache.set_ref("o/n", "main", "../../etc");
        assert_eq!(cache.get_ref("o/n", "main"), None);
        cache.set_ref("o/n", "main", "c0ffee");
        assert_eq!(cache.get_ref("o/n", "main").as_deref(), Some("c0ffee"));
    }

    #[test]
    fn cached_headers_parse_back() {
        use headroom_planner::gguf::writer::{HeaderBuilder, to_bytes};
        let h = HeaderBuilder::new()
            .kv("general.architecture", "llama")
            .build()
            .expect("header");
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = HeaderCache::new(dir.path().to_path_buf());
        cache.put("o/n", "c0ffee", "sub/m.gguf", &to_bytes(&h).expect("bytes"));
        assert_eq!(cache.get("o/n", "c0ffee", "sub/m.gguf"), Some(h));
        assert_eq!(cache.files("o/n", "c0ffee"), vec!["sub/m.gguf".to_string()]);
        assert!(cached_model(&cache, "o/n", "c0ffee", &["sub/m.gguf".into()]).is_some());
        assert!(cached_model(&cache, "o/n", "c0ffee", &["other.gguf".into()]).is_none());
    }
}
