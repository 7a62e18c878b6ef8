//! The calibration log: after each run, what the plan predicted and what the
//! run measured, one JSON object per line in the user's data directory
//! (`$HEADROOM_DATA_DIR`, else `~/.local/share/headroom/calibration.jsonl`).
//! `headroom plan` shows the last measurement for the same model and
//! settings next to its prediction.
//!
//! The file is rewritten whole through a temporary file and a rename, so a
//! crash never leaves half a line, and it keeps the last [`MAX_ENTRIES`].

use std::path::Path;

use anyhow::{Context, Result};
use headroom_planner::plan::Plan;
use serde::{Deserialize, Serialize};

/// Entries kept.
pub const MAX_ENTRIES: usize = 1000;
const FILE_NAME: &str = "calibration.jsonl";

/// One run: prediction and measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Seconds since the Unix epoch.
    pub unix_time: u64,
    /// headroom's version.
    pub headroom_version: String,
    /// Which model and settings (see [`key`]).
    pub key: String,
    /// The model file.
    pub model: String,
    /// The plan's predicted peak RSS.
    pub planned_peak_bytes: u64,
    /// Measured peak RSS (`ru_maxrss`).
    pub measured_peak_bytes: u64,
    /// Measured RSS right after the load.
    pub rss_after_load_bytes: u64,
    /// Predicted decode speed.
    pub planned_decode_tokens_per_s: f64,
    /// Measured decode speed (0 when nothing was generated).
    pub measured_decode_tokens_per_s: f64,
    /// Predicted prompt speed.
    pub planned_prompt_tokens_per_s: f64,
    /// Measured prompt speed.
    pub measured_prompt_tokens_per_s: f64,
}

/// The identity of a model file and the settings that decide its memory: the
/// canonical path, the file size, and the plan's resolved settings.
#[must_use]
pub fn key(plan: &Plan) -> String {
    let path = Path::new(&plan.model.path);
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let s = &plan.settings;
    format!(
        "{}|{}|ctx={}|np={}|ngl={}|ncmoe={}|b={}|ub={}|k={}|v={}|fa={}|swa_full={}|mmap={}|repack={}",
        canonical.display(),
        plan.model.file_bytes,
        plan.n_ctx,
        plan.n_parallel,
        plan.n_gpu_layers,
        plan.n_cpu_moe,
        s.n_batch,
        s.n_ubatch,
        s.cache_type_k,
        s.cache_type_v,
        s.flash_attn,
        s.swa_full,
        s.mmap,
        s.repack
    )
}

/// Read the log (missing file: empty; unreadable lines are skipped).
#[must_use]
pub fn read(dir: &Path) -> Vec<Entry> {
    std::fs::read_to_string(dir.join(FILE_NAME))
        .map(|s| {
            s.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Append an entry, keeping the newest [`MAX_ENTRIES`]. The whole file is
/// rewritten and renamed under a lock ([`crate::files::update`]): a failed
/// write keeps the old log, and two runs finishing at once both land.
///
/// # Errors
/// The directory or file cannot be written.
pub fn append(dir: &Path, entry: &Entry) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    crate::files::update(&dir.join(FILE_NAME), |old| {
        let old = old.map(|b| String::from_utf8_lossy(&b).into_owned());
        // Damaged lines (a log from a crashed older version) are dropped, as `read` skips them.
        let mut entries: Vec<Entry> = old
            .iter()
            .flat_map(|s| s.lines())
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        entries.push(entry.clone());
        let skip = entries.len().saturating_sub(MAX_ENTRIES);
        let mut text = String::new();
        for e in &entries[skip..] {
            text.push_str(&serde_json::to_string(e)?);
            text.push('\n');
        }
        Ok(text.into_bytes())
    })
}

/// The most recent entry for this plan's model and settings.
#[must_use]
pub fn last_for(dir: &Path, plan: &Plan) -> Option<Entry> {
    let k = key(plan);
    read(dir).into_iter().rev().find(|e| e.key == k)
}

/// Seconds since the Unix epoch.
#[must_use]
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, peak: u64) -> Entry {
        Entry {
            unix_time: 1,
            headroom_version: "0".into(),
            key: key.into(),
            model: "m".into(),
            planned_peak_bytes: 10,
            measured_peak_bytes: peak,
            rss_after_load_bytes: 5,
            planned_decode_tokens_per_s: 1.0,
            measured_decode_tokens_per_s: 1.0,
            planned_prompt_tokens_per_s: 1.0,
            measured_prompt_tokens_per_s: 1.0,
        }
    }

    #[test]
    fn appends_keep_order_and_the_cap() {
        let dir = tempfile::tempdir().expect("tempdir");
        for i in 0..(MAX_ENTRIES as u64 + 5) {
            append(dir.path(), &entry("k", i)).expect("append");
        }
        let all = read(dir.path());
        assert_eq!(all.len(), MAX_ENTRIES);
        assert_eq!(
            all.last().map(|e| e.measured_peak_bytes),
            Some(MAX_ENTRIES as u64 + 4)
        );
        assert_eq!(all[0].measured_peak_bytes, 5);
    }

    #[test]
    fn a_damaged_line_is_skipped_not_fatal() {
        let dir = tempfile::tempdir().expect("tempdir");
        append(dir.path(), &entry("a", 1)).expect("append");
        let path = dir.path().join(FILE_NAME);
        let mut text = std::fs::read_to_string(&path).expect("read");
        text.push_str("{not json\n");
        std::fs::write(&path, text).expect("write");
        append(dir.path(), &entry("b", 2)).expect("append");
        let all = read(dir.path());
        assert_eq!(
            all.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
    }
}
