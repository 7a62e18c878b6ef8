//! The synthetic models' tensor types are exactly what llama.cpp's quantizer
//! (`llama-quantize`, src/llama-quant.cpp) would choose for the same tensors:
//! `headroom_planner::synth` mirrors the rules in Rust, and this test asks the
//! real rules through the shim, tensor by tensor.

use headroom::llama::{QuantModel, QuantTensor, quant_types};
use headroom_planner::gguf::GgmlType;
use headroom_planner::synth::{self, Mix, Shape};

/// The source (unquantized) type a converter writes: F32 for what llama.cpp
/// never quantizes (synth keeps those F32 in every mix), F16 for the rest.
fn source_type(t: &synth::SynthTensor) -> GgmlType {
    if synth::never_quantized(&t.name, &t.dims) {
        GgmlType::F32
    } else {
        GgmlType::F16
    }
}

#[test]
fn synthetic_types_match_llama_quantize() {
    for shape in Shape::ALL {
        let s = shape.spec();
        let u = |v: u64| u32::try_from(v).expect("small");
        let model = QuantModel {
            arch: s.arch.to_string(),
            n_embd: u(s.n_embd),
            n_ff: u(s.n_ff),
            n_layer: s.n_layer,
            n_head: u(s.n_head),
            n_head_kv: u(s.n_head_kv),
            n_expert: s.n_expert,
            n_embd_head_k: u(s.head_dim),
            n_embd_head_v: u(s.head_dim),
        };
        for mix in Mix::ALL {
            let ours = synth::tensors(shape, mix);
            let input: Vec<QuantTensor> = ours
                .iter()
                .map(|t| QuantTensor {
                    name: t.name.clone(),
                    dims: t.dims.clone(),
                    src_type: source_type(t),
                })
                .collect();
            let theirs = quant_types(&model, mix.ftype(), &input).expect("llama.cpp answers");
            assert_eq!(theirs.len(), ours.len());
            let mismatches: Vec<String> = ours
                .iter()
                .zip(&theirs)
                .filter(|(o, t)| o.ty != **t)
                .map(|(o, t)| format!("{}: synth {} llama.cpp {}", o.name, o.ty.name(), t.name()))
                .collect();
            assert!(
                mismatches.is_empty(),
                "{} {}: {} of {} tensors differ:\n{}",
                shape.name(),
                mix.name(),
                mismatches.len(),
                ours.len(),
                mismatches.join("\n")
            );
        }
    }
}

#[test]
fn q4_k_m_really_mixes_types() {
    // Guard against a vacuous pass: the Q4_K_M mixes must contain the
    // special cases the rules produce.
    let has =
        |shape: Shape, ty: GgmlType| synth::tensors(shape, Mix::Q4KM).iter().any(|t| t.ty == ty);
    assert!(has(Shape::Llama8B, GgmlType::Q6_K));
    assert!(has(Shape::Llama8B, GgmlType::Q4_K));
    // n_embd 1152 is not a multiple of 256: Q4_K falls back to Q5_0, Q6_K to Q8_0.
    assert!(has(Shape::Gemma3_1B, GgmlType::Q5_0));
    assert!(has(Shape::Gemma3_1B, GgmlType::Q8_0));
    assert!(has(Shape::Qwen3Moe30BA3B, GgmlType::Q6_K));
}
