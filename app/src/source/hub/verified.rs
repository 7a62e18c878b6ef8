//! Verified facts: what `headroom catalog refresh` read from the hub itself —
//! exact file sizes, sha256s, the commit, and the architecture as the GGUF
//! header states it — kept beside the catalog rather than written into it.
//!
//! The catalog (`models.toml`) is compiled into the binary and carries
//! numbers as the model cards list them; nothing here rewrites it. The facts
//! live in one JSON file in headroom's data directory
//! (`$HEADROOM_DATA_DIR/catalog-verified.json`), and the catalog overlays
//! them by repository and file: an entry with a fact is `verified`, and its
//! size is the measured one. Deleting the file forgets every verification;
//! nothing else changes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use headroom_planner::gguf::{Header, Value};
use headroom_planner::profile::ModelProfile;
use serde::{Deserialize, Serialize};

/// The layout version of the file.
pub const SCHEMA: u32 = 1;
/// The file's name in the data directory.
pub const FILE_NAME: &str = "catalog-verified.json";

/// Every verified quantization.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Facts {
    /// Layout version ([`SCHEMA`]).
    pub schema: u32,
    /// One per repository file (the first part of a split model).
    pub entries: Vec<Fact>,
}

/// What was read from the hub for one model file (or split set).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fact {
    /// The catalog id it was refreshed for, if any.
    pub id: Option<String>,
    /// The quantization label of the file name.
    pub quant: Option<String>,
    /// `org/name`.
    pub repo: String,
    /// The file, or every part of a split model, in order.
    pub files: Vec<String>,
    /// The commit the files were read at.
    pub commit: String,
    /// Exact total size in bytes.
    pub size_bytes: u64,
    /// The LFS sha256 of each file, when the hub gave one.
    pub sha256: Vec<Option<String>>,
    /// Parameters (sum of tensor elements).
    pub n_params: u64,
    /// Bytes of tensor data.
    pub weight_bytes: u64,
    /// The header's architecture keys as stored (`general.architecture`,
    /// `<arch>.block_count`, …): scalars and short arrays, no tokenizer.
    pub gguf: BTreeMap<String, serde_json::Value>,
    /// Seconds since the Unix epoch when it was read.
    pub checked_at: u64,
    /// The hub it was read from.
    pub endpoint: String,
}

impl Facts {
    /// The fact for `file` (a file or the first part) of `repo`.
    #[must_use]
    pub fn lookup(&self, repo: &str, file: &str) -> Option<&Fact> {
        self.entries.iter().find(|f| {
            f.repo.eq_ignore_ascii_case(repo) && f.files.first().is_some_and(|p| p == file)
        })
    }

    /// Add `fact`, replacing one for the same repository file.
    pub fn upsert(&mut self, fact: Fact) {
        self.entries.retain(|f| {
            !(f.repo.eq_ignore_ascii_case(&fact.repo) && f.files.first() == fact.files.first())
        });
        self.entries.push(fact);
        self.entries
            .sort_by(|a, b| (&a.repo, &a.files).cmp(&(&b.repo, &b.files)));
    }
}

/// Where the facts are kept: `<data dir>/catalog-verified.json`.
///
/// # Errors
/// No data directory can be found.
pub fn default_path() -> Result<PathBuf> {
    Ok(crate::files::data_dir()?.join(FILE_NAME))
}

/// Read the facts; a missing file is no facts.
///
/// # Errors
/// A file that is not this layout (named with its path).
pub fn load(path: &Path) -> Result<Facts> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Facts {
                schema: SCHEMA,
                entries: Vec::new(),
            });
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let facts: Facts = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a verified-facts file", path.display()))?;
    if facts.schema != SCHEMA {
        bail!(
            "{}: layout {} (this headroom reads {SCHEMA}); delete it and run `headroom catalog refresh`",
            path.display(),
            facts.schema
        );
    }
    Ok(facts)
}

/// Write the facts atomically.
///
/// # Errors
/// The directory cannot be written.
pub fn save(path: &Path, facts: &Facts) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(facts)?;
    crate::files::write(path, text.as_bytes())
}

/// The architecture keys of a header, as stored: `general.architecture`,
/// `general.file_type`, `general.name`, `general.size_label`, and every
/// `<arch>.*` scalar or array of at most 1024 numbers.
#[must_use]
pub fn header_facts(h: &Header) -> BTreeMap<String, serde_json::Value> {
    let arch = h.architecture().unwrap_or_default().to_string();
    let prefix = format!("{arch}.");
    let general = [
        "general.architecture",
        "general.file_type",
        "general.name",
        "general.size_label",
    ];
    h.metadata
        .iter()
        .filter(|(k, _)| {
            general.contains(&k.as_str()) || (!arch.is_empty() && k.starts_with(&prefix))
        })
        .filter_map(|(k, v)| Some((k.clone(), json_of(v)?)))
        .collect()
}

fn json_of(v: &Value) -> Option<serde_json::Value> {
    if let Some(s) = v.as_str() {
        return Some(serde_json::Value::from(s));
    }
    if let Some(b) = v.as_bool() {
        return Some(serde_json::Value::from(b));
    }
    if let Some(a) = v.as_array() {
        if a.len() > 1024 {
            return None;
        }
        if let Some(b) = a.as_bools() {
            return Some(serde_json::json!(b));
        }
        if let Some(u) = a.to_u64_vec() {
            return Some(serde_json::json!(u));
        }
        return a.to_f64_vec().map(|f| serde_json::json!(f));
    }
    match v {
        Value::F32(_) | Value::F64(_) => v
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map(serde_json::Value::Number),
        Value::I8(_) | Value::I16(_) | Value::I32(_) | Value::I64(_) => {
            v.as_i64().map(serde_json::Value::from)
        }
        _ => v.as_u64().map(serde_json::Value::from),
    }
}

/// Mark in `catalog` every quantization whose file (or first part) has a
/// fact — found by repository and file, or, for quantizations the catalog
/// lists by folder only, by repository and quantization — with the size
/// read. Returns how many were marked.
pub fn overlay(catalog: &mut crate::catalog::Catalog, facts: &Facts) -> usize {
    let marks: Vec<(String, String, u64)> = catalog
        .entries()
        .iter()
        .flat_map(|e| {
            e.quants.iter().filter_map(|q| {
                let fact = match q.files.first() {
                    Some(file) => facts.lookup(&q.repo, file),
                    None => facts.entries.iter().find(|f| {
                        f.repo.eq_ignore_ascii_case(&q.repo)
                            && f.quant.as_deref().is_some_and(|fq| q.matches(fq))
                    }),
                }?;
                Some((e.id.clone(), q.name.clone(), fact.size_bytes))
            })
        })
        .collect();
    for (id, quant, size) in &marks {
        catalog.mark_verified(id, quant, *size);
    }
    marks.len()
}

/// The parameter count and weight bytes of a profile, for a [`Fact`].
#[must_use]
pub fn sizes(p: &ModelProfile) -> (u64, u64) {
    (p.n_params, p.weight_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_planner::synth::{self, Mix, Shape};

    fn fact(repo: &str, file: &str) -> Fact {
        Fact {
            id: None,
            quant: Some("Q8_0".into()),
            repo: repo.into(),
            files: vec![file.into()],
            commit: "c".repeat(40),
            size_bytes: 10,
            sha256: vec![None],
            n_params: 1,
            weight_bytes: 1,
            gguf: BTreeMap::new(),
            checked_at: 0,
            endpoint: "http://127.0.0.1:1".into(),
        }
    }

    #[test]
    fn facts_round_trip_and_replace_by_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub").join(FILE_NAME);
        assert_eq!(load(&path).expect("missing is empty").entries.len(), 0);
        let mut facts = Facts {
            schema: SCHEMA,
            entries: Vec::new(),
        };
        facts.upsert(fact("o/n", "a.gguf"));
        facts.upsert(fact("o/n", "b.gguf"));
        let mut newer = fact("O/N", "a.gguf");
        newer.size_bytes = 20;
        facts.upsert(newer);
        save(&path, &facts).expect("save");
        let back = load(&path).expect("load");
        assert_eq!(back, facts);
        assert_eq!(back.entries.len(), 2);
        assert_eq!(back.lookup("o/n", "a.gguf").map(|f| f.size_bytes), Some(20));
        assert!(back.lookup("o/n", "c.gguf").is_none());
        std::fs::write(&path, "{\"schema\":1,\"entries\":[],\"extra\":1}").expect("write");
        assert!(load(&path).is_err(), "unknown fields are refused");
    }

    #[test]
    fn the_catalog_overlay_marks_by_repository_and_file() {
        let mut catalog = crate::catalog::Catalog::builtin().expect("built-in catalog");
        let entry = catalog
            .get("gemma-3-270m")
            .expect("the demo model's entry")
            .clone();
        let q = &entry.quants[0];
        assert!(!q.verified);
        let mut facts = Facts::default();
        let mut f = fact(&q.repo, &q.files[0]);
        f.size_bytes = 253_113_024;
        facts.upsert(f);
        facts.upsert(fact("someone/else", "x.gguf"));
        assert_eq!(overlay(&mut catalog, &facts), 1);
        let q = &catalog.get("gemma-3-270m").expect("entry").quants[0];
        assert!(q.verified);
        assert_eq!((q.size_bytes, q.size_precision), (Some(253_113_024), 0));
    }

    #[test]
    fn header_facts_are_the_architecture_keys() {
        let h = synth::build(Shape::Llama8B, Mix::Q4KM).expect("synthetic");
        let f = header_facts(&h);
        assert_eq!(
            f.get("general.architecture"),
            Some(&serde_json::json!("llama"))
        );
        assert_eq!(f.get("llama.block_count"), Some(&serde_json::json!(32)));
        assert_eq!(
            f.get("llama.attention.head_count_kv"),
            Some(&serde_json::json!(8))
        );
        assert!(f.keys().all(|k| !k.starts_with("tokenizer.")));
    }
}
