//! Property tests for the GGUF size arithmetic: tensor byte sizes and the
//! data-section layout, on shapes up to 2^64, against a reference computed in
//! `u128`. Tests run in the release profile, where an overflow would wrap
//! silently instead of panicking, so every size is compared with the exact
//! value: a header is accepted exactly when all its sizes fit, and then with
//! the exact sizes.

use headroom_planner::gguf::writer::HeaderBuilder;
use headroom_planner::gguf::{GgmlType, Header};
use proptest::prelude::*;

/// Dimensions around every boundary the arithmetic has: 0 and 1 (which reset
/// or keep gguf.cpp's running element count), block multiples, 2^32,
/// i64::MAX (llama.cpp's int64 limit), 2^63 and u64::MAX.
fn dim() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => 0..1024u64,
        1 => prop::sample::select(vec![
            0,
            1,
            256,
            (1 << 31) - 256,
            1 << 32,
            (1 << 32) + 256,
            1 << 40,
            1 << 62,
            (i64::MAX as u64) - 255,
            i64::MAX as u64,
            1 << 63,
            u64::MAX - 255,
            u64::MAX,
        ]),
        1 => any::<u64>(),
    ]
}

/// Up to 4 dims (ggml's limit); the first is often a whole number of blocks
/// so that most shapes get past the block check to the size arithmetic.
fn shape() -> impl Strategy<Value = (Vec<u64>, GgmlType)> {
    (
        prop::sample::select(GgmlType::ALL),
        prop::collection::vec(dim(), 0..=4),
        any::<bool>(),
    )
        .prop_map(|(ty, mut dims, whole_blocks)| {
            if whole_blocks && let Some(d0) = dims.first_mut() {
                *d0 -= *d0 % ty.block_size();
            }
            (dims, ty)
        })
}

/// `ggml_nbytes` in `u128`: `None` if the row is not whole blocks; products
/// past `u128` (four dims near 2^64) saturate, which is still past `u64`.
fn exact_bytes(ty: GgmlType, dims: &[u64]) -> Option<u128> {
    let ne0 = dims.first().copied().unwrap_or(1);
    if ne0 % ty.block_size() != 0 {
        return None;
    }
    if dims.contains(&0) {
        return Some(0);
    }
    let row = u128::from(ne0 / ty.block_size()) * u128::from(ty.type_size());
    Some(
        dims.iter()
            .skip(1)
            .fold(row, |acc, &d| acc.saturating_mul(u128::from(d))),
    )
}

/// gguf.cpp's shape check: every dim fits int64, and so does the element
/// count up to the first zero dim (which resets its running product).
fn shape_accepted(dims: &[u64]) -> bool {
    let max = i64::MAX as u128;
    dims.iter().all(|&d| u128::from(d) <= max)
        && dims
            .iter()
            .take_while(|&&d| d != 0)
            .try_fold(1u128, |acc, &d| {
                let next = acc.saturating_mul(u128::from(d));
                (next <= max).then_some(next)
            })
            .is_some()
}

fn align_up(n: u128, align: u128) -> u128 {
    n.div_ceil(align) * align
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn tensor_bytes_is_exact_or_none((dims, ty) in shape()) {
        let exact = exact_bytes(ty, &dims).filter(|&b| b <= u128::from(u64::MAX));
        prop_assert_eq!(ty.tensor_bytes(&dims).map(u128::from), exact);
        let ne0 = dims.first().copied().unwrap_or(1);
        let row = exact_bytes(ty, &[ne0]).filter(|&b| b <= u128::from(u64::MAX));
        prop_assert_eq!(ty.row_bytes(ne0).map(u128::from), row);
    }

    /// The reader accepts a header exactly when every shape is one llama.cpp
    /// takes and the packed data section is addressable in `u64`; then each
    /// tensor's size and offset are the exact ones.
    #[test]
    fn data_layout_is_exact_or_refused(
        shapes in prop::collection::vec(shape(), 1..4),
        alignment in prop::sample::select(vec![1u32, 32, 4096]),
    ) {
        let mut b = HeaderBuilder::new().kv("general.alignment", alignment);
        for (i, (dims, ty)) in shapes.iter().enumerate() {
            b = b.tensor(format!("t{i}"), dims, *ty);
        }
        let result = b.build();

        let align = u128::from(alignment);
        // (bytes, offset) per tensor, and the data section's end, exactly.
        let mut layout = Vec::new();
        let mut end = 0u128;
        let mut valid = true;
        for (dims, ty) in &shapes {
            match exact_bytes(*ty, dims) {
                Some(bytes) if shape_accepted(dims) && bytes <= u128::from(u64::MAX) => {
                    layout.push((bytes, end));
                    end += align_up(bytes, align);
                }
                _ => valid = false,
            }
        }
        match result {
            Ok(Header { tensors, data_offset, .. }) => {
                prop_assert!(valid, "accepted shapes {:?}", shapes);
                prop_assert!(u128::from(data_offset) + end <= u128::from(u64::MAX));
                for (t, (bytes, offset)) in tensors.iter().zip(&layout) {
                    prop_assert_eq!(u128::from(t.bytes), *bytes);
                    prop_assert_eq!(u128::from(t.offset), *offset);
                }
            }
            Err(e) => {
                // The header itself is a few hundred bytes: a data section
                // that fits in u64 with room for it must have been accepted.
                let fits = end + 4096 + align <= u128::from(u64::MAX);
                prop_assert!(!valid || !fits, "refused {:?}: {}", shapes, e);
            }
        }
    }
}
