//! GGUF metadata values: the 13 wire types, scalar values and arrays.
//!
//! Arrays are stored typed (a `Vec<u32>` rather than a `Vec<Value>`) so a
//! per-layer array costs what its numbers cost. Arrays the reader chose not
//! to keep (a 262,144-entry token list, say) keep only their element type and
//! length: the planner needs their size, never their contents.

use std::fmt;

/// The type tag of a GGUF metadata value (`enum gguf_type` in gguf.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueType {
    /// `u8` (id 0).
    U8 = 0,
    /// `i8` (id 1).
    I8 = 1,
    /// `u16` (id 2).
    U16 = 2,
    /// `i16` (id 3).
    I16 = 3,
    /// `u32` (id 4).
    U32 = 4,
    /// `i32` (id 5).
    I32 = 5,
    /// `f32` (id 6).
    F32 = 6,
    /// `bool` stored as one byte (id 7).
    Bool = 7,
    /// Length-prefixed string (id 8).
    String = 8,
    /// Typed array (id 9).
    Array = 9,
    /// `u64` (id 10).
    U64 = 10,
    /// `i64` (id 11).
    I64 = 11,
    /// `f64` (id 12).
    F64 = 12,
}

impl ValueType {
    /// The type with wire id `id`, if it is one of the 13 GGUF types.
    pub fn from_id(id: u32) -> Option<ValueType> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// The wire id.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// Encoded size of one value, or `None` for strings and arrays, whose
    /// size depends on their contents.
    pub fn fixed_size(self) -> Option<u64> {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }

    /// The short name gguf.cpp prints (`"u32"`, `"str"`, `"arr"`).
    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "str",
            Array => "arr",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Unsigned 8-bit integer.
    U8(u8),
    /// Signed 8-bit integer.
    I8(i8),
    /// Unsigned 16-bit integer.
    U16(u16),
    /// Signed 16-bit integer.
    I16(i16),
    /// Unsigned 32-bit integer.
    U32(u32),
    /// Signed 32-bit integer.
    I32(i32),
    /// Unsigned 64-bit integer.
    U64(u64),
    /// Signed 64-bit integer.
    I64(i64),
    /// 32-bit float.
    F32(f32),
    /// 64-bit float.
    F64(f64),
    /// Boolean (any non-zero byte reads as `true`, as in gguf.cpp).
    Bool(bool),
    /// UTF-8 string (invalid UTF-8 in a file is replaced by U+FFFD).
    String(String),
    /// Array of values of one type.
    Array(Array),
}

impl Value {
    /// The wire type of this value.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F32(_) => ValueType::F32,
            Value::F64(_) => ValueType::F64,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
        }
    }

    /// The value as a `u64` if it is an integer of any width that is not
    /// negative (writers disagree on u32 vs i32 vs u64 for counts).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as an `i64` if it is an integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::I8(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::I64(v) => Some(v),
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => i64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as an `f64` if it is any number (integers convert, with
    /// rounding above 2^53).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            // Precision loss above 2^53 is acceptable for hyper-parameters.
            Value::U64(v) => Some(v as f64),
            Value::I64(v) => Some(v as f64),
            _ => self.as_i64().map(|v| v as f64),
        }
    }

    /// The value if it is a bool.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The value if it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value if it is an array.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// Implements `From<$t> for Value` so builders can write `.kv("k", 32u32)`.
macro_rules! value_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value { Value::$v(v) }
        }
    )*};
}
value_from!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32,
    u64 => U64, i64 => I64, f32 => F32, f64 => F64, bool => Bool, String => String, Array => Array);

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::String(v.to_owned())
    }
}

/// The elements of an array, typed, or `Skipped` when the reader read past
/// them without storing them.
#[derive(Debug, Clone, PartialEq)]
pub enum ArrayItems {
    /// `u8` elements.
    U8(Vec<u8>),
    /// `i8` elements.
    I8(Vec<i8>),
    /// `u16` elements.
    U16(Vec<u16>),
    /// `i16` elements.
    I16(Vec<i16>),
    /// `u32` elements.
    U32(Vec<u32>),
    /// `i32` elements.
    I32(Vec<i32>),
    /// `u64` elements.
    U64(Vec<u64>),
    /// `i64` elements.
    I64(Vec<i64>),
    /// `f32` elements.
    F32(Vec<f32>),
    /// `f64` elements.
    F64(Vec<f64>),
    /// `bool` elements.
    Bool(Vec<bool>),
    /// String elements.
    String(Vec<String>),
    /// Nested arrays (legal GGUF, though llama.cpp's gguf.cpp rejects them).
    Array(Vec<Array>),
    /// Not stored: too many elements, or nested too deep, to be worth keeping.
    Skipped,
}

impl ArrayItems {
    /// The element type and count, `None` for `Skipped`.
    fn type_and_len(&self) -> Option<(ValueType, usize)> {
        use ArrayItems as A;
        Some(match self {
            A::U8(v) => (ValueType::U8, v.len()),
            A::I8(v) => (ValueType::I8, v.len()),
            A::U16(v) => (ValueType::U16, v.len()),
            A::I16(v) => (ValueType::I16, v.len()),
            A::U32(v) => (ValueType::U32, v.len()),
            A::I32(v) => (ValueType::I32, v.len()),
            A::U64(v) => (ValueType::U64, v.len()),
            A::I64(v) => (ValueType::I64, v.len()),
            A::F32(v) => (ValueType::F32, v.len()),
            A::F64(v) => (ValueType::F64, v.len()),
            A::Bool(v) => (ValueType::Bool, v.len()),
            A::String(v) => (ValueType::String, v.len()),
            A::Array(v) => (ValueType::Array, v.len()),
            A::Skipped => return None,
        })
    }
}

/// A GGUF array: its element type, its length, and its items when kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    elem: ValueType,
    len: u64,
    items: ArrayItems,
}

impl Array {
    /// An array holding `items`; its type and length come from them.
    /// `ArrayItems::Skipped` gives an empty `u8` array (use
    /// [`Array::skipped`] for a length-only array).
    pub fn new(items: ArrayItems) -> Array {
        match items.type_and_len() {
            // usize always fits in u64 on supported targets.
            Some((elem, len)) => Array {
                elem,
                len: len as u64,
                items,
            },
            None => Array::new(ArrayItems::U8(Vec::new())),
        }
    }

    /// An array whose `len` items of type `elem` were read past, not kept.
    pub fn skipped(elem: ValueType, len: u64) -> Array {
        Array {
            elem,
            len,
            items: ArrayItems::Skipped,
        }
    }

    /// The element type.
    pub fn elem_type(&self) -> ValueType {
        self.elem
    }

    /// The number of elements in the file (also when not kept).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// `true` if the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The items, or `ArrayItems::Skipped`.
    pub fn items(&self) -> &ArrayItems {
        &self.items
    }

    /// `true` if the items were read past without being stored.
    pub fn is_skipped(&self) -> bool {
        matches!(self.items, ArrayItems::Skipped)
    }

    /// The items as `u64`s if they are kept integers, none negative.
    pub fn to_u64_vec(&self) -> Option<Vec<u64>> {
        use ArrayItems as A;
        fn conv<T: Copy>(v: &[T], f: impl Fn(T) -> Option<u64>) -> Option<Vec<u64>> {
            v.iter().map(|&x| f(x)).collect()
        }
        match &self.items {
            A::U8(v) => conv(v, |x| Some(x.into())),
            A::U16(v) => conv(v, |x| Some(x.into())),
            A::U32(v) => conv(v, |x| Some(x.into())),
            A::U64(v) => Some(v.clone()),
            A::I8(v) => conv(v, |x| u64::try_from(x).ok()),
            A::I16(v) => conv(v, |x| u64::try_from(x).ok()),
            A::I32(v) => conv(v, |x| u64::try_from(x).ok()),
            A::I64(v) => conv(v, |x| u64::try_from(x).ok()),
            _ => None,
        }
    }

    /// The items as `f64`s if they are kept numbers of any type.
    pub fn to_f64_vec(&self) -> Option<Vec<f64>> {
        use ArrayItems as A;
        match &self.items {
            A::F32(v) => Some(v.iter().map(|&x| x.into()).collect()),
            A::F64(v) => Some(v.clone()),
            A::I8(v) => Some(v.iter().map(|&x| x.into()).collect()),
            A::I16(v) => Some(v.iter().map(|&x| x.into()).collect()),
            A::I32(v) => Some(v.iter().map(|&x| x.into()).collect()),
            // Precision loss above 2^53 is acceptable for hyper-parameters.
            A::I64(v) => Some(v.iter().map(|&x| x as f64).collect()),
            _ => self
                .to_u64_vec()
                .map(|v| v.into_iter().map(|x| x as f64).collect()),
        }
    }

    /// The items as bools if they are kept bools.
    pub fn as_bools(&self) -> Option<&[bool]> {
        match &self.items {
            ArrayItems::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// The items as strings if they are kept strings.
    pub fn as_strings(&self) -> Option<&[String]> {
        match &self.items {
            ArrayItems::String(v) => Some(v),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_ids_round_trip() {
        for id in 0..13 {
            let t = ValueType::from_id(id).expect("ids 0..13 are defined");
            assert_eq!(t.id(), id);
        }
        assert_eq!(ValueType::from_id(13), None);
        assert_eq!(ValueType::from_id(u32::MAX), None);
        assert_eq!(ValueType::Bool.fixed_size(), Some(1));
        assert_eq!(ValueType::String.fixed_size(), None);
    }

    #[test]
    fn integer_accessors_accept_any_width() {
        assert_eq!(Value::U8(7).as_u64(), Some(7));
        assert_eq!(Value::I32(7).as_u64(), Some(7));
        assert_eq!(Value::I32(-1).as_u64(), None);
        assert_eq!(Value::U64(u64::MAX).as_i64(), None);
        assert_eq!(Value::F32(0.5).as_f64(), Some(0.5));
        assert_eq!(Value::U32(3).as_f64(), Some(3.0));
        assert_eq!(Value::String("x".into()).as_u64(), None);
        assert_eq!(Value::Bool(true).as_u64(), None);
    }

    #[test]
    fn arrays_report_type_and_len() {
        let a = Array::new(ArrayItems::I32(vec![8, -1, 8]));
        assert_eq!((a.elem_type(), a.len()), (ValueType::I32, 3));
        assert_eq!(a.to_u64_vec(), None);
        assert_eq!(a.to_f64_vec(), Some(vec![8.0, -1.0, 8.0]));
        let b = Array::new(ArrayItems::U16(vec![1, 2]));
        assert_eq!(b.to_u64_vec(), Some(vec![1, 2]));
        let s = Array::skipped(ValueType::String, 262_144);
        assert!(s.is_skipped());
        assert_eq!(s.len(), 262_144);
        assert_eq!(s.to_u64_vec(), None);
        assert!(Array::new(ArrayItems::Skipped).is_empty());
    }
}
