//! `headroom catalog refresh`: read each catalog quantization's file from the
//! hub — its listing (exact sizes, sha256s) and its header (architecture,
//! parameters) — and record what was read as verified facts
//! ([`super::verified`]). Nothing is downloaded but headers.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};

use super::header::{self, HeaderCache};
use super::verified::{self, Fact};
use super::{Hub, RemoteFile};
use crate::source::hub::choose::{self, Candidate};

/// One quantization to check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The catalog id, when it comes from the catalog.
    pub id: Option<String>,
    /// `org/name`.
    pub repo: String,
    /// The quantization label.
    pub quant: Option<String>,
    /// The file (or every part) as the catalog lists it; empty: find the
    /// file by `quant`.
    pub files: Vec<String>,
    /// The size the catalog lists, in bytes, and how precisely (the unit of
    /// its last digit, e.g. 10^7 for "4.92 GB").
    pub listed: Option<(u64, u64)>,
}

/// What checking one target found.
#[derive(Debug)]
pub struct Checked {
    /// The target.
    pub target: Target,
    /// The fact read, or why none could be.
    pub fact: Result<Fact>,
    /// Where the hub disagrees with the catalog (file names, sizes).
    pub notes: Vec<String>,
}

/// Check every target against the hub, reading each repository's listing
/// once and each file's header once.
#[must_use]
pub fn refresh(hub: &Hub, headers: &HeaderCache, targets: &[Target]) -> Vec<Checked> {
    let mut listings: HashMap<String, Result<(String, Vec<RemoteFile>), String>> = HashMap::new();
    targets
        .iter()
        .map(|t| {
            let listing = listings
                .entry(t.repo.clone())
                .or_insert_with(|| {
                    let commit = hub.commit(&t.repo, "main").map_err(|e| e.to_string())?;
                    headers.set_ref(&t.repo, "main", &commit);
                    let files = hub.list(&t.repo, &commit).map_err(|e| e.to_string())?;
                    Ok((commit, files))
                })
                .clone();
            let mut notes = Vec::new();
            let fact = match listing {
                Ok((commit, files)) => check(hub, headers, t, &commit, &files, &mut notes),
                Err(e) => Err(anyhow::anyhow!(e)),
            };
            Checked {
                target: t.clone(),
                fact,
                notes,
            }
        })
        .collect()
}

fn check(
    hub: &Hub,
    headers: &HeaderCache,
    t: &Target,
    commit: &str,
    files: &[RemoteFile],
    notes: &mut Vec<String>,
) -> Result<Fact> {
    let cands = choose::candidates(files);
    let by_file = t
        .files
        .first()
        .and_then(|first| cands.iter().find(|c| c.first() == first).cloned());
    let candidate: Candidate = match (by_file, &t.quant) {
        (Some(c), _) => c,
        (None, Some(q)) => {
            let c = choose::select(
                &t.repo,
                &cands,
                &crate::source::modelref::Select::Quant(q.clone()),
            )?
            .clone();
            if !t.files.is_empty() {
                notes.push(format!(
                    "the catalog names {} but the repository has {}",
                    t.files.join(", "),
                    c.files
                        .iter()
                        .map(|f| f.path.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            c
        }
        (None, None) => bail!(
            "{} has no file {}",
            t.repo,
            t.files.first().map_or("", String::as_str)
        ),
    };
    let read = header::read_model(hub, headers, &t.repo, commit, &candidate.files)?;
    let profile = headroom_planner::profile::profile(&read.header)
        .with_context(|| format!("{}/{}: invalid model", t.repo, candidate.first()))?;
    let size = candidate.size();
    if let Some((listed, unit)) = t.listed {
        // "4.92 GB" covers 4.915–4.925 GB: anything beyond half a unit differs.
        if size.abs_diff(listed) > unit / 2 {
            notes.push(format!(
                "the catalog lists {listed} bytes (±{}), the file is {size}",
                unit / 2
            ));
        }
    }
    let (n_params, weight_bytes) = verified::sizes(&profile);
    Ok(Fact {
        id: t.id.clone(),
        quant: candidate.quant.clone().or_else(|| t.quant.clone()),
        repo: t.repo.clone(),
        files: candidate.files.iter().map(|f| f.path.clone()).collect(),
        commit: commit.to_string(),
        size_bytes: size,
        sha256: candidate.files.iter().map(|f| f.sha256.clone()).collect(),
        n_params,
        weight_bytes,
        gguf: verified::header_facts(&read.header),
        checked_at: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        endpoint: hub.env().endpoint.clone(),
    })
}

/// Targets for `org/name[:QUANT]` given on the command line: that
/// quantization, or every GGUF model file of the repository.
///
/// # Errors
/// The listing fails.
pub fn repo_targets(hub: &Hub, repo: &str, quant: Option<&str>) -> Result<Vec<Target>> {
    if let Some(q) = quant {
        return Ok(vec![Target {
            id: None,
            repo: repo.to_string(),
            quant: Some(q.to_string()),
            files: Vec::new(),
            listed: None,
        }]);
    }
    let commit = hub.commit(repo, "main")?;
    let files = hub.list(repo, &commit)?;
    Ok(choose::candidates(&files)
        .into_iter()
        .map(|c| Target {
            id: None,
            repo: repo.to_string(),
            quant: c.quant.clone(),
            files: c.files.iter().map(|f| f.path.clone()).collect(),
            listed: None,
        })
        .collect())
}
