//! llama.cpp's quantization type choices (`src/llama-quant.cpp`), mirrored
//! for the tensors synthetic models have, so a synthetic Q4_K_M file has the
//! same per-tensor types (hence the same bytes) as real `llama-quantize` output.
//! The app's `accounting_quant` test checks this mirror against llama.cpp.

use super::{Mix, ShapeSpec};
use crate::gguf::GgmlType;

/// Whether llama.cpp never quantizes this tensor (1-D tensors, norms, the MoE
/// router), mirroring `tensor_allows_quantization` for the tensors these
/// shapes have. Converters store such tensors as F32, and so does synth.
pub fn never_quantized(name: &str, dims: &[u64]) -> bool {
    dims.len() < 2 || name.contains("_norm.weight") || name.contains("ffn_gate_inp.weight")
}

/// The type llama.cpp's quantizer gives tensor `name` (in block `layer`) for
/// `mix`, mirroring `llama_tensor_get_type` in `src/llama-quant.cpp` for the
/// branches these shapes reach (no Falcon, no 8-expert or 70B special cases,
/// no imatrix):
/// * output (or the tied token embedding): Q8_0 if its rows are not a multiple
///   of the default type's block, Q6_K otherwise, unless the mix is Q8_0;
/// * Q4_K_M: `attn_v` and `ffn_down` get Q6_K on "more bits" layers
///   (`use_more_bits`: the first and last eighth, and every third between);
/// * then the shape fallback: a row length not divisible by the block size
///   demotes Q4_K→Q5_0, Q6_K→Q8_0 (`tensor_type_fallback`).
///
/// Layer counters (`i_attention_wv`, `i_ffn_down`) equal the block index here:
/// each block has exactly one of each, written in block order.
pub fn quant_type(
    spec: &ShapeSpec,
    mix: Mix,
    name: &str,
    dims: &[u64],
    layer: Option<u32>,
) -> GgmlType {
    if never_quantized(name, dims) {
        return GgmlType::F32;
    }
    let default = mix.default_type();
    if !default.is_quantized() {
        return default;
    }
    let ne0 = dims.first().copied().unwrap_or(0);
    let is_output =
        name == "output.weight" || (spec.tied_embeddings && name == "token_embd.weight");
    let n = i64::from(spec.n_layer);
    let more_bits = |il: u32| {
        let i = i64::from(il);
        i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
    };
    let mut ty = default;
    if is_output {
        if ne0 % default.block_size() != 0 {
            ty = GgmlType::Q8_0;
        } else if default != GgmlType::Q8_0 {
            ty = GgmlType::Q6_K;
        }
    } else if mix == Mix::Q4KM
        && (name.contains("attn_v.weight") || name.contains("ffn_down"))
        && layer.is_some_and(more_bits)
    {
        ty = GgmlType::Q6_K;
    }
    if ne0 % ty.block_size() != 0 {
        ty = match ty {
            GgmlType::Q4_K => GgmlType::Q5_0,
            GgmlType::Q5_K => GgmlType::Q5_1,
            GgmlType::Q6_K => GgmlType::Q8_0,
            other => other,
        };
        if ne0 % ty.block_size() != 0 {
            ty = GgmlType::F16;
        }
    }
    ty
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::Shape;

    #[test]
    fn q4_k_m_rules() {
        // (tensor, dims, layer, type, why) for `shape` in `mix`.
        type Case = (
            &'static str,
            &'static [u64],
            Option<u32>,
            GgmlType,
            &'static str,
        );
        let check = |shape: Shape, mix: Mix, cases: &[Case]| {
            let s = shape.spec();
            for &(name, dims, layer, want, why) in cases {
                let got = quant_type(&s, mix, name, dims, layer);
                assert_eq!(got, want, "{shape:?} {mix:?} {name}: {why}");
            }
        };
        check(
            Shape::Llama8B,
            Mix::Q4KM,
            &[
                ("output.weight", &[4096, 128_256], None, GgmlType::Q6_K, ""),
                (
                    "token_embd.weight",
                    &[4096, 128_256],
                    None,
                    GgmlType::Q4_K,
                    "untied",
                ),
                (
                    "blk.0.attn_v.weight",
                    &[4096, 1024],
                    Some(0),
                    GgmlType::Q6_K,
                    "first eighth",
                ),
                (
                    "blk.4.attn_v.weight",
                    &[4096, 1024],
                    Some(4),
                    GgmlType::Q4_K,
                    "",
                ),
                (
                    "blk.6.ffn_down.weight",
                    &[14336, 4096],
                    Some(6),
                    GgmlType::Q6_K,
                    "(6-4)%3==2",
                ),
                (
                    "blk.31.ffn_down.weight",
                    &[14336, 4096],
                    Some(31),
                    GgmlType::Q6_K,
                    "last eighth",
                ),
                (
                    "blk.0.attn_norm.weight",
                    &[4096],
                    Some(0),
                    GgmlType::F32,
                    "",
                ),
            ],
        );
        // Gemma-3-1B rows of 1152 are not whole Q4_K/Q6_K blocks.
        check(
            Shape::Gemma3_1B,
            Mix::Q4KM,
            &[
                (
                    "token_embd.weight",
                    &[1152, 262_144],
                    None,
                    GgmlType::Q8_0,
                    "tied, fallback",
                ),
                (
                    "blk.1.attn_q.weight",
                    &[1152, 1024],
                    Some(1),
                    GgmlType::Q5_0,
                    "",
                ),
                (
                    "blk.0.attn_v.weight",
                    &[1152, 256],
                    Some(0),
                    GgmlType::Q8_0,
                    "",
                ),
                (
                    "blk.1.attn_output.weight",
                    &[1024, 1152],
                    Some(1),
                    GgmlType::Q4_K,
                    "",
                ),
            ],
        );
        // Q8_0 and F16 are uniform.
        let output = (
            "output.weight",
            &[4096, 128_256][..],
            None,
            GgmlType::Q8_0,
            "",
        );
        check(Shape::Llama8B, Mix::Q8_0, &[output]);
        let attn_v = (
            "blk.0.attn_v.weight",
            &[4096, 1024][..],
            Some(0),
            GgmlType::F16,
            "",
        );
        check(Shape::Llama8B, Mix::F16, &[attn_v]);
    }
}
