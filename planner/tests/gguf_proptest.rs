//! Property tests for the GGUF reader and writer: random headers round-trip,
//! every prefix of a header is `Truncated`, and corrupted headers give an
//! error or a header but never a panic.

use std::collections::BTreeMap;

use headroom_planner::gguf::writer::{HeaderBuilder, to_bytes};
use headroom_planner::gguf::{
    Array, ArrayItems, GgmlType, GgufError, Header, Value, parse_header, read_header,
};
use proptest::num::{f32 as pf32, f64 as pf64};
use proptest::prelude::*;

/// Floats without NaN, which is never equal to itself.
fn float32() -> impl Strategy<Value = f32> {
    pf32::POSITIVE | pf32::NEGATIVE | pf32::NORMAL | pf32::SUBNORMAL | pf32::ZERO | pf32::INFINITE
}

fn float64() -> impl Strategy<Value = f64> {
    pf64::POSITIVE | pf64::NEGATIVE | pf64::NORMAL | pf64::SUBNORMAL | pf64::ZERO | pf64::INFINITE
}

/// Flat arrays, short enough to be kept by the default limits.
fn flat_array() -> impl Strategy<Value = Array> {
    let n = 0..6usize;
    prop_oneof![
        prop::collection::vec(any::<u8>(), n.clone()).prop_map(ArrayItems::U8),
        prop::collection::vec(any::<i8>(), n.clone()).prop_map(ArrayItems::I8),
        prop::collection::vec(any::<u16>(), n.clone()).prop_map(ArrayItems::U16),
        prop::collection::vec(any::<i16>(), n.clone()).prop_map(ArrayItems::I16),
        prop::collection::vec(any::<u32>(), n.clone()).prop_map(ArrayItems::U32),
        prop::collection::vec(any::<i32>(), n.clone()).prop_map(ArrayItems::I32),
        prop::collection::vec(any::<u64>(), n.clone()).prop_map(ArrayItems::U64),
        prop::collection::vec(any::<i64>(), n.clone()).prop_map(ArrayItems::I64),
        prop::collection::vec(float32(), n.clone()).prop_map(ArrayItems::F32),
        prop::collection::vec(float64(), n.clone()).prop_map(ArrayItems::F64),
        prop::collection::vec(any::<bool>(), n.clone()).prop_map(ArrayItems::Bool),
        prop::collection::vec(".{0,12}", n).prop_map(ArrayItems::String),
    ]
    .prop_map(Array::new)
}

/// Arrays nested up to three levels.
fn array() -> impl Strategy<Value = Array> {
    flat_array().prop_recursive(3, 24, 4, |inner| {
        prop::collection::vec(inner, 0..4).prop_map(|v| Array::new(ArrayItems::Array(v)))
    })
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u8>().prop_map(Value::U8),
        any::<i8>().prop_map(Value::I8),
        any::<u16>().prop_map(Value::U16),
        any::<i16>().prop_map(Value::I16),
        any::<u32>().prop_map(Value::U32),
        any::<i32>().prop_map(Value::I32),
        any::<u64>().prop_map(Value::U64),
        any::<i64>().prop_map(Value::I64),
        float32().prop_map(Value::F32),
        float64().prop_map(Value::F64),
        any::<bool>().prop_map(Value::Bool),
        ".{0,40}".prop_map(Value::String),
        array().prop_map(Value::Array),
    ]
}

/// A tensor shape valid for `ty`: 0 to 4 dims, rows a whole number of blocks.
fn tensor() -> impl Strategy<Value = (Vec<u64>, GgmlType)> {
    (
        prop::sample::select(GgmlType::ALL),
        0..4u64,
        prop::collection::vec(0..5u64, 0..4),
    )
        .prop_map(|(ty, blocks, rest)| {
            let mut dims = vec![blocks * ty.block_size()];
            dims.extend(rest);
            (dims, ty)
        })
}

fn header() -> impl Strategy<Value = Header> {
    let metadata = prop::collection::btree_map("[a-z_.]{1,24}", value(), 0..8);
    let tensors = prop::collection::btree_map("[a-z0-9_.]{1,63}", tensor(), 0..6);
    let alignment = prop::sample::select(vec![
        None,
        Some(1u32),
        Some(8),
        Some(32),
        Some(64),
        Some(4096),
    ]);
    (metadata, tensors, alignment, prop::bool::ANY).prop_map(
        |(metadata, tensors, alignment, v2): (
            BTreeMap<String, Value>,
            BTreeMap<String, _>,
            _,
            _,
        )| {
            let mut b = HeaderBuilder::new().version(if v2 { 2 } else { 3 });
            if let Some(a) = alignment {
                b = b.kv("general.alignment", a);
            }
            for (k, v) in metadata
                .into_iter()
                .filter(|(k, _)| k != "general.alignment")
            {
                b = b.kv(k, v);
            }
            for (name, (dims, ty)) in tensors {
                b = b.tensor(name, &dims, ty);
            }
            b.build().expect("generated headers are valid")
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn round_trip(h in header()) {
        let bytes = to_bytes(&h).expect("serializes");
        prop_assert_eq!(bytes.len() as u64 % h.alignment, 0);
        prop_assert_eq!(&parse_header(&bytes).expect("parses"), &h);
        prop_assert_eq!(&read_header(&bytes[..]).expect("streams"), &h);
        for t in &h.tensors {
            prop_assert_eq!(Some(t.bytes), t.ty.tensor_bytes(&t.dims));
            prop_assert_eq!(t.offset % h.alignment, 0);
        }
    }

    #[test]
    fn every_truncation_is_an_error(h in header()) {
        let bytes = to_bytes(&h).expect("serializes");
        for len in 0..h.header_bytes as usize {
            match parse_header(&bytes[..len]) {
                Err(GgufError::Truncated { needed, have }) => {
                    prop_assert_eq!(have, len as u64);
                    prop_assert!(needed > have && needed <= h.header_bytes);
                }
                other => prop_assert!(false, "prefix {} gave {:?}", len, other),
            }
        }
    }

    #[test]
    fn corrupted_headers_never_panic(
        h in header(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = to_bytes(&h).expect("serializes");
        for (at, byte) in edits {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        let from_slice = parse_header(&bytes);
        let from_stream = read_header(&bytes[..]);
        // Both readers must agree on success and on the header. Compared
        // as printed: a corrupted float can be NaN, which is never equal to
        // itself, though both readers read the same bits.
        prop_assert_eq!(
            format!("{:?}", from_slice.as_ref().ok()),
            format!("{:?}", from_stream.as_ref().ok())
        );
    }

    #[test]
    fn random_bytes_never_panic(tail in prop::collection::vec(any::<u8>(), 0..512)) {
        let mut bytes = b"GGUF\x03\0\0\0".to_vec();
        bytes.extend(tail);
        let from_slice = parse_header(&bytes);
        let from_stream = read_header(&bytes[..]);
        if let Ok(h) = &from_slice {
            prop_assert!(h.header_bytes <= bytes.len() as u64);
        }
        prop_assert_eq!(from_slice.as_ref().ok(), from_stream.as_ref().ok());
    }
}
