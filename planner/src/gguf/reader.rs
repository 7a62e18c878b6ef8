//! The GGUF header parser: metadata and tensor infos, never tensor data.
//!
//! It refuses what llama.cpp's `gguf.cpp` refuses (see [`GgufError`]) and is
//! safe on hostile input: every allocation is backed by bytes already read,
//! every size is checked arithmetic, nested arrays use an explicit stack, and
//! counts up to 2^64 fail in time bounded by the input length.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use super::error::GgufError;
use super::header::{Header, TensorInfo, align_up};
use super::read_value::{read_value, read_value_type};
use super::source::{ReadSource, SliceSource, Source};
use super::types::GgmlType;
use super::value::Value;

/// gguf.cpp's `GGUF_MAX_ARRAY_ELEMENTS`: longer arrays are refused.
pub const MAX_ARRAY_LEN: u64 = 1 << 30;
/// gguf.cpp's `GGUF_MAX_STRING_LENGTH`: longer strings are refused.
pub const MAX_STRING_LEN: u64 = 1 << 30;
/// ggml's `GGML_MAX_NAME`: tensor names must be shorter.
pub const MAX_TENSOR_NAME: u64 = 64;
/// ggml's `GGML_MAX_DIMS`.
pub const MAX_DIMS: u32 = 4;
/// Alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The largest GGUF version llama.cpp reads.
pub const MAX_VERSION: u32 = 3;

/// Bounds on what the parser stores (not on what it accepts: anything within
/// gguf.cpp's limits is read past).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseLimits {
    /// Longest metadata key accepted (bytes).
    pub max_key_len: u64,
    /// Longest string value kept (bytes); a longer one is an error, since a
    /// scalar cannot be stored as skipped.
    pub max_string_len: u64,
    /// Numeric or bool arrays up to this length are kept.
    pub max_kept_numbers: u64,
    /// String arrays (and arrays of arrays) up to this length are kept.
    pub max_kept_strings: u64,
    /// Arrays nested deeper than this are skipped.
    pub max_kept_depth: u32,
}

impl Default for ParseLimits {
    fn default() -> Self {
        ParseLimits {
            max_key_len: 64 << 10,
            max_string_len: 16 << 20,
            // Per-layer arrays are hundreds long; vocab-sized score/type
            // arrays (>= 32k) are only ever counted.
            max_kept_numbers: 1 << 16,
            max_kept_strings: 1 << 12,
            max_kept_depth: 8,
        }
    }
}

impl ParseLimits {
    /// Keeps everything gguf.cpp accepts (for trusted input, e.g. the writer).
    pub fn keep_all() -> Self {
        ParseLimits {
            max_key_len: MAX_STRING_LEN,
            max_string_len: MAX_STRING_LEN,
            max_kept_numbers: MAX_ARRAY_LEN,
            max_kept_strings: MAX_ARRAY_LEN,
            // Deeper values would make the derived (recursive) Drop,
            // PartialEq and Debug of `Array` risk the thread's stack.
            max_kept_depth: 64,
        }
    }
}

/// Parses a header from the start of a file held in memory. `bytes` may be
/// just a prefix: if it is too short, the error is `Truncated` with the
/// prefix length needed to get further.
pub fn parse_header(bytes: &[u8]) -> Result<Header, GgufError> {
    parse_header_with(bytes, &ParseLimits::default())
}

/// [`parse_header`] with explicit storage limits.
pub fn parse_header_with(bytes: &[u8], limits: &ParseLimits) -> Result<Header, GgufError> {
    parse(&mut SliceSource::new(bytes), limits)
}

/// Parses a header from a stream, reading it once and no further than the
/// header (plus buffer read-ahead).
pub fn read_header<R: Read>(r: R) -> Result<Header, GgufError> {
    read_header_with(r, &ParseLimits::default())
}

/// [`read_header`] with explicit storage limits.
pub fn read_header_with<R: Read>(r: R, limits: &ParseLimits) -> Result<Header, GgufError> {
    parse(
        &mut ReadSource::new(BufReader::with_capacity(READ_BUF, r), None),
        limits,
    )
}

/// Read-ahead buffer: large enough that a 10 MB vocabulary costs few reads.
const READ_BUF: usize = 256 << 10;

/// Reads the header of a GGUF file, then checks the file is long enough for
/// every tensor, as llama.cpp's loader does.
pub fn read_header_from_file(path: &Path) -> Result<Header, GgufError> {
    let file = File::open(path)?;
    let meta = file.metadata()?;
    // A pipe or device has no meaningful length: parse it as a stream.
    if !meta.is_file() {
        return read_header(file);
    }
    let file_len = meta.len();
    let src = &mut ReadSource::new(BufReader::with_capacity(READ_BUF, file), Some(file_len));
    let header = parse(src, &ParseLimits::default())?;
    if file_len < header.data_offset {
        return Err(GgufError::Truncated {
            needed: header.data_offset,
            have: file_len,
        });
    }
    for t in &header.tensors {
        let end = header
            .data_offset
            .checked_add(t.offset)
            .and_then(|s| s.checked_add(t.bytes))
            .ok_or_else(|| overflow(format!("end of tensor {:?}", t.name)))?;
        if end > file_len {
            return Err(GgufError::TensorOutsideFile {
                name: t.name.clone(),
                end,
                file_len,
            });
        }
    }
    Ok(header)
}

fn overflow(what: String) -> GgufError {
    GgufError::Overflow { what }
}

/// `TooLarge` if `len > cap`; `what` is only built on error, as this runs
/// once per vocabulary string.
pub(super) fn too_large<W: Into<String>>(
    what: impl FnOnce() -> W,
    len: u64,
    cap: u64,
) -> Result<(), GgufError> {
    if len > cap {
        return Err(GgufError::TooLarge {
            what: what().into(),
            len,
            cap,
        });
    }
    Ok(())
}

/// The whole header, in file order.
fn parse<S: Source>(src: &mut S, limits: &ParseLimits) -> Result<Header, GgufError> {
    let mut magic = [0u8; 4];
    src.read_exact(&mut magic)?;
    if &magic != b"GGUF" {
        return Err(GgufError::BadMagic { found: magic });
    }
    let version = src.u32()?;
    // gguf.cpp: a byte-swapped version 2 or 3 has its low 16 bits zero.
    if version != 0 && version & 0xFFFF == 0 {
        return Err(GgufError::BigEndian { version });
    }
    if !(2..=MAX_VERSION).contains(&version) {
        return Err(GgufError::UnsupportedVersion { version });
    }
    // Both counts are int64 in gguf.cpp: above i64::MAX they are negative.
    let n_tensors = src.u64()?;
    too_large(|| "tensor count", n_tensors, i64::MAX as u64)?;
    let n_kv = src.u64()?;
    too_large(|| "metadata entry count", n_kv, i64::MAX as u64)?;

    // No capacity is reserved from n_kv or n_tensors: each entry takes at
    // least 13 bytes, so these vectors grow only as fast as input is read.
    let mut metadata = Vec::new();
    let mut keys = HashSet::new();
    for index in 0..n_kv {
        let at = src.pos();
        let key = read_string(src, limits.max_key_len, "metadata key length")?
            .ok_or_else(|| invalid_utf8(format!("metadata key number {index}"), at))?;
        if key.is_empty() {
            return Err(GgufError::EmptyKey { index });
        }
        if !keys.insert(key.clone()) {
            return Err(GgufError::DuplicateKey { key });
        }
        let ty = read_value_type(src, &key)?;
        let value = read_value(src, ty, &key, limits)?;
        metadata.push((key, value));
    }

    let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some((_, Value::U32(a))) => u64::from(*a),
        Some((_, v)) => {
            return Err(GgufError::AlignmentType {
                found: v.value_type(),
            });
        }
    };
    if !alignment.is_power_of_two() {
        return Err(GgufError::BadAlignment { value: alignment });
    }

    let mut tensors: Vec<TensorInfo> = Vec::new();
    let mut names = HashSet::new();
    for index in 0..n_tensors {
        let t = read_tensor_info(src, index)?;
        if !names.insert(t.name.clone()) {
            return Err(GgufError::DuplicateTensor { name: t.name });
        }
        tensors.push(t);
    }

    let header_bytes = src.pos();
    let data_offset = if tensors.is_empty() {
        header_bytes
    } else {
        align_up(header_bytes, alignment).ok_or_else(|| overflow("data section offset".into()))?
    };
    check_offsets(&tensors, alignment, data_offset)?;
    Ok(Header {
        version,
        alignment,
        metadata,
        tensors,
        data_offset,
        header_bytes,
    })
}

/// gguf.cpp requires tensors packed in file order, each padded to the
/// alignment, and the whole data section addressable.
fn check_offsets(
    tensors: &[TensorInfo],
    alignment: u64,
    data_offset: u64,
) -> Result<(), GgufError> {
    let mut expected = 0u64;
    let mut prev: Option<&TensorInfo> = None;
    for t in tensors {
        if t.offset != expected {
            return Err(if t.offset % alignment != 0 {
                GgufError::MisalignedTensor {
                    name: t.name.clone(),
                    offset: t.offset,
                    alignment,
                }
            } else if let (Some(p), true) = (prev, t.offset < expected) {
                GgufError::OverlappingTensors {
                    a: p.name.clone(),
                    b: t.name.clone(),
                }
            } else {
                GgufError::UnexpectedTensorOffset {
                    name: t.name.clone(),
                    offset: t.offset,
                    expected,
                }
            });
        }
        let padded = align_up(t.bytes, alignment);
        expected = padded
            .and_then(|p| expected.checked_add(p))
            .filter(|end| data_offset.checked_add(*end).is_some())
            .ok_or_else(|| overflow(format!("data section end after tensor {:?}", t.name)))?;
        prev = Some(t);
    }
    Ok(())
}

fn invalid_utf8(what: String, offset: u64) -> GgufError {
    GgufError::InvalidUtf8 { what, offset }
}

/// A length-prefixed string; `Ok(None)` if it is not UTF-8.
fn read_string<S: Source>(src: &mut S, cap: u64, what: &str) -> Result<Option<String>, GgufError> {
    let len = src.u64()?;
    too_large(|| what, len, cap)?;
    src.with_bytes(len, |b| std::str::from_utf8(b).ok().map(str::to_owned))
}

/// One tensor info, validated as gguf.cpp does.
fn read_tensor_info<S: Source>(src: &mut S, index: u64) -> Result<TensorInfo, GgufError> {
    let at = src.pos();
    let len = src.u64()?;
    too_large(
        || format!("name length of tensor number {index}"),
        len,
        MAX_TENSOR_NAME - 1,
    )?;
    let name = src
        .with_bytes(len, |b| std::str::from_utf8(b).ok().map(str::to_owned))?
        .ok_or_else(|| invalid_utf8(format!("name of tensor number {index}"), at))?;

    let n_dims = src.u32()?;
    let bad = |dims: Vec<u64>, reason| GgufError::BadDims {
        name: name.clone(),
        dims,
        reason,
    };
    if n_dims > MAX_DIMS {
        return Err(bad(Vec::new(), "more than 4 dimensions"));
    }
    let mut dims = Vec::new();
    for _ in 0..n_dims {
        dims.push(src.u64()?);
        if dims.iter().any(|&d| d > i64::MAX as u64) {
            return Err(bad(
                dims,
                "a dimension above i64::MAX (negative to llama.cpp)",
            ));
        }
    }
    // gguf.cpp's element-count check, quirks included: a factor of 0 or 1
    // never overflows and a 0 resets the running product.
    let mut elements = dims.first().copied().unwrap_or(1);
    for &d in dims.iter().skip(1) {
        if d > 1 && (i64::MAX as u64) / d < elements {
            return Err(bad(dims, "element count above i64::MAX"));
        }
        elements = elements.saturating_mul(d);
    }

    let id = src.u32()?;
    let ty = GgmlType::from_id(id).ok_or_else(|| GgufError::UnknownTensorType {
        name: name.clone(),
        id,
    })?;
    let ne0 = dims.first().copied().unwrap_or(1);
    if ne0 % ty.block_size() != 0 {
        return Err(GgufError::PartialBlock {
            name,
            ty,
            ne0,
            block: ty.block_size(),
        });
    }
    let bytes = ty
        .tensor_bytes(&dims)
        .ok_or_else(|| overflow(format!("byte size of tensor {name:?}")))?;
    let offset = src.u64()?;
    Ok(TensorInfo {
        name,
        dims,
        ty,
        offset,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, offset: u64, bytes: u64) -> TensorInfo {
        TensorInfo {
            name: name.into(),
            dims: vec![bytes],
            ty: GgmlType::I8,
            offset,
            bytes,
        }
    }

    #[test]
    fn offsets_pack_like_gguf_cpp() {
        // Zero-byte tensors take no room: the next one starts at the same offset.
        let ok = [t("a", 0, 0), t("b", 0, 33), t("c", 64, 1)];
        assert!(check_offsets(&ok, 32, 96).is_ok());
        let gap = [t("a", 0, 1), t("b", 64, 1)];
        assert!(matches!(
            check_offsets(&gap, 32, 32),
            Err(GgufError::UnexpectedTensorOffset {
                offset: 64,
                expected: 32,
                ..
            })
        ));
        let end = [t("a", 0, u64::MAX - 5)];
        assert!(matches!(
            check_offsets(&end, 32, 0),
            Err(GgufError::Overflow { .. })
        ));
        let past = [t("a", 0, 1 << 62)];
        assert!(matches!(
            check_offsets(&past, 1, u64::MAX - 5),
            Err(GgufError::Overflow { .. })
        ));
    }
}
