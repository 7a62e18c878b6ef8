//! Split GGUF models (`name-00001-of-00003.gguf`, written by llama.cpp's
//! `gguf-split`): one header per part, to be read as one model.
//!
//! The first part carries all the metadata and some tensors; every later part
//! carries only `split.*` keys and its own tensors. llama.cpp loads the set
//! from the first part's path, so headroom plans the merged header: the first
//! part's metadata and every part's tensors. Tensor offsets are relative to
//! each part's data section; in the merged header they are shifted by the
//! data sizes of the parts before, as if the parts were one file, so the
//! planner's mapped-range arithmetic stays meaningful.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use headroom_planner::gguf::{self, Header};

use crate::source::modelref;

/// The metadata key holding a part's 0-based number.
pub const KEY_NO: &str = "split.no";
/// The metadata key holding the number of parts.
pub const KEY_COUNT: &str = "split.count";
/// The metadata key holding the total number of tensors of all parts.
pub const KEY_TENSORS: &str = "split.tensors.count";

/// Merge the headers of all parts, in order, into one.
///
/// # Errors
/// Parts out of order, a count that disagrees, duplicate tensors, or a
/// tensor total that differs from `split.tensors.count`.
pub fn merge(parts: Vec<Header>) -> Result<Header> {
    let mut iter = parts.into_iter();
    let Some(mut merged) = iter.next() else {
        bail!("a split model with no parts");
    };
    let count = merged.get_u64(KEY_COUNT).unwrap_or(1);
    let mut shift = merged
        .data_size()
        .context("the first part's data size overflows")?;
    let mut n_parts = 1u64;
    for (i, part) in iter.enumerate() {
        let no = part.get_u64(KEY_NO);
        let want = i as u64 + 1;
        if no.is_some_and(|n| n != want) {
            bail!(
                "part {} says it is split.no {} (parts out of order or mixed)",
                want + 1,
                no.unwrap_or_default()
            );
        }
        if part.get_u64(KEY_COUNT).is_some_and(|c| c != count) {
            bail!("part {} disagrees on the number of parts", want + 1);
        }
        let size = part
            .data_size()
            .with_context(|| format!("part {}: data size overflows", want + 1))?;
        for mut t in part.tensors {
            t.offset = t
                .offset
                .checked_add(shift)
                .context("tensor offsets overflow")?;
            merged.tensors.push(t);
        }
        shift = shift.checked_add(size).context("data size overflows")?;
        n_parts += 1;
    }
    if n_parts != count {
        bail!("{n_parts} parts read but split.count is {count}");
    }
    let mut names = std::collections::HashSet::new();
    if let Some(t) = merged.tensors.iter().find(|t| !names.insert(&t.name)) {
        bail!("tensor {:?} appears in two parts", t.name);
    }
    if let Some(total) = merged.get_u64(KEY_TENSORS)
        && total != merged.tensors.len() as u64
    {
        bail!(
            "split.tensors.count is {total} but the parts hold {} tensors",
            merged.tensors.len()
        );
    }
    Ok(merged)
}

/// The paths of every part of the split model whose first part is `first`,
/// or `None` when `first` is not a split file.
///
/// # Errors
/// A later part named instead of the first.
pub fn part_paths(first: &Path) -> Result<Option<Vec<PathBuf>>> {
    let Some(name) = first.file_name().and_then(|n| n.to_str()) else {
        return Ok(None);
    };
    let Some(part) = modelref::split_part(name) else {
        return Ok(None);
    };
    if part.index != 1 {
        bail!(
            "{}: part {} of {}; give the first part ({})",
            first.display(),
            part.index,
            part.count,
            modelref::split_name(part.base, 1, part.count)
        );
    }
    let dir = first.parent().unwrap_or(Path::new(""));
    Ok(Some(
        (1..=part.count)
            .map(|i| dir.join(modelref::split_name(part.base, i, part.count)))
            .collect(),
    ))
}

/// Read a local model's header: the file's own, or, for the first part of a
/// split model, the merged header of all its parts (each checked against
/// its file's length, as llama.cpp's loader does).
///
/// # Errors
/// A missing part, or an unreadable or inconsistent header.
pub fn read_local(path: &Path) -> Result<Header> {
    let Some(paths) = part_paths(path)? else {
        return Ok(gguf::read_header_from_file(path)?);
    };
    let mut headers = Vec::with_capacity(paths.len());
    for p in &paths {
        if !p.is_file() {
            bail!(
                "{}: part {} of this split model is missing",
                path.display(),
                p.display()
            );
        }
        headers.push(gguf::read_header_from_file(p).with_context(|| p.display().to_string())?);
    }
    merge(headers).with_context(|| format!("{}: split model", path.display()))
}

/// The total size on disk of a model: the file, or all parts of a split one.
///
/// # Errors
/// A part that cannot be read.
pub fn local_size(path: &Path) -> Result<u64> {
    let paths = part_paths(path)?.unwrap_or_else(|| vec![path.to_path_buf()]);
    paths.iter().try_fold(0u64, |acc, p| {
        let len = std::fs::metadata(p)
            .with_context(|| format!("reading {}", p.display()))?
            .len();
        Ok(acc + len)
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use headroom_planner::gguf::writer::{HeaderBuilder, create_sparse_file};
    use headroom_planner::synth::{self, Mix, Shape};

    /// Split a synthetic model's header into `n` parts the way gguf-split
    /// does: all metadata in the first, `split.*` keys in each.
    pub(crate) fn split_headers(whole: &Header, n: usize) -> Vec<Header> {
        let per = whole.tensors.len().div_ceil(n);
        let total = i32::try_from(whole.tensors.len()).unwrap_or(i32::MAX);
        whole
            .tensors
            .chunks(per)
            .enumerate()
            .map(|(i, chunk)| {
                let mut b = HeaderBuilder::new();
                if i == 0 {
                    for (k, v) in &whole.metadata {
                        b = b.kv(k.clone(), v.clone());
                    }
                }
                b = b
                    .kv(KEY_NO, u16::try_from(i).unwrap_or(0))
                    .kv(KEY_COUNT, u16::try_from(n).unwrap_or(0))
                    .kv(KEY_TENSORS, total);
                for t in chunk {
                    b = b.tensor(t.name.clone(), &t.dims, t.ty);
                }
                b.build().expect("valid part")
            })
            .collect()
    }

    #[test]
    fn merged_parts_plan_like_the_whole_model() {
        let whole = synth::build(Shape::Llama1B, Mix::Q8_0).expect("synthetic");
        let merged = merge(split_headers(&whole, 3)).expect("merges");
        assert_eq!(merged.tensors.len(), whole.tensors.len());
        let (a, b) = (
            headroom_planner::profile::profile(&whole).expect("profile"),
            headroom_planner::profile::profile(&merged).expect("profile"),
        );
        assert_eq!(a.weight_bytes, b.weight_bytes);
        assert_eq!(a.n_params, b.n_params);
        assert_eq!(a.layers.len(), b.layers.len());
    }

    #[test]
    fn parts_out_of_order_are_refused() {
        let whole = synth::build(Shape::Llama1B, Mix::Q8_0).expect("synthetic");
        let mut parts = split_headers(&whole, 3);
        parts.swap(1, 2);
        assert!(merge(parts).is_err());
        let mut parts = split_headers(&whole, 3);
        parts.pop();
        let err = merge(parts).expect_err("a part is missing");
        assert!(format!("{err:#}").contains("split.count is 3"), "{err:#}");
    }

    #[test]
    fn local_split_models_are_read_from_their_first_part() {
        let dir = tempfile::tempdir().expect("tempdir");
        let whole = synth::build(Shape::Llama1B, Mix::Q8_0).expect("synthetic");
        let parts = split_headers(&whole, 2);
        for (i, h) in parts.iter().enumerate() {
            let p = dir
                .path()
                .join(modelref::split_name("m-Q8_0", i as u32 + 1, 2));
            create_sparse_file(&p, h).expect("write part");
        }
        let first = dir.path().join("m-Q8_0-00001-of-00002.gguf");
        let merged = read_local(&first).expect("reads both parts");
        assert_eq!(merged.tensors.len(), whole.tensors.len());
        let size = local_size(&first).expect("sizes");
        let second = dir.path().join("m-Q8_0-00002-of-00002.gguf");
        assert!(size > std::fs::metadata(&first).expect("meta").len());
        let err = read_local(&second).expect_err("not the first part");
        assert!(
            format!("{err:#}").contains("give the first part"),
            "{err:#}"
        );
        std::fs::remove_file(&second).expect("remove");
        assert!(read_local(&first).is_err(), "a missing part is an error");
    }
}
