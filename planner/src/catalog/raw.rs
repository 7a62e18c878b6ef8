//! `models.toml` as written: serde structs that reject unknown fields, with
//! the span of every model and quantization so that every error, from the
//! TOML parser or from validation, can name `file:line`.

use std::ops::Range;

use crate::synth::facts::PartialFacts;
use serde::Deserialize;
use toml::Spanned;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCatalog {
    /// `[[model]]` tables.
    #[serde(default)]
    pub model: Vec<Spanned<RawModel>>,
}

/// One `[[model]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawModel {
    pub id: String,
    pub name: String,
    pub family: String,
    pub params_b: Option<f64>,
    #[serde(default)]
    pub params_nominal: bool,
    pub params_active_b: Option<f64>,
    pub license: Option<String>,
    #[serde(rename = "use")]
    pub uses: Vec<String>,
    pub repo: String,
    pub arch_like: Option<String>,
    pub arch_like_why: Option<String>,
    #[serde(default)]
    pub sources: Vec<String>,
    #[serde(default)]
    pub notes: Vec<String>,
    /// First public release, `YYYY-MM-DD` or `YYYY-MM`.
    pub release: Option<String>,
    /// Expected quality on the LMArena text Elo scale (see
    /// [`super::Entry::quality`]), and where the figure comes from.
    pub quality: Option<f64>,
    pub quality_basis: Option<String>,
    /// Ids of the entries this model replaces, and the sentence of its card
    /// or release note that says so.
    #[serde(default)]
    pub supersedes: Vec<String>,
    pub supersedes_why: Option<String>,
    #[serde(default)]
    pub arch: PartialFacts,
    #[serde(default)]
    pub quant: Vec<Spanned<RawQuant>>,
}

/// One `[[model.quant]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawQuant {
    pub name: String,
    pub repo: Option<String>,
    pub file: Option<String>,
    pub files: Option<Vec<String>>,
    pub folder: Option<String>,
    pub size: Option<String>,
    pub bytes: Option<u64>,
    #[serde(default)]
    pub verified: bool,
}

/// 1-based line of byte offset `at` in `text`.
pub(super) fn line_of(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    text.as_bytes()[..at]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The line a span starts on.
pub(super) fn span_line(text: &str, span: &Range<usize>) -> usize {
    line_of(text, span.start)
}

/// A size as READMEs list it: `"4.92 GB"` (10^9 bytes; also `MB`, `TB`),
/// returned as bytes and the ± of the listed precision (half a unit in the
/// last listed digit).
pub(super) fn parse_listed_size(s: &str) -> Option<(u64, u64)> {
    let (num, unit) = s.trim().split_once(' ')?;
    let scale: u64 = match unit.trim() {
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return None,
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > 6
    {
        return None;
    }
    let digits = u32::try_from(frac.len()).ok()?;
    let unit_step = scale / 10u64.pow(digits);
    let whole = int.parse::<u64>().ok()?.checked_mul(scale)?;
    let part = if frac.is_empty() {
        0
    } else {
        frac.parse::<u64>().ok()?.checked_mul(unit_step)?
    };
    Some((whole.checked_add(part)?, unit_step / 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_sizes_keep_their_precision() {
        assert_eq!(
            parse_listed_size("4.92 GB"),
            Some((4_920_000_000, 5_000_000))
        );
        assert_eq!(
            parse_listed_size("7.6 GB"),
            Some((7_600_000_000, 50_000_000))
        );
        assert_eq!(parse_listed_size("253 MB"), Some((253_000_000, 500_000)));
        assert_eq!(parse_listed_size("4,92 GB"), None);
        assert_eq!(parse_listed_size("4.92GB"), None);
        assert_eq!(parse_listed_size("-1 GB"), None);
        assert_eq!(parse_listed_size("1.5 GiB"), None);
    }

    #[test]
    fn lines_count_from_one() {
        let t = "a\nb\nc";
        assert_eq!(line_of(t, 0), 1);
        assert_eq!(line_of(t, 2), 2);
        assert_eq!(line_of(t, 100), 3);
    }
}
