//! The ggml tensor type table: ids, names, block sizes and block byte sizes.
//!
//! The planner sizes every weight from `(type, dims)` alone, so this table must
//! agree byte-for-byte with the `type_traits` table in the vendored
//! `ggml/src/ggml.c` and the block structs in `ggml/src/ggml-common.h`. Ids
//! whose support was removed from ggml (4, 5, 31–33, 36–38) are unknown here,
//! exactly as llama.cpp refuses them in GGUF files.

use std::fmt;

/// Declares [`GgmlType`] and its table in one place so the id, name, block
/// size and block bytes of a type can never drift apart.
macro_rules! ggml_types {
    ($( $(#[$doc:meta])* $variant:ident = $id:literal, $name:literal, $blck:literal, $size:literal; )*) => {
        /// A ggml tensor element type, with the numeric id GGUF files store.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum GgmlType {
            $( $(#[$doc])* $variant = $id, )*
        }

        impl GgmlType {
            /// Every known type, in id order.
            pub const ALL: &'static [GgmlType] = &[ $( GgmlType::$variant, )* ];

            /// The type with ggml id `id`, or `None` for ids that are unused
            /// or whose support was removed from ggml.
            pub fn from_id(id: u32) -> Option<GgmlType> {
                match id {
                    $( $id => Some(GgmlType::$variant), )*
                    _ => None,
                }
            }

            /// The upper-case name llama.cpp's tools print (`"Q4_K"`, `"F16"`).
            pub fn name(self) -> &'static str {
                match self { $( GgmlType::$variant => $name, )* }
            }

            /// Elements per quantization block (ggml `blck_size`).
            pub fn block_size(self) -> u64 {
                match self { $( GgmlType::$variant => $blck, )* }
            }

            /// Bytes per quantization block (ggml `type_size`, the size of the
            /// `block_*` struct in `ggml-common.h`).
            pub fn type_size(self) -> u64 {
                match self { $( GgmlType::$variant => $size, )* }
            }
        }
    };
}

// id, CLI name, elements per block, bytes per block. The byte sizes are the
// `static_assert`ed formulas in ggml-common.h evaluated with QK_K = 256 and a
// 2-byte ggml_half.
ggml_types! {
    /// 32-bit IEEE float.
    F32 = 0, "F32", 1, 4;
    /// 16-bit IEEE float.
    F16 = 1, "F16", 1, 2;
    /// 4-bit, 32-element blocks with an f16 scale.
    Q4_0 = 2, "Q4_0", 32, 18;
    /// 4-bit, 32-element blocks with f16 scale and min.
    Q4_1 = 3, "Q4_1", 32, 20;
    /// 5-bit, 32-element blocks with an f16 scale.
    Q5_0 = 6, "Q5_0", 32, 22;
    /// 5-bit, 32-element blocks with f16 scale and min.
    Q5_1 = 7, "Q5_1", 32, 24;
    /// 8-bit, 32-element blocks with an f16 scale.
    Q8_0 = 8, "Q8_0", 32, 34;
    /// 8-bit, 32-element blocks with f16 scale and sum (activations only).
    Q8_1 = 9, "Q8_1", 32, 36;
    /// 2-bit k-quant, 256-element super-blocks.
    Q2_K = 10, "Q2_K", 256, 84;
    /// 3-bit k-quant, 256-element super-blocks.
    Q3_K = 11, "Q3_K", 256, 110;
    /// 4-bit k-quant, 256-element super-blocks.
    Q4_K = 12, "Q4_K", 256, 144;
    /// 5-bit k-quant, 256-element super-blocks.
    Q5_K = 13, "Q5_K", 256, 176;
    /// 6-bit k-quant, 256-element super-blocks.
    Q6_K = 14, "Q6_K", 256, 210;
    /// 8-bit k-quant with f32 scale (intermediate results).
    Q8_K = 15, "Q8_K", 256, 292;
    /// 2.06 bpw i-quant.
    IQ2_XXS = 16, "IQ2_XXS", 256, 66;
    /// 2.31 bpw i-quant.
    IQ2_XS = 17, "IQ2_XS", 256, 74;
    /// 3.06 bpw i-quant.
    IQ3_XXS = 18, "IQ3_XXS", 256, 98;
    /// 1.56 bpw i-quant.
    IQ1_S = 19, "IQ1_S", 256, 50;
    /// 4.5 bpw non-linear quant, 32-element blocks.
    IQ4_NL = 20, "IQ4_NL", 32, 18;
    /// 3.44 bpw i-quant.
    IQ3_S = 21, "IQ3_S", 256, 110;
    /// 2.5 bpw i-quant.
    IQ2_S = 22, "IQ2_S", 256, 82;
    /// 4.25 bpw non-linear quant, 256-element super-blocks.
    IQ4_XS = 23, "IQ4_XS", 256, 136;
    /// 8-bit signed integer.
    I8 = 24, "I8", 1, 1;
    /// 16-bit signed integer.
    I16 = 25, "I16", 1, 2;
    /// 32-bit signed integer.
    I32 = 26, "I32", 1, 4;
    /// 64-bit signed integer.
    I64 = 27, "I64", 1, 8;
    /// 64-bit IEEE float.
    F64 = 28, "F64", 1, 8;
    /// 1.75 bpw i-quant.
    IQ1_M = 29, "IQ1_M", 256, 56;
    /// bfloat16.
    BF16 = 30, "BF16", 1, 2;
    /// Ternary quant, 1.69 bpw.
    TQ1_0 = 34, "TQ1_0", 256, 54;
    /// Ternary quant, 2.06 bpw.
    TQ2_0 = 35, "TQ2_0", 256, 66;
    /// OCP microscaling FP4: 32 E2M1 values and one E8M0 scale.
    MXFP4 = 39, "MXFP4", 32, 17;
    /// NVIDIA FP4: 64 E2M1 values and four UE4M3 sub-block scales.
    NVFP4 = 40, "NVFP4", 64, 36;
    /// 1-bit, 128-element blocks with an f16 scale.
    Q1_0 = 41, "Q1_0", 128, 18;
    /// 2-bit, 64-element blocks with an f16 scale.
    Q2_0 = 42, "Q2_0", 64, 18;
}

impl GgmlType {
    /// The ggml id stored in GGUF tensor infos.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// Parses a type name case-insensitively (`"f16"`, `"q8_0"`, `"BF16"`),
    /// as `--cache-type-k` accepts them.
    pub fn from_name(name: &str) -> Option<GgmlType> {
        GgmlType::ALL
            .iter()
            .copied()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }

    /// `true` for block-quantized types (block size above one element).
    pub fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// Bytes of one contiguous row of `ne0` elements (ggml `ggml_row_size`);
    /// `None` if `ne0` is not a whole number of blocks or the size overflows.
    pub fn row_bytes(self, ne0: u64) -> Option<u64> {
        if !ne0.is_multiple_of(self.block_size()) {
            return None;
        }
        // Dividing first is exact (ne0 is a multiple) and cannot overflow
        // where ggml's `type_size*ne/blck` would.
        (ne0 / self.block_size()).checked_mul(self.type_size())
    }

    /// Bytes of a contiguous tensor with these dimensions (`ggml_nbytes`),
    /// `dims[0]` being the row length. An empty `dims` is a one-element
    /// scalar; any zero dimension gives 0 bytes, as in ggml. `None` if the
    /// row is not a whole number of blocks or the size overflows `u64`.
    pub fn tensor_bytes(self, dims: &[u64]) -> Option<u64> {
        let ne0 = dims.first().copied().unwrap_or(1);
        if !ne0.is_multiple_of(self.block_size()) {
            return None;
        }
        // Before the row size: gguf.cpp accepts an empty tensor whatever its
        // row length, e.g. [2^62, 0] in F32 is 0 bytes, not an overflow.
        if dims.contains(&0) {
            return Some(0);
        }
        let row = self.row_bytes(ne0)?;
        dims.iter()
            .skip(1)
            .try_fold(row, |acc, &d| acc.checked_mul(d))
    }

    /// Average bits per weight (`8 * type_size / block_size`).
    pub fn bits_per_weight(self) -> f64 {
        // Both values are below 2^10, so the conversions are exact.
        (self.type_size() * 8) as f64 / self.block_size() as f64
    }
}

/// Serialized as its name (`"Q4_K"`), the spelling users see and type.
impl serde::Serialize for GgmlType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// Deserialized from a name, case-insensitively (`"q8_0"`, `"F16"`).
impl<'de> serde::Deserialize<'de> for GgmlType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        GgmlType::from_name(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown ggml type {name:?} (expected e.g. F16, Q8_0, Q4_K)"
            ))
        })
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_removed_ids_are_unknown() {
        for &t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
        }
        for removed in [4, 5, 31, 32, 33, 36, 37, 38, 43, 44, u32::MAX] {
            assert_eq!(GgmlType::from_id(removed), None, "id {removed}");
        }
        assert_eq!(GgmlType::ALL.len(), 35);
        assert_eq!(GgmlType::MXFP4.id(), 39);
        assert_eq!(GgmlType::NVFP4.id(), 40);
        assert_eq!(GgmlType::Q1_0.id(), 41);
        assert_eq!(GgmlType::Q2_0.id(), 42);
    }

    #[test]
    fn block_sizes_match_ggml_common() {
        // (type, elements per block, bytes per block) from ggml-common.h.
        let expected = [
            (GgmlType::Q4_0, 32, 18),
            (GgmlType::Q8_0, 32, 34),
            (GgmlType::Q2_K, 256, 84),
            (GgmlType::Q3_K, 256, 110),
            (GgmlType::Q4_K, 256, 144),
            (GgmlType::Q5_K, 256, 176),
            (GgmlType::Q6_K, 256, 210),
            (GgmlType::Q8_K, 256, 292),
            (GgmlType::IQ4_XS, 256, 136),
            (GgmlType::IQ3_S, 256, 110),
            (GgmlType::IQ1_M, 256, 56),
            (GgmlType::TQ1_0, 256, 54),
            (GgmlType::MXFP4, 32, 17),
            (GgmlType::NVFP4, 64, 36),
            (GgmlType::Q1_0, 128, 18),
            (GgmlType::Q2_0, 64, 18),
            (GgmlType::BF16, 1, 2),
        ];
        for (t, blck, size) in expected {
            assert_eq!((t.block_size(), t.type_size()), (blck, size), "{t}");
        }
        assert_eq!(GgmlType::Q4_K.bits_per_weight(), 4.5);
        assert_eq!(GgmlType::Q6_K.bits_per_weight(), 6.5625);
        assert_eq!(GgmlType::MXFP4.bits_per_weight(), 4.25);
    }

    #[test]
    fn names_parse_case_insensitively() {
        for &t in GgmlType::ALL {
            assert_eq!(GgmlType::from_name(t.name()), Some(t));
            assert_eq!(GgmlType::from_name(&t.name().to_lowercase()), Some(t));
        }
        assert_eq!(GgmlType::from_name("q8_0"), Some(GgmlType::Q8_0));
        assert_eq!(GgmlType::from_name("bf16"), Some(GgmlType::BF16));
        assert_eq!(GgmlType::from_name("q4_k"), Some(GgmlType::Q4_K));
        assert_eq!(GgmlType::from_name("q4_k_m"), None);
        assert_eq!(GgmlType::Q4_K.to_string(), "Q4_K");
    }

    #[test]
    fn serde_uses_the_name() -> Result<(), serde_json::Error> {
        assert_eq!(serde_json::to_string(&GgmlType::Q4_K)?, "\"Q4_K\"");
        assert_eq!(
            serde_json::from_str::<GgmlType>("\"q8_0\"")?,
            GgmlType::Q8_0
        );
        assert!(serde_json::from_str::<GgmlType>("\"q4_k_m\"").is_err());
        Ok(())
    }

    #[test]
    fn row_and_tensor_bytes() {
        assert_eq!(GgmlType::Q4_K.row_bytes(4096), Some(16 * 144));
        assert_eq!(GgmlType::Q4_K.row_bytes(100), None);
        assert_eq!(GgmlType::F32.row_bytes(u64::MAX), None);
        assert_eq!(
            GgmlType::Q8_0.tensor_bytes(&[4096, 32000]),
            Some(128 * 34 * 32000)
        );
        assert_eq!(GgmlType::F16.tensor_bytes(&[]), Some(2));
        assert_eq!(GgmlType::Q4_0.tensor_bytes(&[]), None);
        assert_eq!(GgmlType::F32.tensor_bytes(&[7, 0, 3]), Some(0));
        // Empty, so no overflow, however long its rows (found by proptest).
        assert_eq!(GgmlType::F32.tensor_bytes(&[1 << 62, 0]), Some(0));
        assert_eq!(GgmlType::Q4_0.tensor_bytes(&[33, 0]), None);
        assert_eq!(GgmlType::F32.tensor_bytes(&[1 << 40, 1 << 30]), None);
        assert_eq!(GgmlType::I8.tensor_bytes(&[1 << 31, 1 << 31, 4]), None);
        assert_eq!(
            GgmlType::I8.tensor_bytes(&[1 << 31, 1 << 31, 3]),
            Some(3 << 62)
        );
    }
}
