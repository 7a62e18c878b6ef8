//! The table of named GPUs (`gpus.toml`, compiled in): memory, bandwidth and
//! FP16 throughput from each vendor's specification, with the source of every
//! row.
//!
//! It answers three questions:
//! - `--gpu NAME` ([`resolve`]): which card a person means. Matching forgives
//!   case, spaces, punctuation and the vendor's words (`rtx4060`,
//!   `NVIDIA GeForce RTX 4060`), takes a memory size as part of the name
//!   (`RTX 4060 Ti 16GB`, `M4 Max 64GB`), and accepts a unique prefix; an
//!   unknown or ambiguous name is an error naming the close matches.
//! - a detected GPU whose driver reports no bandwidth ([`lookup`]): the same
//!   matching, exact names only, with the detected memory size choosing
//!   between a name's configurations.
//! - the default for a GPU nobody named: [`DEFAULT_GPU_CARD`], a mid-range
//!   card, whose bandwidth is
//!   [`super::types::DEFAULT_GPU_BANDWIDTH_BYTES_PER_S`].

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::types::GpuVendor;

/// The table's text, compiled into the binary.
const TABLE_TOML: &str = include_str!("gpus.toml");

/// The card whose bandwidth stands in for a GPU of unknown model (`--vram`
/// without `--gpu`, or a detected GPU the table does not know): the GeForce
/// RTX 3060, a mid-range card and for years the most common one in Steam's
/// hardware survey, between the 8 GB cards' 270–450 GB/s.
pub const DEFAULT_GPU_CARD: &str = "GeForce RTX 3060";

/// Where a GPU sits in a vendor's line-up (for listing; matching ignores it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Segment {
    /// Desktop graphics card.
    Desktop,
    /// Laptop GPU.
    Laptop,
    /// Workstation card.
    Workstation,
    /// Data-centre accelerator.
    Datacenter,
    /// A system on a chip whose GPU shares the machine's RAM.
    Soc,
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnownGpu {
    /// Product name without the vendor ("GeForce RTX 4060", "Apple M4 Max").
    pub name: String,
    /// Who makes it.
    pub vendor: GpuVendor,
    /// Desktop, laptop, workstation, data centre or system on a chip.
    pub segment: Segment,
    /// The GPU draws on the machine's RAM (Apple silicon, AMD Strix Halo).
    #[serde(default)]
    pub unified: bool,
    /// The memory sizes it is sold with, in GiB (vendors' "GB" for GPU
    /// memory is binary); for a unified part, the machine's RAM.
    pub memory_gb: Vec<u32>,
    /// Peak memory bandwidth, 10^9 bytes/s.
    pub bandwidth_gb_s: f64,
    /// For a unified part: the CPU cores llama.cpp computes on by default
    /// (Apple silicon: its performance cores), from the row's source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cores: Option<u32>,
    /// Peak dense FP16 throughput, 10^12 FLOP/s (matrix units where the GPU
    /// has them).
    pub fp16_tflops: f64,
    /// How `fp16_tflops` follows from the source when the source does not
    /// print it as such.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp16_from: Option<String>,
    /// What tells apart rows of the same name ("40-core GPU").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// Other names drivers or people use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// Where the figures come from.
    pub source: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    gpu: Vec<KnownGpu>,
}

impl KnownGpu {
    /// The name with its vendor, as drivers report it ("NVIDIA GeForce RTX
    /// 4060", "AMD Radeon RX 7900 XTX", "Apple M4 Max").
    #[must_use]
    pub fn full_name(&self) -> String {
        let vendor = match self.vendor {
            GpuVendor::Nvidia => "NVIDIA",
            GpuVendor::Amd => "AMD",
            GpuVendor::Intel => "Intel",
            GpuVendor::Apple | GpuVendor::Other | GpuVendor::Rpc => "",
        };
        if vendor.is_empty() || self.name.starts_with(vendor) {
            self.name.clone()
        } else {
            format!("{vendor} {}", self.name)
        }
    }

    /// Peak memory bandwidth in bytes/s.
    #[must_use]
    pub fn bandwidth_bytes_per_s(&self) -> f64 {
        self.bandwidth_gb_s * 1e9
    }

    /// Peak dense FP16 throughput in FLOP/s.
    #[must_use]
    pub fn fp16_flops_per_s(&self) -> f64 {
        self.fp16_tflops * 1e12
    }

    /// Whether a name with a memory size is needed to pick this row: it
    /// comes in several sizes, or shares its name with another row.
    fn size_in_name(&self) -> bool {
        self.memory_gb.len() > 1 || table().iter().filter(|g| g.name == self.name).count() > 1
    }

    /// Every key this row answers to: its name and aliases, each also
    /// without the family word (`rtx`, `rx`, `arc`, `instinct`), so `4090`
    /// finds the RTX 4090.
    fn keys(&self) -> Vec<String> {
        let mut keys = Vec::new();
        for n in std::iter::once(&self.name).chain(&self.aliases) {
            let words = parse_name(n).words;
            keys.push(words.concat());
            if words.len() > 1 && FAMILY_WORDS.contains(&words[0].as_str()) {
                keys.push(words[1..].concat());
            }
        }
        keys.sort();
        keys.dedup();
        keys
    }
}

/// Every row of the table, in file order.
///
/// # Panics
/// Never in a tested build: the table is compiled in and
/// `the_table_parses_and_is_sane` parses it.
#[must_use]
pub fn table() -> &'static [KnownGpu] {
    static TABLE: OnceLock<Vec<KnownGpu>> = OnceLock::new();
    TABLE.get_or_init(|| {
        toml::from_str::<TableFile>(TABLE_TOML)
            .expect("gpus.toml is compiled in and checked by a test")
            .gpu
    })
}

/// A card from the table in one of its memory sizes: what `--gpu` plans for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NamedGpu {
    /// The table row.
    pub gpu: &'static KnownGpu,
    /// The memory size, GiB (one of `gpu.memory_gb`).
    pub memory_gb: u32,
}

impl NamedGpu {
    /// The name a plan shows: vendor and product, and the memory size where
    /// the product comes in several ("NVIDIA GeForce RTX 4060 Ti 16GB").
    #[must_use]
    pub fn display_name(&self) -> String {
        if self.gpu.size_in_name() {
            format!("{} {}GB", self.gpu.full_name(), self.memory_gb)
        } else {
            self.gpu.full_name()
        }
    }

    /// The memory size in bytes.
    #[must_use]
    pub fn memory_bytes(&self) -> u64 {
        u64::from(self.memory_gb) << 30
    }
}

/// Why a `--gpu` name did not name one card.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuNameError {
    /// Nothing in the table matches.
    #[error("unknown GPU \"{query}\"{}; `headroom hw --gpus` lists the known ones", suggest(.suggestions))]
    Unknown {
        /// The name as given.
        query: String,
        /// The closest names in the table.
        suggestions: Vec<String>,
    },
    /// Several cards (or memory sizes) match.
    #[error("GPU \"{query}\" is ambiguous: {}", .choices.join(", "))]
    Ambiguous {
        /// The name as given.
        query: String,
        /// What it could mean, each a name that resolves.
        choices: Vec<String>,
    },
    /// The card exists, but not with that memory size.
    #[error("GPU \"{query}\": {name} comes with {}", .sizes.iter().map(|s| format!("{s}GB")).collect::<Vec<_>>().join(", "))]
    NoSuchMemory {
        /// The name as given.
        query: String,
        /// The card.
        name: String,
        /// The sizes it comes with, GiB.
        sizes: Vec<u32>,
    },
}

fn suggest(names: &[String]) -> String {
    if names.is_empty() {
        String::new()
    } else {
        format!(" (did you mean {}?)", names.join(", "))
    }
}

/// Words that name a vendor or say nothing about the model.
const NOISE_WORDS: [&str; 14] = [
    "nvidia",
    "geforce",
    "amd",
    "ati",
    "radeon",
    "intel",
    "apple",
    "graphics",
    "gpu",
    "tm",
    "r",
    "generation",
    "tesla",
    "corporation",
];

/// Family words a row's name may be written without.
const FAMILY_WORDS: [&str; 4] = ["rtx", "rx", "arc", "instinct"];

/// Most names an error lists.
const MAX_LISTED: usize = 8;

/// A name taken apart: its model words and a memory size, if it gave one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ParsedName {
    words: Vec<String>,
    memory_gb: Option<u32>,
}

impl ParsedName {
    fn key(&self) -> String {
        self.words.concat()
    }
}

/// Lower case, split at anything not a letter or digit, vendor words
/// dropped, `mobile` read as `laptop`, `+` as `plus`; a size (`16GB`,
/// `16 GB`, `16GiB`, or `ti16gb` run together) becomes `memory_gb`.
fn parse_name(s: &str) -> ParsedName {
    let lower = s.to_lowercase().replace('+', " plus ");
    let raw: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let mut words = Vec::new();
    let mut memory_gb = None;
    let mut i = 0;
    while i < raw.len() {
        let w = raw[i];
        i += 1;
        if let Ok(n) = w.parse::<u32>()
            && raw.get(i).is_some_and(|u| matches!(*u, "gb" | "gib"))
        {
            memory_gb = Some(n);
            i += 1;
            continue;
        }
        if let Some((rest, n)) = split_size(w) {
            memory_gb = Some(n);
            if !rest.is_empty() {
                words.push(rest.to_string());
            }
            continue;
        }
        if NOISE_WORDS.contains(&w) {
            continue;
        }
        words.push(if w == "mobile" { "laptop" } else { w }.to_string());
    }
    ParsedName { words, memory_gb }
}

/// `16gb` → ("", 16); `ti16gb` → ("ti", 16): a trailing size after
/// letters or alone; `h100` and `t4` are no sizes.
fn split_size(w: &str) -> Option<(&str, u32)> {
    let stem = w.strip_suffix("gib").or_else(|| w.strip_suffix("gb"))?;
    let digits = stem.len() - stem.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return None;
    }
    let (rest, num) = stem.split_at(stem.len() - digits);
    Some((rest, num.parse().ok()?))
}

/// The card `query` names (see the module docs for the rules).
///
/// # Errors
/// [`GpuNameError`]: unknown (with close names), ambiguous (with the
/// choices), or a memory size the card does not come in.
pub fn resolve(query: &str) -> Result<NamedGpu, GpuNameError> {
    let parsed = parse_name(query);
    let key = parsed.key();
    let mut rows = rows_with_key(&key);
    if rows.is_empty() && !key.is_empty() {
        rows = table()
            .iter()
            .filter(|g| g.keys().iter().any(|k| k.starts_with(&key)))
            .collect();
    }
    if rows.is_empty() {
        return Err(GpuNameError::Unknown {
            query: query.to_string(),
            suggestions: close_names(&key),
        });
    }
    let mut configs: Vec<NamedGpu> = rows
        .iter()
        .flat_map(|&gpu| {
            gpu.memory_gb
                .iter()
                .map(move |&memory_gb| NamedGpu { gpu, memory_gb })
        })
        .collect();
    let all = configs.clone();
    if let Some(want) = parsed.memory_gb {
        let names: Vec<&str> = rows.iter().map(|g| g.name.as_str()).collect();
        configs.retain(|c| c.memory_gb == want);
        if configs.is_empty() && names.iter().all(|n| *n == names[0]) {
            let mut sizes: Vec<u32> = rows.iter().flat_map(|g| g.memory_gb.clone()).collect();
            sizes.sort_unstable();
            return Err(GpuNameError::NoSuchMemory {
                query: query.to_string(),
                name: rows[0].full_name(),
                sizes,
            });
        }
    }
    match configs.as_slice() {
        [one] => Ok(*one),
        [] => Err(GpuNameError::Ambiguous {
            query: query.to_string(),
            choices: listed(all.iter().map(NamedGpu::display_name)),
        }),
        many => Err(GpuNameError::Ambiguous {
            query: query.to_string(),
            // Each choice resolves: display names carry the size where needed.
            choices: listed(many.iter().map(NamedGpu::display_name)),
        }),
    }
}

/// The table's figures for a detected GPU called `name` with about
/// `memory_bytes` of memory (for a unified part, the machine's RAM): exact
/// names only. Where the name has several configurations, the one nearest in
/// memory; between equals, the slower, so estimates err slow.
#[must_use]
pub fn lookup(name: &str, memory_bytes: u64) -> Option<NamedGpu> {
    let parsed = parse_name(name);
    let rows = rows_with_key(&parsed.key());
    let gib = memory_bytes as f64 / f64::from(1u32 << 30);
    rows.iter()
        .flat_map(|&gpu| {
            gpu.memory_gb
                .iter()
                .map(move |&memory_gb| NamedGpu { gpu, memory_gb })
        })
        .filter(|c| parsed.memory_gb.is_none_or(|m| m == c.memory_gb))
        .min_by(|a, b| {
            let da = (f64::from(a.memory_gb) - gib).abs();
            let db = (f64::from(b.memory_gb) - gib).abs();
            da.total_cmp(&db)
                .then(a.gpu.bandwidth_gb_s.total_cmp(&b.gpu.bandwidth_gb_s))
        })
}

fn rows_with_key(key: &str) -> Vec<&'static KnownGpu> {
    if key.is_empty() {
        return Vec::new();
    }
    table()
        .iter()
        .filter(|g| g.keys().iter().any(|k| k == key))
        .collect()
}

/// Distinct names, in order, at most [`MAX_LISTED`] (then "…").
fn listed(names: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    if out.len() > MAX_LISTED {
        out.truncate(MAX_LISTED);
        out.push("…".into());
    }
    out
}

/// The table's names closest to `key` by edit distance (at most three).
fn close_names(key: &str) -> Vec<String> {
    if key.is_empty() {
        return Vec::new();
    }
    let mut scored: Vec<(usize, String)> = table()
        .iter()
        .map(|g| {
            let d = g
                .keys()
                .iter()
                .map(|k| edit_distance(k, key))
                .min()
                .unwrap_or(usize::MAX);
            (d, g.full_name())
        })
        .filter(|(d, _)| *d <= (key.len() / 2).max(2))
        .collect();
    scored.sort();
    listed(scored.into_iter().map(|(_, n)| n))
        .into_iter()
        .take(3)
        .collect()
}

/// Levenshtein distance over bytes (the keys are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
#[path = "gpus_tests.rs"]
mod tests;
