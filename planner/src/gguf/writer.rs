//! Writes GGUF v3 headers: synthetic models, fuzz corpora and test fixtures.
//!
//! [`HeaderBuilder`] lays tensors out the way gguf.cpp does (packed in order,
//! each padded to the alignment) and returns the [`Header`] the reader will
//! parse back from the bytes, so `parse_header(&to_bytes(&h)?)? == h` holds
//! whenever every array is within the reader's default keep limits.
//! [`write_header`] and [`to_bytes`] serialize any `Header` as given, valid or
//! not, which is how hostile-input tests build broken files.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use super::error::GgufError;
use super::header::{Header, TensorInfo, align_up};
use super::reader::{DEFAULT_ALIGNMENT, ParseLimits, parse_header_with};
use super::types::GgmlType;
use super::value::{Array, ArrayItems, Value};

/// Collects metadata and tensor shapes, then computes a consistent header.
#[derive(Debug, Clone)]
pub struct HeaderBuilder {
    version: u32,
    metadata: Vec<(String, Value)>,
    tensors: Vec<(String, Vec<u64>, GgmlType)>,
}

impl Default for HeaderBuilder {
    fn default() -> Self {
        HeaderBuilder {
            version: 3,
            metadata: Vec::new(),
            tensors: Vec::new(),
        }
    }
}

impl HeaderBuilder {
    /// An empty GGUF v3 header.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the GGUF version (2 or 3; others fail in [`build`](Self::build)).
    pub fn version(mut self, version: u32) -> Self {
        self.version = version;
        self
    }

    /// Appends a metadata entry. Set `general.alignment` (a `u32`) here to
    /// change the alignment from 32.
    pub fn kv(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.metadata.push((key.into(), value.into()));
        self
    }

    /// Appends a tensor; its offset is computed by `build`.
    pub fn tensor(mut self, name: impl Into<String>, dims: &[u64], ty: GgmlType) -> Self {
        self.tensors.push((name.into(), dims.to_vec(), ty));
        self
    }

    /// Lays out the tensors and returns the header exactly as the reader
    /// will see it, or the error the reader would give for it (duplicate
    /// keys, bad shapes, bad alignment, ...).
    pub fn build(self) -> Result<Header, GgufError> {
        let alignment = match self.metadata.iter().find(|(k, _)| k == "general.alignment") {
            Some((_, Value::U32(a))) if a.is_power_of_two() => u64::from(*a),
            // A bad alignment is reported by the parse below.
            _ => DEFAULT_ALIGNMENT,
        };
        let mut offset = 0u64;
        let mut tensors = Vec::with_capacity(self.tensors.len());
        for (name, dims, ty) in self.tensors {
            // An unrepresentable shape is reported by the parse below.
            let bytes = ty.tensor_bytes(&dims).unwrap_or(0);
            let next = align_up(bytes, alignment)
                .and_then(|p| offset.checked_add(p))
                .ok_or_else(|| GgufError::Overflow {
                    what: format!("offset after tensor {name:?}"),
                })?;
            tensors.push(TensorInfo {
                name,
                dims,
                ty,
                offset,
                bytes,
            });
            offset = next;
        }
        let draft = Header {
            version: self.version,
            alignment,
            metadata: self.metadata,
            tensors,
            data_offset: 0,
            header_bytes: 0,
        };
        // Parsing our own bytes both validates exactly as the reader does and
        // fills in header_bytes and data_offset.
        parse_header_with(&to_bytes(&draft)?, &ParseLimits::keep_all())
    }
}

/// Serializes `h` as written on disk: the header, then zero padding to
/// `h.alignment` (as gguf.cpp pads, even with no tensors). `header_bytes` and
/// `data_offset` are ignored; offsets and shapes are written as given.
pub fn to_bytes(h: &Header) -> Result<Vec<u8>, GgufError> {
    let mut out = Vec::new();
    out.extend_from_slice(b"GGUF");
    put_u32(&mut out, h.version);
    put_u64(&mut out, h.tensors.len() as u64);
    put_u64(&mut out, h.metadata.len() as u64);
    for (key, value) in &h.metadata {
        put_str(&mut out, key);
        put_u32(&mut out, value.value_type().id());
        put_value(&mut out, value, key)?;
    }
    for t in &h.tensors {
        put_str(&mut out, &t.name);
        put_u32(&mut out, t.dims.len() as u32);
        for &d in &t.dims {
            put_u64(&mut out, d);
        }
        put_u32(&mut out, t.ty.id());
        put_u64(&mut out, t.offset);
    }
    let padded = align_up(out.len() as u64, h.alignment)
        .ok_or(GgufError::BadAlignment { value: h.alignment })?;
    out.resize(padded as usize, 0);
    Ok(out)
}

/// Writes [`to_bytes`]`(h)` to `w`; returns the number of bytes written.
pub fn write_header<W: Write>(h: &Header, mut w: W) -> Result<u64, GgufError> {
    let bytes = to_bytes(h)?;
    w.write_all(&bytes)?;
    w.flush()?;
    Ok(bytes.len() as u64)
}

/// Creates (or truncates) `path` holding the header followed by a sparse,
/// never-written data section as long as gguf.cpp's data size, so the file
/// has a real model's length but costs almost no disk. Returns its length.
pub fn create_sparse_file(path: &Path, h: &Header) -> Result<u64, GgufError> {
    let written = write_header(h, File::create(path)?)?;
    let len = h
        .data_size()
        .and_then(|d| d.checked_add(h.data_offset))
        .ok_or_else(|| GgufError::Overflow {
            what: "file length".into(),
        })?
        .max(written);
    File::options().write(true).open(path)?.set_len(len)?;
    Ok(len)
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &Value, key: &str) -> Result<(), GgufError> {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::String(s) => put_str(out, s),
        Value::Array(a) => put_array(out, a, key)?,
    }
    Ok(())
}

/// Writes an array (type tag already written), nested ones iteratively.
fn put_array(out: &mut Vec<u8>, arr: &Array, key: &str) -> Result<(), GgufError> {
    let mut stack: Vec<std::slice::Iter<'_, Array>> = Vec::new();
    let mut cur = arr;
    loop {
        put_u32(out, cur.elem_type().id());
        put_u64(out, cur.len());
        match cur.items() {
            ArrayItems::Array(inner) => stack.push(inner.iter()),
            ArrayItems::Skipped => {
                return Err(GgufError::SkippedArray {
                    key: key.to_owned(),
                });
            }
            flat => put_flat(out, flat),
        }
        // Move to the next array still to write, closing finished levels.
        cur = loop {
            let Some(level) = stack.last_mut() else {
                return Ok(());
            };
            match level.next() {
                Some(next) => break next,
                None => {
                    stack.pop();
                }
            }
        };
    }
}

fn put_flat(out: &mut Vec<u8>, items: &ArrayItems) {
    macro_rules! le {
        ($v:expr) => {
            for x in $v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match items {
        ArrayItems::U8(v) => out.extend_from_slice(v),
        ArrayItems::I8(v) => le!(v),
        ArrayItems::U16(v) => le!(v),
        ArrayItems::I16(v) => le!(v),
        ArrayItems::U32(v) => le!(v),
        ArrayItems::I32(v) => le!(v),
        ArrayItems::U64(v) => le!(v),
        ArrayItems::I64(v) => le!(v),
        ArrayItems::F32(v) => le!(v),
        ArrayItems::F64(v) => le!(v),
        ArrayItems::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b))),
        ArrayItems::String(v) => v.iter().for_each(|s| put_str(out, s)),
        // Handled by put_array.
        ArrayItems::Array(_) | ArrayItems::Skipped => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{parse_header, read_header, read_header_from_file};

    fn sample() -> Result<Header, GgufError> {
        HeaderBuilder::new()
            .kv("general.architecture", "llama")
            .kv("llama.block_count", 2u32)
            .kv("llama.rope.freq_base", 10000.0f32)
            .kv("general.alignment", 64u32)
            .kv(
                "llama.attention.head_count_kv",
                Array::new(ArrayItems::I32(vec![8, 4])),
            )
            .kv(
                "tokenizer.ggml.tokens",
                Array::new(ArrayItems::String(vec!["<s>".into(), "a".into()])),
            )
            .tensor("token_embd.weight", &[256, 10], GgmlType::Q4_K)
            .tensor("output_norm.weight", &[256], GgmlType::F32)
            .build()
    }

    #[test]
    fn build_lays_out_like_gguf_cpp() -> Result<(), GgufError> {
        let h = sample()?;
        assert_eq!(h.alignment, 64);
        assert_eq!(h.tensors[0].bytes, 1440);
        assert_eq!(h.tensors[1].offset, 1472);
        assert_eq!(h.data_offset % 64, 0);
        assert!(h.data_offset >= h.header_bytes && h.data_offset - h.header_bytes < 64);
        Ok(())
    }

    #[test]
    fn round_trips_through_bytes_stream_and_file() -> Result<(), GgufError> {
        let h = sample()?;
        let bytes = to_bytes(&h)?;
        assert_eq!(bytes.len() as u64, h.data_offset);
        assert_eq!(parse_header(&bytes)?, h);
        assert_eq!(read_header(&bytes[..])?, h);
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("m.gguf");
        let len = create_sparse_file(&path, &h)?;
        assert_eq!(len, h.data_offset + 1472 + 1024);
        assert_eq!(std::fs::metadata(&path)?.len(), len);
        assert_eq!(read_header_from_file(&path)?, h);
        Ok(())
    }

    #[test]
    fn build_reports_reader_errors() {
        let dup = HeaderBuilder::new().kv("a", 1u8).kv("a", 2u8).build();
        assert!(matches!(dup, Err(GgufError::DuplicateKey { key }) if key == "a"));
        let partial = HeaderBuilder::new()
            .tensor("t", &[100], GgmlType::Q4_K)
            .build();
        assert!(matches!(
            partial,
            Err(GgufError::PartialBlock { ne0: 100, .. })
        ));
        let v1 = HeaderBuilder::new().version(1).build();
        assert!(matches!(
            v1,
            Err(GgufError::UnsupportedVersion { version: 1 })
        ));
        let skipped = HeaderBuilder::new()
            .kv("k", Array::skipped(crate::gguf::ValueType::U8, 3))
            .build();
        assert!(matches!(skipped, Err(GgufError::SkippedArray { .. })));
    }

    #[test]
    fn nested_arrays_round_trip() -> Result<(), GgufError> {
        let inner = |v: Vec<u16>| Array::new(ArrayItems::U16(v));
        let nested = Array::new(ArrayItems::Array(vec![
            inner(vec![1, 2]),
            Array::new(ArrayItems::Array(vec![inner(vec![]), inner(vec![3])])),
            Array::new(ArrayItems::Array(vec![])),
        ]));
        let h = HeaderBuilder::new()
            .kv("nested", nested)
            .kv("after", true)
            .build()?;
        assert_eq!(parse_header(&to_bytes(&h)?)?, h);
        assert_eq!(h.nested_array_key(), Some("nested"));
        assert_eq!(h.get_bool("after"), Some(true));
        Ok(())
    }
}
