//! Gemma 4: heads of 256 on sliding layers and 512 on full ones; in the
//! small models (E2B, E4B) per-layer token embeddings beside the tied one
//! and KV sharing (the last layers have no K/V projections and reuse the
//! cache of the last sliding and the last full layer before them:
//! `n_layer_kv_from_start`, `create_memory`'s `reuse` callback); in the
//! large ones (31B, 26B-A4B) fewer KV heads on the full layers, whose
//! values are their keys; in 26B-A4B, 128 experts beside every layer's
//! dense FFN.

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
        n_expert: 0,
        n_expert_used: 0,
        n_ff_exp: 0,
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
        n_expert: 0,
        n_expert_used: 0,
        n_ff_exp: 0,
    })
}

/// Gemma-4-26B-A4B (30 layers, hidden 2816, 16 heads; 8 KV heads of 256 on
/// sliding layers, 2 of 512 on full ones whose values are their keys; a
/// sliding window of 1024 on five layers of six; on every layer a dense FFN
/// of 2112 beside 128 experts of 704, 8 used; no per-layer embeddings, no
/// shared KV layers, final soft-capping 30, tied embeddings, vocabulary
/// 262144, context 262144).
///
/// The keys of llama.cpp's dump of unsloth's
/// `gemma-4-26B-A4B-it-UD-Q5_K_M.gguf` (code-index file id 54492899325:
/// `gemma4.block_count u32 = 30`, `embedding_length u32 = 2816`,
/// `feed_forward_length u32 = 2112`, `attention.head_count u32 = 16`,
/// `attention.head_count_kv arr[i32,30] = [8, 8, 8, 8, 8, 2, ...`,
/// `expert_count u32 = 128`, `expert_used_count u32 = 8`,
/// `attention.key_length u32 = 512`, `key_length_swa u32 = 256`,
/// `attention.sliding_window u32 = 1024`, `shared_kv_layers u32 = 0`,
/// `embedding_length_per_layer_input u32 = 0`,
/// `expert_feed_forward_length u32 = 704`, `context_length u32 = 262144`,
/// 262144 tokens; 658 tensors, `model params = 25.23 B`). The tensors are
/// what `src/models/gemma4.cpp` loads for an expert layer, as Gemma 4's
/// converter writes them (a GGUF tensor table of the 26B, code-index file
/// id 54574627943): the router (`ffn_gate_inp`, kept F32 by
/// llama-quantize) with its input scale (`ffn_gate_inp.scale`), the fused
/// gate and up experts (`ffn_gate_up_exps`, 2 × 704 wide), the down
/// experts with a per-expert scale (`ffn_down_exps.scale`), and the
/// norms of the two branches (`pre_ffw_norm_2`, `post_ffw_norm_1`,
/// `post_ffw_norm_2`); full layers have no `attn_v` (the table's layer 5),
/// which makes the dump's 658 tensors: 3 outside the blocks, 22 in each of
/// the 25 sliding layers, 21 in each of the 5 full ones.
pub(super) fn gemma4_26b_a4b() -> Draft {
    gemma4(&Gemma4 {
        n_layer: 30,
        n_embd: 2816,
        n_ff: 2112,
        n_head: 16,
        n_head_kv: 8,
        head_dim_swa: 256,
        head_dim: 512,
        n_vocab: 262_144,
        n_ctx_train: 262_144,
        sliding_window: 1024,
        swa_period: 6,
        per_layer: 0,
        shared_kv_layers: 0,
        double_wide_mlp: false,
        n_head_kv_full: 2,
        k_eq_v: true,
        n_expert: 128,
        n_expert_used: 8,
        n_ff_exp: 704,
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
    /// `expert_count` (0: no experts, the dense FFN alone).
    pub n_expert: u32,
    /// `expert_used_count`.
    pub n_expert_used: u32,
    /// `expert_feed_forward_length`: one expert's width.
    pub n_ff_exp: u64,
}

/// A Gemma 4 model with per-layer embeddings: the keys and tensors of
/// `src/models/gemma4.cpp`. A KV-shared layer has no K and V projections
/// and no K norm (transformers creates none); every layer has its
/// `layer_scalar` (`layer_output_scale`). With experts, every layer is an
/// expert layer (`ffn_gate_inp` present) and keeps its dense FFN as the
/// shared branch.
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
            n_expert: p.n_expert,
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
    if p.n_expert > 0 {
        d.kv("expert_count", p.n_expert);
        d.kv("expert_used_count", p.n_expert_used);
        d.kv("expert_feed_forward_length", u32_of(p.n_ff_exp));
    }
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
        if p.n_expert > 0 {
            // The dense FFN above is the layer's shared branch; the experts
            // beside it, routed from the attention's output.
            let (n_expert, n_ff_exp) = (u64::from(p.n_expert), p.n_ff_exp);
            d.blk(il, "ffn_gate_inp.weight", &[embd, n_expert]);
            d.blk(il, "ffn_gate_inp.scale", &[embd]);
            d.blk(il, "pre_ffw_norm_2.weight", &[embd]);
            d.blk(il, "post_ffw_norm_1.weight", &[embd]);
            d.blk(il, "post_ffw_norm_2.weight", &[embd]);
            d.blk(
                il,
                "ffn_gate_up_exps.weight",
                &[embd, n_ff_exp.saturating_mul(2), n_expert],
            );
            d.blk(il, "ffn_down_exps.weight", &[n_ff_exp, embd, n_expert]);
            d.blk(il, "ffn_down_exps.scale", &[n_expert]);
        }
        if per_layer > 0 {
            d.blk(il, "inp_gate.weight", &[embd, per_layer]);
            d.blk(il, "proj.weight", &[per_layer, embd]);
            d.blk(il, "post_norm.weight", &[embd]);
        }
    }
    d
}
