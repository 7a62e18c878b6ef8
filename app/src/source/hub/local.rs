//! Models on disk: the Hugging Face cache (what `pull`, llama.cpp and the
//! Python tools downloaded), headroom's own cache (the demo model), and any
//! folder of GGUF files the user names.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::cache::RepoCache;
use crate::source::modelref;

/// Where a model on disk was found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// The Hugging Face cache.
    HubCache {
        /// `org/name`.
        repo: String,
        /// The snapshot's commit.
        commit: String,
    },
    /// A folder the user named (`--models-dir`) or headroom's cache.
    Dir {
        /// The folder.
        dir: PathBuf,
    },
}

/// A model on disk: one file, or a split set by its first part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalModel {
    /// `org/name:FILE` for the hub cache, else the file name.
    pub name: String,
    /// The path to give llama.cpp (the first part of a split set).
    pub path: PathBuf,
    /// Bytes on disk, all parts.
    pub size: u64,
    /// Where it was found.
    pub source: Source,
    /// Parts of a split model that are missing.
    pub missing_parts: u32,
}

/// A download that stopped before its end (`blobs/*.incomplete`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partial {
    /// `org/name`.
    pub repo: String,
    /// The partial file.
    pub path: PathBuf,
    /// Bytes it holds.
    pub bytes: u64,
}

/// Every model in the Hugging Face cache at `cache_dir`, each blob once
/// (the snapshot `refs/main` points at first), and unfinished downloads.
#[must_use]
pub fn scan_hub(cache_dir: &Path) -> (Vec<LocalModel>, Vec<Partial>) {
    let mut models = Vec::new();
    let mut partials = Vec::new();
    let Ok(entries) = fs::read_dir(cache_dir) else {
        return (models, partials);
    };
    let mut folders: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    folders.sort();
    for folder in folders {
        let Some(repo) = folder
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("models--"))
            .and_then(|rest| rest.split_once("--"))
            .map(|(org, name)| format!("{org}/{name}"))
        else {
            continue;
        };
        let rc = RepoCache::at(cache_dir, &repo);
        let main = rc.read_ref("main");
        let mut commits: Vec<String> = fs::read_dir(folder.join("snapshots"))
            .map(|it| {
                it.flatten()
                    .filter_map(|e| e.file_name().to_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        commits.sort_by_key(|c| (Some(c) != main.as_ref(), c.clone()));
        let mut seen = HashSet::new();
        for commit in commits {
            let files = rc.snapshot_files(&commit);
            let root = folder.join("snapshots").join(&commit);
            for m in group(&root, &files) {
                let blob = fs::canonicalize(&m.path).unwrap_or_else(|_| m.path.clone());
                if !seen.insert(blob) {
                    continue;
                }
                let rel = m
                    .path
                    .strip_prefix(&root)
                    .map_or_else(|_| m.name.clone(), |p| p.display().to_string());
                models.push(LocalModel {
                    name: format!("{repo}:{rel}"),
                    source: Source::HubCache {
                        repo: repo.clone(),
                        commit: commit.clone(),
                    },
                    ..m
                });
            }
        }
        if let Ok(blobs) = fs::read_dir(folder.join("blobs")) {
            for b in blobs.flatten() {
                let p = b.path();
                if p.extension().is_some_and(|x| x == "incomplete") {
                    partials.push(Partial {
                        repo: repo.clone(),
                        bytes: fs::metadata(&p).map_or(0, |m| m.len()),
                        path: p,
                    });
                }
            }
        }
    }
    (models, partials)
}

/// Every GGUF model under `dir` (up to four folders deep).
#[must_use]
pub fn scan_dir(dir: &Path) -> Vec<LocalModel> {
    let mut files = Vec::new();
    walk_limited(dir, dir, 4, &mut files);
    files.retain(|(p, _)| modelref::is_model_file(p));
    files.sort();
    group(dir, &files)
        .into_iter()
        .map(|m| LocalModel {
            source: Source::Dir {
                dir: dir.to_path_buf(),
            },
            ..m
        })
        .collect()
}

fn walk_limited(root: &Path, dir: &Path, depth: u32, out: &mut Vec<(String, u64)>) {
    if depth == 0 {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let Ok(meta) = fs::metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            walk_limited(root, &p, depth - 1, out);
        } else if let Ok(rel) = p.strip_prefix(root)
            && let Some(s) = rel.to_str()
        {
            out.push((s.to_string(), meta.len()));
        }
    }
}

/// Files (relative to `root`, with sizes) as models: single files, and
/// split sets by their first part with the size of every part present.
fn group(root: &Path, files: &[(String, u64)]) -> Vec<LocalModel> {
    let mut out = Vec::new();
    for (rel, size) in files {
        let (size, missing) = match modelref::split_part(rel) {
            None => (*size, 0),
            Some(part) if part.index == 1 => {
                let mut total = 0;
                let mut missing = 0;
                for i in 1..=part.count {
                    let name = modelref::split_name(part.base, i, part.count);
                    match files.iter().find(|(p, _)| *p == name) {
                        Some((_, s)) => total += s,
                        None => missing += 1,
                    }
                }
                (total, missing)
            }
            Some(_) => continue,
        };
        let path = root.join(rel);
        out.push(LocalModel {
            name: rel.rsplit('/').next().unwrap_or(rel).to_string(),
            path,
            size,
            source: Source::Dir {
                dir: root.to_path_buf(),
            },
            missing_parts: missing,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_sets_are_one_model() {
        let files = vec![
            ("a/M-00001-of-00002.gguf".to_string(), 10),
            ("a/M-00002-of-00002.gguf".to_string(), 5),
            ("b/N-00001-of-00003.gguf".to_string(), 7),
            ("c.gguf".to_string(), 3),
        ];
        let g = group(Path::new("/r"), &files);
        assert_eq!(g.len(), 3);
        assert_eq!((g[0].size, g[0].missing_parts), (15, 0));
        assert_eq!((g[1].size, g[1].missing_parts), (7, 2));
        assert_eq!(g[2].path, PathBuf::from("/r/c.gguf"));
    }
}
