//! Gemma 3n: per-layer token embeddings beside the usual one, four AltUp
//! streams, LAuReL low-rank residuals, and KV sharing: the last layers reuse
//! the cache of the last sliding and the last full layer before them
//! (`n_layer_kv_from_start`, `create_memory`'s `reuse` callback).

use super::{Common, Draft};
use crate::gguf::{Array, ArrayItems, Value};

/// Gemma-3n-E2B (30 layers, hidden 2048, 8 heads, 2 KV heads of 256 with
/// Q/K norms, FFN 8192 on every layer, a sliding window of 512 on four
/// layers of five, the last 10 layers sharing the cache of the first 20,
/// per-layer inputs of 256 per layer, 4 AltUp streams, LAuReL rank 64,
/// final soft-capping 30, tied embeddings, vocabulary 262400, context
/// 32768).
///
/// The `text_config` of `google/gemma-3n-E2B-it`'s `config.json`: the
/// E4B's defaults of transformers' `Gemma3nTextConfig`
/// (`src/transformers/models/gemma3n/configuration_gemma3n.py`: vocabulary
/// 262400 and 262144 per layer, hidden 2048, 8 heads, 2 KV heads of 256,
/// window 512, a full layer every fifth, `hidden_size_per_layer_input` 256,
/// `altup_num_inputs` 4, `laurel_rank` 64, soft-cap 30, RMS epsilon 1e-6,
/// RoPE bases 1e6 and 1e4, context 32768) with 30 layers,
/// `intermediate_size` a list of 30 × 8192 and `num_kv_shared_layers` 10,
/// and the first 10 layers sparse at 0.95. Written as llama.cpp's
/// `Gemma3NModel` converter writes them: the FFN widths as a per-layer
/// array, `layer_types` as the `sliding_window_pattern` flags, the two
/// vocabularies both padded to 262400 rows, the AltUp projections stacked.
/// The tensors are those `src/models/gemma3n.cpp` loads: every layer keeps
/// its K and V projections, shared or not.
pub(super) fn gemma3n_e2b() -> Draft {
    const LAYERS: u32 = 30;
    const EMBD: u64 = 2048;
    const FF: u64 = 8192;
    const HEAD: u64 = 256;
    const HEADS: u64 = 8;
    const KV_HEADS: u64 = 2;
    const PER_LAYER: u64 = 256;
    const ALTUP: u64 = 4;
    const LAUREL: u64 = 64;
    const SPARSE_LAYERS: u32 = 10;
    let mut d = Draft::new(
        "gemma3n",
        &Common {
            n_layer: LAYERS,
            n_embd: EMBD as u32,
            n_ff: FF as u32,
            n_head: HEADS as u32,
            n_head_kv: KV_HEADS as u32,
            n_vocab: 262_400,
            n_ctx_train: 32_768,
            rope_base: 1_000_000.0,
            norm_eps: 1e-6,
            ..Common::default()
        },
    );
    // `intermediate_size` is a per-layer list: the converter writes an array
    // (of int32, gguf-py's type for Python ints).
    let ff_key = format!("{}.feed_forward_length", d.arch);
    let widths = Array::new(ArrayItems::I32(vec![FF as i32; LAYERS as usize]));
    for (k, v) in &mut d.meta {
        if *k == ff_key {
            *v = Value::Array(widths.clone());
        }
    }
    d.kv("attention.head_count_kv", KV_HEADS as u32);
    d.kv("attention.key_length", HEAD as u32);
    d.kv("attention.value_length", HEAD as u32);
    d.kv("attention.sliding_window", 512u32);
    d.kv("final_logit_softcapping", 30.0f32);
    d.kv("altup.active_idx", 0u32);
    d.kv("altup.num_inputs", ALTUP as u32);
    d.kv("embedding_length_per_layer_input", PER_LAYER as u32);
    d.kv("attention.shared_kv_layers", 10u32);
    // `activation_sparsity_pattern` as the converter writes it: the normal
    // distribution's quantile of each layer's sparsity (0.95 → 1.6448536,
    // 0 → -inf).
    let scales = (0..LAYERS)
        .map(|il| {
            if il < SPARSE_LAYERS {
                1.644_853_6f32
            } else {
                f32::NEG_INFINITY
            }
        })
        .collect();
    d.kv(
        "activation_sparsity_scale",
        Array::new(ArrayItems::F32(scales)),
    );
    let pattern = (0..LAYERS).map(|il| (il + 1) % 5 != 0).collect();
    d.kv(
        "attention.sliding_window_pattern",
        Array::new(ArrayItems::Bool(pattern)),
    );

    d.embeddings(EMBD, true);
    d.global("altup_proj.weight", &[EMBD, EMBD, ALTUP - 1]);
    d.global("altup_unembd_proj.weight", &[EMBD, EMBD, ALTUP - 1]);
    d.global(
        "per_layer_token_embd.weight",
        &[PER_LAYER * u64::from(LAYERS), d.n_vocab],
    );
    d.global(
        "per_layer_model_proj.weight",
        &[EMBD, PER_LAYER * u64::from(LAYERS)],
    );
    d.global("per_layer_proj_norm.weight", &[PER_LAYER]);
    for il in 0..LAYERS {
        d.blk(il, "attn_norm.weight", &[EMBD]);
        d.blk(il, "attn_q.weight", &[EMBD, HEADS * HEAD]);
        d.blk(il, "attn_k.weight", &[EMBD, KV_HEADS * HEAD]);
        d.blk(il, "attn_v.weight", &[EMBD, KV_HEADS * HEAD]);
        d.blk(il, "attn_output.weight", &[HEADS * HEAD, EMBD]);
        d.blk(il, "attn_q_norm.weight", &[HEAD]);
        d.blk(il, "attn_k_norm.weight", &[HEAD]);
        d.blk(il, "post_attention_norm.weight", &[EMBD]);
        d.blk(il, "ffn_norm.weight", &[EMBD]);
        d.blk(il, "ffn_gate.weight", &[EMBD, FF]);
        d.blk(il, "ffn_up.weight", &[EMBD, FF]);
        d.blk(il, "ffn_down.weight", &[FF, EMBD]);
        d.blk(il, "post_ffw_norm.weight", &[EMBD]);
        d.blk(il, "inp_gate.weight", &[EMBD, PER_LAYER]);
        d.blk(il, "proj.weight", &[PER_LAYER, EMBD]);
        d.blk(il, "post_norm.weight", &[EMBD]);
        d.blk(il, "altup_correct_coef.weight", &[ALTUP, ALTUP]);
        d.blk(il, "altup_correct_scale.weight", &[EMBD]);
        d.blk(il, "altup_predict_coef.weight", &[ALTUP, ALTUP * ALTUP]);
        d.blk(il, "altup_router.weight", &[EMBD, ALTUP]);
        d.blk(il, "altup_router_norm.weight", &[EMBD]);
        d.blk(il, "laurel_l.weight", &[EMBD, LAUREL]);
        d.blk(il, "laurel_r.weight", &[LAUREL, EMBD]);
        d.blk(il, "laurel_post_norm.weight", &[EMBD]);
    }
    d
}
