//! DeepSeek-V2-Lite in both file layouts llama.cpp loads.
//!
//! `src/models/deepseek2.cpp`: with `attention.key_length_mla` and
//! `attention.value_length_mla` (`hparams.is_mla()`), the latent projection is
//! split into `attn_k_b` and `attn_v_b` and the KV cache holds one row of
//! `kv_lora_rank + n_rot` per token, K only; without them (2024's files), the
//! layer has one `attn_kv_b` and the cache holds full K (192) and V (128)
//! for each of the 16 heads.

use super::{Common, Draft};

/// DeepSeek-V2-Lite (`config.json`: 27 layers, hidden 2048, 16 heads, no
/// query compression, `kv_lora_rank` 512, `qk_nope_head_dim` 128,
/// `qk_rope_head_dim` 64, `v_head_dim` 128, 64 routed experts of 1408, 6
/// used, 2 shared, the first layer dense (10944), vocabulary 102400,
/// context 163840 with YaRN ×40 over 4096).
pub(super) fn deepseek_v2_lite(split: bool) -> Draft {
    deepseek2(&Deepseek2 {
        n_layer: 27,
        n_embd: 2048,
        n_ff: 10944,
        n_head: 16,
        q_lora: 0,
        kv_lora: 512,
        nope: 128,
        rope: 64,
        v: 128,
        n_expert: 64,
        n_expert_used: 6,
        n_expert_shared: 2,
        n_ff_exp: 1408,
        n_dense_lead: 1,
        n_vocab: 102_400,
        n_ctx_train: 163_840,
        split,
        sigmoid_gating: None,
        yarn: true,
    })
}

/// GLM-4.7-Flash as llama.cpp's converter writes it (`Glm4MoeLiteForCausalLM`
/// becomes `deepseek2` in the split MLA layout): 47 layers, hidden 2048, 20
/// heads, `q_lora_rank` 768, `kv_lora_rank` 512, `qk_nope_head_dim` 192,
/// `qk_rope_head_dim` 64, `v_head_dim` 256, 64 routed experts of 1536 with
/// 4 used and one shared, the first layer dense (10240), sigmoid gating
/// with a selection bias, vocabulary 154880, context 202752.
pub(super) fn glm47_flash() -> Draft {
    deepseek2(&Deepseek2 {
        n_layer: 47,
        n_embd: 2048,
        n_ff: 10240,
        n_head: 20,
        q_lora: 768,
        kv_lora: 512,
        nope: 192,
        rope: 64,
        v: 256,
        n_expert: 64,
        n_expert_used: 4,
        n_expert_shared: 1,
        n_ff_exp: 1536,
        n_dense_lead: 1,
        n_vocab: 154_880,
        n_ctx_train: 202_752,
        split: true,
        sigmoid_gating: Some(1.8),
        yarn: false,
    })
}

/// The hyper-parameters of a `deepseek2` model with latent attention.
pub(crate) struct Deepseek2 {
    pub n_layer: u32,
    pub n_embd: u64,
    pub n_ff: u64,
    pub n_head: u64,
    /// `q_lora_rank` (0: no query compression, DeepSeek-V2-Lite).
    pub q_lora: u64,
    pub kv_lora: u64,
    /// Per-head key size without, and with, the rotary part.
    pub nope: u64,
    pub rope: u64,
    /// Per-head value size.
    pub v: u64,
    pub n_expert: u64,
    pub n_expert_used: u32,
    pub n_expert_shared: u64,
    pub n_ff_exp: u64,
    pub n_dense_lead: u32,
    pub n_vocab: u64,
    pub n_ctx_train: u64,
    /// The converter's MLA layout (`attn_k_b`, `attn_v_b`, `*_mla` keys)
    /// rather than 2024's `attn_kv_b`.
    pub split: bool,
    /// Sigmoid gating with a selection bias (`exp_probs_b`) and this
    /// routed scaling factor (GLM-4.7-Flash, DeepSeek V3); `None`: softmax.
    pub sigmoid_gating: Option<f32>,
    /// DeepSeek-V2-Lite's YaRN ×40 over 4096.
    pub yarn: bool,
}

/// A `deepseek2` model with latent attention (`src/models/deepseek2.cpp`).
pub(crate) fn deepseek2(p: &Deepseek2) -> Draft {
    let n32 = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let embd = p.n_embd;
    let heads = p.n_head;
    let (lora, nope, rope, v) = (p.kv_lora, p.nope, p.rope, p.v);
    let mut d = Draft::new(
        "deepseek2",
        &Common {
            n_layer: p.n_layer,
            n_embd: n32(embd),
            n_ff: n32(p.n_ff),
            n_head: n32(heads),
            n_head_kv: if p.split { 1 } else { n32(heads) },
            n_expert: n32(p.n_expert),
            n_vocab: p.n_vocab,
            n_ctx_train: p.n_ctx_train,
            norm_eps: 1e-6,
            ..Common::default()
        },
    );
    if p.split {
        // The converter's MLA layout: one latent "head" of lora + rope for K,
        // lora for V; the per-head sizes move to the `_mla` keys.
        d.kv("attention.head_count_kv", 1u32);
        d.kv("attention.key_length", n32(lora.saturating_add(rope)));
        d.kv("attention.value_length", n32(lora));
        d.kv("attention.key_length_mla", n32(nope.saturating_add(rope)));
        d.kv("attention.value_length_mla", n32(v));
    } else {
        d.kv("attention.head_count_kv", n32(heads));
        d.kv("attention.key_length", n32(nope.saturating_add(rope)));
        d.kv("attention.value_length", n32(v));
    }
    d.kv("rope.dimension_count", n32(rope));
    if p.q_lora > 0 {
        d.kv("attention.q_lora_rank", n32(p.q_lora));
    }
    d.kv("attention.kv_lora_rank", n32(lora));
    d.kv("leading_dense_block_count", p.n_dense_lead);
    d.kv("expert_count", n32(p.n_expert));
    d.kv("expert_used_count", p.n_expert_used);
    d.kv("expert_shared_count", n32(p.n_expert_shared));
    d.kv("expert_feed_forward_length", n32(p.n_ff_exp));
    match p.sigmoid_gating {
        Some(scale) => {
            d.kv("expert_weights_scale", scale);
            d.kv("expert_weights_norm", true);
            d.kv("expert_gating_func", 2u32);
        }
        None => d.kv("expert_weights_scale", 1.0f32),
    }
    if p.yarn {
        d.kv("rope.scaling.type", "yarn");
        d.kv("rope.scaling.factor", 40.0f32);
        d.kv("rope.scaling.original_context_length", 4096u32);
        d.kv("rope.scaling.yarn_log_multiplier", 0.0707f32);
    }
    d.embeddings(embd, false);
    let q = heads.saturating_mul(nope.saturating_add(rope));
    for il in 0..p.n_layer {
        d.blk(il, "attn_norm.weight", &[embd]);
        d.blk(il, "attn_kv_a_norm.weight", &[lora]);
        if p.q_lora > 0 {
            d.blk(il, "attn_q_a_norm.weight", &[p.q_lora]);
            d.blk(il, "attn_q_a.weight", &[embd, p.q_lora]);
            d.blk(il, "attn_q_b.weight", &[p.q_lora, q]);
        } else {
            d.blk(il, "attn_q.weight", &[embd, q]);
        }
        d.blk(
            il,
            "attn_kv_a_mqa.weight",
            &[embd, lora.saturating_add(rope)],
        );
        if p.split {
            d.blk(il, "attn_k_b.weight", &[nope, lora, heads]);
            d.blk(il, "attn_v_b.weight", &[lora, v, heads]);
        } else {
            d.blk(
                il,
                "attn_kv_b.weight",
                &[lora, heads.saturating_mul(nope.saturating_add(v))],
            );
        }
        d.blk(il, "attn_output.weight", &[heads.saturating_mul(v), embd]);
        d.blk(il, "ffn_norm.weight", &[embd]);
        if il < p.n_dense_lead {
            d.blk(il, "ffn_gate.weight", &[embd, p.n_ff]);
            d.blk(il, "ffn_down.weight", &[p.n_ff, embd]);
            d.blk(il, "ffn_up.weight", &[embd, p.n_ff]);
        } else {
            let (x, ff) = (p.n_expert, p.n_ff_exp);
            let shared = ff.saturating_mul(p.n_expert_shared);
            d.blk(il, "ffn_gate_inp.weight", &[embd, x]);
            if p.sigmoid_gating.is_some() {
                d.blk(il, "exp_probs_b.bias", &[x]);
            }
            d.blk(il, "ffn_down_exps.weight", &[ff, embd, x]);
            d.blk(il, "ffn_gate_exps.weight", &[embd, ff, x]);
            d.blk(il, "ffn_up_exps.weight", &[embd, ff, x]);
            d.blk(il, "ffn_gate_shexp.weight", &[embd, shared]);
            d.blk(il, "ffn_down_shexp.weight", &[shared, embd]);
            d.blk(il, "ffn_up_shexp.weight", &[embd, shared]);
        }
    }
    d
}
