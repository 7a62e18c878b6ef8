//! The parsed GGUF header: metadata, tensor infos and layout facts.
//!
//! This is everything the planner ever learns about a model; the tensor data
//! itself is never read. Lookup helpers accept the integer widths different
//! converters use for the same key, so callers need not care.

use super::types::GgmlType;
use super::value::{Array, Value};

/// One tensor as described in the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Tensor name (`blk.0.attn_q.weight`), under 64 bytes.
    pub name: String,
    /// Dimensions as stored, innermost (row length) first; at most 4.
    pub dims: Vec<u64>,
    /// Element type.
    pub ty: GgmlType,
    /// Offset of the data relative to the start of the data section.
    pub offset: u64,
    /// Size of the data in bytes (`ggml_nbytes`).
    pub bytes: u64,
}

impl TensorInfo {
    /// Number of elements (1 for a tensor with no dimensions); `None` on
    /// overflow, which a parsed header never has.
    pub fn n_elements(&self) -> Option<u64> {
        self.dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
    }
}

/// A parsed GGUF header.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// GGUF version (2 or 3).
    pub version: u32,
    /// Data alignment: `general.alignment`, or 32.
    pub alignment: u64,
    /// Metadata in file order; keys are unique.
    pub metadata: Vec<(String, Value)>,
    /// Tensor infos in file order; names are unique.
    pub tensors: Vec<TensorInfo>,
    /// File offset where tensor data starts: `header_bytes` rounded up to
    /// `alignment` (left unrounded when there are no tensors, as gguf.cpp does).
    pub data_offset: u64,
    /// Bytes the header itself occupies, before padding.
    pub header_bytes: u64,
}

impl Header {
    /// The value stored under `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The string stored under `key`.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key)?.as_str()
    }

    /// The integer stored under `key`, whatever its width, if not negative.
    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key)?.as_u64()
    }

    /// The integer stored under `key`, whatever its width, if it fits `i64`.
    pub fn get_i64(&self, key: &str) -> Option<i64> {
        self.get(key)?.as_i64()
    }

    /// The number stored under `key`, whatever its type.
    pub fn get_f64(&self, key: &str) -> Option<f64> {
        self.get(key)?.as_f64()
    }

    /// The bool stored under `key`.
    pub fn get_bool(&self, key: &str) -> Option<bool> {
        self.get(key)?.as_bool()
    }

    /// The array stored under `key`.
    pub fn get_array(&self, key: &str) -> Option<&Array> {
        self.get(key)?.as_array()
    }

    /// The kept integer array under `key` as `u64`s (per-layer head counts,
    /// sliding-window patterns). `None` for scalars, skipped arrays and
    /// arrays holding negative or non-integer values.
    pub fn get_u64_array(&self, key: &str) -> Option<Vec<u64>> {
        self.get_array(key)?.to_u64_vec()
    }

    /// The kept bool array under `key` (e.g. per-layer sliding-window flags).
    pub fn get_bool_array(&self, key: &str) -> Option<Vec<bool>> {
        self.get_array(key)?.as_bools().map(<[bool]>::to_vec)
    }

    /// The kept numeric array under `key` as `f64`s.
    pub fn get_f64_array(&self, key: &str) -> Option<Vec<f64>> {
        self.get_array(key)?.to_f64_vec()
    }

    /// The length of the array under `key`, kept or skipped (e.g. the
    /// vocabulary size from `tokenizer.ggml.tokens`).
    pub fn array_len(&self, key: &str) -> Option<u64> {
        Some(self.get_array(key)?.len())
    }

    /// `general.architecture` (`"llama"`, `"gemma3"`, ...).
    pub fn architecture(&self) -> Option<&str> {
        self.get_str("general.architecture")
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Sum of all tensors' data bytes (without padding); `None` on overflow.
    pub fn total_tensor_bytes(&self) -> Option<u64> {
        self.tensors
            .iter()
            .try_fold(0u64, |acc, t| acc.checked_add(t.bytes))
    }

    /// Size of the data section as gguf.cpp computes it: every tensor's
    /// bytes rounded up to the alignment, summed. `None` on overflow or a
    /// zero alignment.
    pub fn data_size(&self) -> Option<u64> {
        self.tensors.iter().try_fold(0u64, |acc, t| {
            acc.checked_add(align_up(t.bytes, self.alignment)?)
        })
    }

    /// The smallest file length llama.cpp's loader accepts: the end of the
    /// furthest tensor's data (`data_offset` when there are none).
    pub fn min_file_len(&self) -> Option<u64> {
        self.tensors.iter().try_fold(self.data_offset, |acc, t| {
            let end = self
                .data_offset
                .checked_add(t.offset)?
                .checked_add(t.bytes)?;
            Some(acc.max(end))
        })
    }

    /// The first key holding an array of arrays: legal GGUF that this reader
    /// parses, but that llama.cpp's gguf.cpp refuses to load.
    pub fn nested_array_key(&self) -> Option<&str> {
        self.metadata.iter().find_map(|(k, v)| {
            let a = v.as_array()?;
            (a.elem_type() == super::value::ValueType::Array).then_some(k.as_str())
        })
    }
}

/// `n` rounded up to a multiple of `align`; `None` on overflow or zero align.
pub(crate) fn align_up(n: u64, align: u64) -> Option<u64> {
    let rem = n.checked_rem(align)?;
    if rem == 0 {
        Some(n)
    } else {
        n.checked_add(align - rem)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::value::{ArrayItems, ValueType};

    fn sample() -> Header {
        Header {
            version: 3,
            alignment: 32,
            metadata: vec![
                ("general.architecture".into(), Value::from("llama")),
                ("llama.block_count".into(), Value::U32(2)),
                ("llama.rope.freq_base".into(), Value::F32(10000.0)),
                ("neg".into(), Value::I32(-4)),
                ("flag".into(), Value::Bool(true)),
                (
                    "llama.attention.head_count_kv".into(),
                    Value::Array(Array::new(ArrayItems::I32(vec![8, 4]))),
                ),
                (
                    "swa".into(),
                    Value::Array(Array::new(ArrayItems::Bool(vec![true, false]))),
                ),
                (
                    "tokenizer.ggml.tokens".into(),
                    Value::Array(Array::skipped(ValueType::String, 32000)),
                ),
            ],
            tensors: vec![
                TensorInfo {
                    name: "a".into(),
                    dims: vec![10],
                    ty: GgmlType::F32,
                    offset: 0,
                    bytes: 40,
                },
                TensorInfo {
                    name: "b".into(),
                    dims: vec![2, 3],
                    ty: GgmlType::F16,
                    offset: 64,
                    bytes: 12,
                },
            ],
            data_offset: 96,
            header_bytes: 90,
        }
    }

    #[test]
    fn lookups_convert_widths() {
        let h = sample();
        assert_eq!(h.architecture(), Some("llama"));
        assert_eq!(h.get_u64("llama.block_count"), Some(2));
        assert_eq!(h.get_f64("llama.rope.freq_base"), Some(10000.0));
        assert_eq!(h.get_u64("neg"), None);
        assert_eq!(h.get_i64("neg"), Some(-4));
        assert_eq!(h.get_bool("flag"), Some(true));
        assert_eq!(
            h.get_u64_array("llama.attention.head_count_kv"),
            Some(vec![8, 4])
        );
        assert_eq!(h.get_u64_array("llama.block_count"), None);
        assert_eq!(h.get_bool_array("swa"), Some(vec![true, false]));
        assert_eq!(h.get_bool_array("llama.attention.head_count_kv"), None);
        assert_eq!(h.array_len("tokenizer.ggml.tokens"), Some(32000));
        assert_eq!(h.get_u64_array("tokenizer.ggml.tokens"), None);
        assert_eq!(h.get("missing"), None);
        assert_eq!(h.nested_array_key(), None);
    }

    #[test]
    fn layout_sums() {
        let h = sample();
        assert_eq!(h.tensor("b").map(|t| t.bytes), Some(12));
        assert_eq!(h.total_tensor_bytes(), Some(52));
        assert_eq!(h.data_size(), Some(64 + 32));
        assert_eq!(h.min_file_len(), Some(96 + 64 + 12));
        assert_eq!(h.tensors[1].n_elements(), Some(6));
    }

    #[test]
    fn align_up_is_checked() {
        assert_eq!(align_up(0, 32), Some(0));
        assert_eq!(align_up(33, 32), Some(64));
        assert_eq!(align_up(64, 32), Some(64));
        assert_eq!(align_up(u64::MAX, 32), None);
        assert_eq!(align_up(5, 0), None);
    }
}
