//! Gemma 4: heads of 256 on sliding layers and 512 on full ones; in the
//! small models (E2B, E4B) per-layer token embeddings beside the tied one
//! and KV sharing (the last layers have no K/V projections and reuse the
//! cache of the last sliding and the last full layer before them:
//! `n_layer_kv_from_start`, `create_memory`'s `reuse` callback); in the
//! large ones (31B) fewer KV heads on the full layers, whose values are
//! their keys.

use super::{Common, Draft};
use crate::gguf::{Array, ArrayItems, Value};

/// Gemma-4-E2B (35 layers, hidden 1536, 8 heads, 1 KV head of 256 on
/// sliding layers and 512 on full ones, a sliding window of 512 on four
/// layers of five, the last 20 layers sharing the cache of the first 15
/// with a doubled FFN (6144, then 12288), per-layer inputs of 256 per
/// layer, final soft-capping 30, tied embeddings, vocabulary 262144,
/// context 131072).
///
/// The `gemma-4-e2b` variant of transformers' Gemma 4 converter
/// (`src/transformers/models/gemma4/convert_gemma4_weights.py`:
/// `hidden_size=1536, hidden_size_per_layer_input=256,
/// intermediate_size=4 * 1536, num_hidden_layers=35,
/// layer_types=_GEMMA_4_E2B_LAYER_TYPES * 7` (four sliding, one full),
/// `num_attention_heads=8, num_key_value_heads=1,
/// num_global_key_value_heads=None, attention_k_eq_v=False,
/// num_kv_shared_layers=20, use_double_wide_mlp=True,
/// final_logit_softcapping=30.0`, RoPE 1e6 on full and 1e4 on sliding
/// layers) over `Gemma4TextConfig`'s defaults (vocabulary 262144, head 256,
/// `global_head_dim` 512, window 512, RMS epsilon 1e-6, context 131072,
/// tied embeddings). Written as llama.cpp's `Gemma4Model` converter writes
/// them: the doubled widths of the shared layers as a per-layer
/// `feed_forward_length`, `layer_types` as the `sliding_window_pattern`
/// flags, the two head sizes as `key_length` (full) and `key_length_swa`,
/// the proportional RoPE's frequency factors as one `rope_freqs` tensor.
pub(super) fn gemma4_e2b() -> Draft {
    gemma4(&Gemma4 {
        n_layer: 35,
        n_embd: 1536,
        n_ff: 6144,
        n_head: 8,
        n_head_kv: 1,
        head_dim_swa: 256,
        head_dim: 512,
        n_vocab: 262_144,
        n_ctx_train: 131_072,
        sliding_window: 512,
        swa_period: 5,
        per_layer: 256,
        shared_kv_layers: 20,
        double_wide_mlp: true,
        n_head_kv_full: 1,
        k_eq_v: false,
    })
}

/// Gemma-4-31B (60 layers, hidden 5376, 32 heads; 16 KV heads of 256 on
/// sliding layers, 4 of 512 on full ones whose values are their keys; a
/// sliding window of 1024 on five layers of six, FFN 21504, no per-layer
/// embeddings, no shared KV layers, final soft-capping 30, tied
/// embeddings, vocabulary 262144, context 262144).
///
/// The `gemma-4-31b` variant of transformers' Gemma 4 converter
/// (`hidden_size=5376, hidden_size_per_layer_input=0,
/// intermediate_size=4 * 5376, num_hidden_layers=60,
/// layer_types=_DEFAULT_LAYER_TYPES * 10` (five sliding, one full),
/// `num_attention_heads=32, num_key_value_heads=16,
/// num_global_key_value_heads=4, attention_k_eq_v=True,
/// num_kv_shared_layers=0, sliding_window=1024,
/// final_logit_softcapping=30.0, max_position_embeddings=262_144`) over
/// `Gemma4TextConfig`'s defaults (vocabulary 262144, head 256,
/// `global_head_dim` 512, RMS epsilon 1e-6, tied embeddings). The KV head
/// counts are written per layer (the converter does when
/// `num_global_key_value_heads` is set); a full layer has no V projection
/// (`use_alternative_attention`).
pub(super) fn gemma4_31b() -> Draft {
    gemma4(&Gemma4 {
        n_layer: 60,
        n_embd: 5376,
        n_ff: 4 * 5376,
        n_head: 32,
        n_head_kv: 16,
        head_dim_swa: 256,
        head_dim: 512,
        n_vocab: 262_144,
        n_ctx_train: 262_144,
        sliding_window: 1024,
        swa_period: 6,
        per_layer: 0,
        shared_kv_layers: 0,
        double_wide_mlp: false,
        n_head_kv_full: 4,
        k_eq_v: true,
    })
}

/// The hyper-parameters of a Gemma 4 model with per-layer embeddings
/// (`gemma4`), under the names of its GGUF keys where it has one.
pub(crate) struct Gemma4 {
    pub n_layer: u32,
    pub n_embd: u64,
    /// `intermediate_size`: every layer's FFN width, doubled on the shared
    /// layers when `double_wide_mlp`.
    pub n_ff: u64,
    pub n_head: u64,
    pub n_head_kv: u64,
    /// `key_length_swa` (`head_dim`): the head of the sliding layers.
    pub head_dim_swa: u64,
    /// `key_length` (`global_head_dim`): the head of the full layers.
    pub head_dim: u64,
    /// Rows of both embeddings.
    pub n_vocab: u64,
    pub n_ctx_train: u64,
    pub sliding_window: u32,
    /// Every `swa_period`-th layer is full attention, the others sliding
    /// (`attention.sliding_window_pattern`, written as per-layer flags).
    pub swa_period: u32,
    /// `embedding_length_per_layer_input`.
    pub per_layer: u64,
    /// `attention.shared_kv_layers`.
    pub shared_kv_layers: u32,
    /// `use_double_wide_mlp`: the shared layers' FFN is twice as wide.
    pub double_wide_mlp: bool,
    /// KV heads of the full layers (`num_global_key_value_heads`; when it
    /// differs from `n_head_kv`, `head_count_kv` is written per layer).
    pub n_head_kv_full: u64,
    /// `attention_k_eq_v`: the full layers have no V projection.
    pub k_eq_v: bool,
}

/// A Gemma 4 model with per-layer embeddings: the keys and tensors of
/// `src/models/gemma4.cpp`. A KV-shared layer has no K and V projections
/// and no K norm (transformers creates none); every layer has its
/// `layer_scalar` (`layer_output_scale`).
pub(crate) fn gemma4(p: &Gemma4) -> Draft {
    let layers = p.n_layer;
    let embd = p.n_embd;
    let (heads, kv_heads) = (p.n_head, p.n_head_kv);
    let per_layer = p.per_layer;
    let u32_of = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let first_shared = layers.saturating_sub(p.shared_kv_layers);
    let ff_of = |il: u32| {
        if p.double_wide_mlp && il >= first_shared {
            p.n_ff.saturating_mul(2)
        } else {
            p.n_ff
        }
    };
    let mut d = Draft::new(
        "gemma4",
        &Common {
            n_layer: layers,
            n_embd: u32_of(embd),
            n_ff: u32_of(p.n_ff),
            n_head: u32_of(heads),
            n_head_kv: u32_of(kv_heads),
            n_vocab: p.n_vocab,
            n_ctx_train: p.n_ctx_train,
            rope_base: 1_000_000.0,
            norm_eps: 1e-6,
            ..Common::default()
        },
    );
    if p.double_wide_mlp {
        // The converter writes the widths as a per-layer list (of int32,
        // gguf-py's type for Python ints).
        let ff_key = format!("{}.feed_forward_length", d.arch);
        let widths: Vec<i32> = (0..layers)
            .map(|il| i32::try_from(ff_of(il)).unwrap_or(i32::MAX))
            .collect();
        let widths = Array::new(ArrayItems::I32(widths));
        for (k, v) in &mut d.meta {
            if *k == ff_key {
                *v = Value::Array(widths.clone());
            }
        }
    }
    let period = p.swa_period.max(1);
    let is_swa = |il: u32| (il + 1) % period != 0;
    let kv_heads_of = |il: u32| {
        if is_swa(il) {
            kv_heads
        } else {
            p.n_head_kv_full
        }
    };
    if p.n_head_kv_full == kv_heads {
        d.kv("attention.head_count_kv", u32_of(kv_heads));
    } else {
        let counts = (0..layers)
            .map(|il| i32::try_from(kv_heads_of(il)).unwrap_or(i32::MAX))
            .collect();
        d.kv(
            "attention.head_count_kv",
            Array::new(ArrayItems::I32(counts)),
        );
    }
    d.kv("attention.key_length", u32_of(p.head_dim));
    d.kv("attention.value_length", u32_of(p.head_dim));
    d.kv("attention.key_length_swa", u32_of(p.head_dim_swa));
    d.kv("attention.value_length_swa", u32_of(p.head_dim_swa));
    d.kv("rope.dimension_count", u32_of(p.head_dim));
    d.kv("rope.dimension_count_swa", u32_of(p.head_dim_swa));
    d.kv("rope.freq_base_swa", 10_000.0f32);
    d.kv("attention.sliding_window", p.sliding_window);
    d.kv("final_logit_softcapping", 30.0f32);
    d.kv("attention.shared_kv_layers", p.shared_kv_layers);
    d.kv("embedding_length_per_layer_input", u32_of(per_layer));
    let pattern = (0..layers).map(is_swa).collect();
    d.kv(
        "attention.sliding_window_pattern",
        Array::new(ArrayItems::Bool(pattern)),
    );

    let per_layer_all = per_layer.saturating_mul(u64::from(layers));
    d.embeddings(embd, true);
    if per_layer > 0 {
        d.global("per_layer_token_embd.weight", &[per_layer_all, d.n_vocab]);
        d.global("per_layer_model_proj.weight", &[embd, per_layer_all]);
        d.global("per_layer_proj_norm.weight", &[per_layer]);
    }
    d.global("rope_freqs.weight", &[p.head_dim / 2]);
    for il in 0..layers {
        let head = if is_swa(il) {
            p.head_dim_swa
        } else {
            p.head_dim
        };
        let (q, kv) = (
            heads.saturating_mul(head),
            kv_heads_of(il).saturating_mul(head),
        );
        let ff = ff_of(il);
        d.blk(il, "attn_norm.weight", &[embd]);
        d.blk(il, "attn_q.weight", &[embd, q]);
        if il < first_shared {
            d.blk(il, "attn_k.weight", &[embd, kv]);
            if !(p.k_eq_v && !is_swa(il)) {
                d.blk(il, "attn_v.weight", &[embd, kv]);
            }
            d.blk(il, "attn_k_norm.weight", &[head]);
        }
        d.blk(il, "attn_output.weight", &[q, embd]);
        d.blk(il, "attn_q_norm.weight", &[head]);
        d.blk(il, "post_attention_norm.weight", &[embd]);
        d.blk(il, "layer_output_scale.weight", &[1]);
        d.blk(il, "ffn_norm.weight", &[embd]);
        d.blk(il, "ffn_gate.weight", &[embd, ff]);
        d.blk(il, "ffn_up.weight", &[embd, ff]);
        d.blk(il, "ffn_down.weight", &[ff, embd]);
        d.blk(il, "post_ffw_norm.weight", &[embd]);
        if per_layer > 0 {
            d.blk(il, "inp_gate.weight", &[embd, per_layer]);
            d.blk(il, "proj.weight", &[per_layer, embd]);
            d.blk(il, "post_norm.weight", &[embd]);
        }
    }
    d
}
