//! Parsing of metadata values, arrays included, for the header reader.
//!
//! Arrays are where hostile files hide their largest counts, so this is where
//! the keep-or-skip decisions live: small arrays are stored typed, large ones
//! are read past without allocation (fixed-size elements in one arithmetic
//! skip), and nested arrays use an explicit stack instead of recursion.

use super::error::GgufError;
use super::reader::{MAX_ARRAY_LEN, MAX_STRING_LEN, ParseLimits, too_large};
use super::source::Source;
use super::value::{Array, ArrayItems, Value, ValueType};

/// A length-prefixed string value; invalid UTF-8 is replaced, not refused,
/// because llama.cpp loads such files.
fn read_lossy_string<S: Source>(src: &mut S, cap: u64, key: &str) -> Result<String, GgufError> {
    let len = src.u64()?;
    too_large(|| format!("string length in key {key:?}"), len, cap)?;
    src.with_bytes(len, |b| String::from_utf8_lossy(b).into_owned())
}

/// A value type tag.
pub(super) fn read_value_type<S: Source>(src: &mut S, key: &str) -> Result<ValueType, GgufError> {
    let id = src.u32()?;
    ValueType::from_id(id).ok_or_else(|| GgufError::UnknownValueType {
        key: key.to_owned(),
        id,
    })
}

/// One metadata value of type `ty` (already read).
pub(super) fn read_value<S: Source>(
    src: &mut S,
    ty: ValueType,
    key: &str,
    limits: &ParseLimits,
) -> Result<Value, GgufError> {
    let mut b = [0u8; 8];
    if let Some(size) = ty.fixed_size() {
        // Sizes are 1, 2, 4 or 8.
        src.read_exact(&mut b[..size as usize])?;
    }
    let [b0, b1, b2, b3, ..] = b;
    Ok(match ty {
        ValueType::U8 => Value::U8(b0),
        ValueType::I8 => Value::I8(i8::from_le_bytes([b0])),
        ValueType::Bool => Value::Bool(b0 != 0),
        ValueType::U16 => Value::U16(u16::from_le_bytes([b0, b1])),
        ValueType::I16 => Value::I16(i16::from_le_bytes([b0, b1])),
        ValueType::U32 => Value::U32(u32::from_le_bytes([b0, b1, b2, b3])),
        ValueType::I32 => Value::I32(i32::from_le_bytes([b0, b1, b2, b3])),
        ValueType::F32 => Value::F32(f32::from_le_bytes([b0, b1, b2, b3])),
        ValueType::U64 => Value::U64(u64::from_le_bytes(b)),
        ValueType::I64 => Value::I64(i64::from_le_bytes(b)),
        ValueType::F64 => Value::F64(f64::from_le_bytes(b)),
        ValueType::String => Value::String(read_lossy_string(src, limits.max_string_len, key)?),
        ValueType::Array => Value::Array(read_array(src, key, limits)?),
    })
}

/// An array being read, one per nesting level.
struct Frame {
    elem: ValueType,
    len: u64,
    done: u64,
    /// The inner arrays so far, or `None` when this level is not kept.
    kept: Option<Vec<Array>>,
}

/// An array value (its type tag already read), nested arrays included,
/// without recursion: each level is a `Frame` on a heap stack, and each level
/// consumes at least 12 input bytes, so depth is bounded by the input.
fn read_array<S: Source>(src: &mut S, key: &str, limits: &ParseLimits) -> Result<Array, GgufError> {
    let mut stack: Vec<Frame> = Vec::new();
    loop {
        // Read the next array head: the outermost one, or the next element
        // of the array on top of the stack.
        let keep = match stack.last() {
            None => true,
            Some(f) => f.kept.is_some(),
        };
        let elem = read_value_type(src, key)?;
        let len = src.u64()?;
        too_large(
            || format!("array length in key {key:?}"),
            len,
            MAX_ARRAY_LEN,
        )?;
        let mut done = if elem == ValueType::Array {
            let depth = u32::try_from(stack.len()).unwrap_or(u32::MAX);
            let keep_level =
                keep && depth < limits.max_kept_depth && len <= limits.max_kept_strings;
            stack.push(Frame {
                elem,
                len,
                done: 0,
                kept: keep_level.then(Vec::new),
            });
            None
        } else {
            Some(read_flat_array(src, elem, len, keep, key, limits)?)
        };
        // Close every level the array just read completes.
        loop {
            if done.is_none() && stack.last().is_some_and(|f| f.done == f.len) {
                done = stack.pop().map(|f| match f.kept {
                    Some(items) => Array::new(ArrayItems::Array(items)),
                    None => Array::skipped(f.elem, f.len),
                });
            }
            let Some(arr) = done.take() else { break };
            match stack.last_mut() {
                None => return Ok(arr),
                Some(parent) => {
                    parent.done += 1;
                    if let Some(items) = &mut parent.kept {
                        items.push(arr);
                    }
                }
            }
        }
    }
}

/// An array of non-array elements, kept when small enough and `keep`.
fn read_flat_array<S: Source>(
    src: &mut S,
    elem: ValueType,
    len: u64,
    keep: bool,
    key: &str,
    limits: &ParseLimits,
) -> Result<Array, GgufError> {
    let Some(size) = elem.fixed_size() else {
        // Strings: each is read (or skipped) in turn; each needs >= 8 bytes,
        // so the loop is bounded by the input.
        if keep && len <= limits.max_kept_strings {
            let mut items = Vec::new();
            for _ in 0..len {
                items.push(read_lossy_string(src, limits.max_string_len, key)?);
            }
            return Ok(Array::new(ArrayItems::String(items)));
        }
        for _ in 0..len {
            let n = src.u64()?;
            too_large(
                || format!("string length in key {key:?}"),
                n,
                MAX_STRING_LEN,
            )?;
            src.skip(n)?;
        }
        return Ok(Array::skipped(elem, len));
    };
    // len <= 2^30 and size <= 8: no overflow.
    let bytes = len * size;
    if !(keep && len <= limits.max_kept_numbers) {
        src.skip(bytes)?;
        return Ok(Array::skipped(elem, len));
    }
    fn le<const N: usize, T>(b: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
        b.chunks_exact(N)
            .map(|c| {
                let mut a = [0u8; N];
                a.copy_from_slice(c);
                f(a)
            })
            .collect()
    }
    let items = src.with_bytes(bytes, |b| match elem {
        ValueType::U8 => ArrayItems::U8(b.to_vec()),
        ValueType::I8 => ArrayItems::I8(le(b, i8::from_le_bytes)),
        ValueType::Bool => ArrayItems::Bool(b.iter().map(|&x| x != 0).collect()),
        ValueType::U16 => ArrayItems::U16(le(b, u16::from_le_bytes)),
        ValueType::I16 => ArrayItems::I16(le(b, i16::from_le_bytes)),
        ValueType::U32 => ArrayItems::U32(le(b, u32::from_le_bytes)),
        ValueType::I32 => ArrayItems::I32(le(b, i32::from_le_bytes)),
        ValueType::F32 => ArrayItems::F32(le(b, f32::from_le_bytes)),
        ValueType::U64 => ArrayItems::U64(le(b, u64::from_le_bytes)),
        ValueType::I64 => ArrayItems::I64(le(b, i64::from_le_bytes)),
        ValueType::F64 => ArrayItems::F64(le(b, f64::from_le_bytes)),
        // fixed_size() is None for these two, handled above.
        ValueType::String | ValueType::Array => ArrayItems::Skipped,
    })?;
    Ok(Array::new(items))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::source::SliceSource;

    fn small() -> ParseLimits {
        ParseLimits {
            max_key_len: 16,
            max_string_len: 4,
            max_kept_numbers: 3,
            max_kept_strings: 2,
            max_kept_depth: 1,
        }
    }

    /// An array value (after its `9` tag): element type, length, payload.
    fn array_bytes(elem: u32, len: u64, payload: &[u8]) -> Vec<u8> {
        let mut b = elem.to_le_bytes().to_vec();
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(payload);
        b
    }

    fn strings(items: &[&str]) -> Vec<u8> {
        items
            .iter()
            .flat_map(|s| (s.len() as u64).to_le_bytes().into_iter().chain(s.bytes()))
            .collect()
    }

    fn read(bytes: &[u8]) -> Result<(Array, u64), GgufError> {
        let mut src = SliceSource::new(bytes);
        let v = read_value(&mut src, ValueType::Array, "k", &small())?;
        let a = v
            .as_array()
            .cloned()
            .ok_or(GgufError::EmptyKey { index: 0 })?;
        Ok((a, src.pos()))
    }

    #[test]
    fn numeric_arrays_kept_up_to_the_cap() -> Result<(), GgufError> {
        let (a, _) = read(&array_bytes(
            5,
            3,
            &[1, 0, 0, 0, 255, 255, 255, 255, 7, 0, 0, 0],
        ))?;
        assert_eq!(a.items(), &ArrayItems::I32(vec![1, -1, 7]));
        let (a, end) = read(&array_bytes(6, 4, &[0; 16]))?;
        assert!(a.is_skipped() && a.len() == 4 && a.elem_type() == ValueType::F32);
        assert_eq!(end, 12 + 16);
        let (a, _) = read(&array_bytes(7, 3, &[0, 2, 255]))?;
        assert_eq!(a.as_bools(), Some(&[false, true, true][..]));
        Ok(())
    }

    #[test]
    fn string_arrays_kept_up_to_the_cap() -> Result<(), GgufError> {
        let (a, _) = read(&array_bytes(8, 2, &strings(&["ab", ""])))?;
        assert_eq!(a.as_strings(), Some(&["ab".to_owned(), String::new()][..]));
        // Skipped strings may exceed the kept-string limit.
        let payload = strings(&["a", "bcdefgh", "c"]);
        let (a, end) = read(&array_bytes(8, 3, &payload))?;
        assert!(a.is_skipped() && a.len() == 3);
        assert_eq!(end, 12 + payload.len() as u64);
        let r = read(&array_bytes(8, 1, &strings(&["toolong"])));
        assert!(matches!(r, Err(GgufError::TooLarge { len: 7, cap: 4, .. })));
        let r = read(&array_bytes(8, 3, &(1u64 << 31).to_le_bytes()));
        assert!(matches!(
            r,
            Err(GgufError::TooLarge {
                cap: MAX_STRING_LEN,
                ..
            })
        ));
        Ok(())
    }

    #[test]
    fn nesting_beyond_keep_depth_is_counted_only() -> Result<(), GgufError> {
        // [[[u8; 1]], []]: depth 0 kept, depth 1 skipped by max_kept_depth 1.
        let mut payload = array_bytes(9, 1, &array_bytes(0, 1, &[5]));
        payload.extend(array_bytes(9, 0, &[]));
        let (a, end) = read(&array_bytes(9, 2, &payload))?;
        let ArrayItems::Array(inner) = a.items() else {
            panic!("outer level is kept: {a:?}")
        };
        assert_eq!(inner.len(), 2);
        assert!(inner[0].is_skipped() && inner[0].len() == 1);
        assert!(inner[1].is_skipped() && inner[1].is_empty());
        assert_eq!(end, 12 + payload.len() as u64);
        // Too many inner arrays to keep: the outer level is skipped too.
        let three = [
            array_bytes(0, 0, &[]),
            array_bytes(0, 0, &[]),
            array_bytes(0, 0, &[]),
        ];
        let (a, _) = read(&array_bytes(9, 3, &three.concat()))?;
        assert!(a.is_skipped() && a.len() == 3);
        Ok(())
    }
}
