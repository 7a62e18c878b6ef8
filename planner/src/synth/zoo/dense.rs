//! Dense transformers whose layouts differ from Llama's: Q/K/V biases
//! (Qwen2), Q/K norms (Qwen3), post-norms, logit soft-capping and a sliding
//! window on every other layer (Gemma 2), a fused gate/up and post-norms
//! (GLM-4).

use super::{Common, Draft};

/// Q, K, V (with biases when asked) and output projections.
fn attention(d: &mut Draft, il: u32, embd: u64, q: u64, kv: u64, bias: bool) {
    d.blk(il, "attn_q.weight", &[embd, q]);
    d.blk(il, "attn_k.weight", &[embd, kv]);
    d.blk(il, "attn_v.weight", &[embd, kv]);
    if bias {
        d.blk(il, "attn_q.bias", &[q]);
        d.blk(il, "attn_k.bias", &[kv]);
        d.blk(il, "attn_v.bias", &[kv]);
    }
    d.blk(il, "attn_output.weight", &[q, embd]);
}

/// A SwiGLU FFN of width `ff`.
fn swiglu(d: &mut Draft, il: u32, embd: u64, ff: u64) {
    d.blk(il, "ffn_gate.weight", &[embd, ff]);
    d.blk(il, "ffn_down.weight", &[ff, embd]);
    d.blk(il, "ffn_up.weight", &[embd, ff]);
}

/// Qwen2.5-7B-Instruct (28 layers, hidden 3584, 28 heads, 4 KV heads of 128
/// with Q/K/V biases, FFN 18944, vocabulary 152064, context 32768).
pub(super) fn qwen25_7b() -> Draft {
    const LAYERS: u32 = 28;
    const EMBD: u64 = 3584;
    const FF: u64 = 18944;
    let mut d = Draft::new(
        "qwen2",
        &Common {
            n_layer: LAYERS,
            n_embd: EMBD as u32,
            n_ff: FF as u32,
            n_head: 28,
            n_head_kv: 4,
            n_vocab: 152_064,
            n_ctx_train: 32_768,
            rope_base: 1_000_000.0,
            norm_eps: 1e-6,
            ..Common::default()
        },
    );
    d.kv("attention.head_count_kv", 4u32);
    d.embeddings(EMBD, false);
    for il in 0..LAYERS {
        d.blk(il, "attn_norm.weight", &[EMBD]);
        attention(&mut d, il, EMBD, 28 * 128, 4 * 128, true);
        d.blk(il, "ffn_norm.weight", &[EMBD]);
        swiglu(&mut d, il, EMBD, FF);
    }
    d
}

/// Qwen3-8B (36 layers, hidden 4096, 32 heads, 8 KV heads of 128 with Q/K
/// norms, FFN 12288, vocabulary 151936, context 40960).
pub(super) fn qwen3_8b() -> Draft {
    const LAYERS: u32 = 36;
    const EMBD: u64 = 4096;
    const FF: u64 = 12288;
    let mut d = Draft::new(
        "qwen3",
        &Common {
            n_layer: LAYERS,
            n_embd: EMBD as u32,
            n_ff: FF as u32,
            n_head: 32,
            n_head_kv: 8,
            n_vocab: 151_936,
            n_ctx_train: 40_960,
            rope_base: 1_000_000.0,
            norm_eps: 1e-6,
            ..Common::default()
        },
    );
    d.kv("attention.head_count_kv", 8u32);
    d.kv("attention.key_length", 128u32);
    d.kv("attention.value_length", 128u32);
    d.embeddings(EMBD, false);
    for il in 0..LAYERS {
        d.blk(il, "attn_norm.weight", &[EMBD]);
        attention(&mut d, il, EMBD, 32 * 128, 8 * 128, false);
        d.blk(il, "attn_k_norm.weight", &[128]);
        d.blk(il, "attn_q_norm.weight", &[128]);
        d.blk(il, "ffn_norm.weight", &[EMBD]);
        swiglu(&mut d, il, EMBD, FF);
    }
    d
}

/// Gemma-2-9B (42 layers, hidden 3584, 16 heads, 8 KV heads of 256, FFN
/// 14336, a sliding window of 4096 on every other layer, soft-capped
/// attention and logits, tied embeddings, vocabulary 256000, context 8192).
pub(super) fn gemma2_9b() -> Draft {
    const LAYERS: u32 = 42;
    const EMBD: u64 = 3584;
    const FF: u64 = 14336;
    let mut d = Draft::new(
        "gemma2",
        &Common {
            n_layer: LAYERS,
            n_embd: EMBD as u32,
            n_ff: FF as u32,
            n_head: 16,
            n_head_kv: 8,
            n_vocab: 256_000,
            n_ctx_train: 8192,
            norm_eps: 1e-6,
            ..Common::default()
        },
    );
    d.kv("attention.head_count_kv", 8u32);
    d.kv("attention.key_length", 256u32);
    d.kv("attention.value_length", 256u32);
    d.kv("attention.sliding_window", 4096u32);
    d.kv("attn_logit_softcapping", 50.0f32);
    d.kv("final_logit_softcapping", 30.0f32);
    d.embeddings(EMBD, true);
    for il in 0..LAYERS {
        d.blk(il, "attn_norm.weight", &[EMBD]);
        attention(&mut d, il, EMBD, 16 * 256, 8 * 256, false);
        d.blk(il, "post_attention_norm.weight", &[EMBD]);
        d.blk(il, "ffn_norm.weight", &[EMBD]);
        swiglu(&mut d, il, EMBD, FF);
        d.blk(il, "post_ffw_norm.weight", &[EMBD]);
    }
    d
}

/// GLM-4-9B-0414 (40 layers, hidden 4096, 32 heads, 2 KV heads of 128 with
/// Q/K/V biases, half-rotary, a fused gate/up of 2 × 13696, post-norms,
/// vocabulary 151552, context 32768).
pub(super) fn glm4_9b() -> Draft {
    glm4(&Glm4 {
        n_layer: 40,
        n_embd: 4096,
        n_ff: 13696,
        n_head: 32,
        n_head_kv: 2,
        head_dim: 128,
        n_vocab: 151_552,
        n_ctx_train: 32_768,
        rope_dim: Some(64),
        tied: false,
    })
}

/// The hyper-parameters of a GLM-4 (`glm4`) model.
pub(crate) struct Glm4 {
    pub n_layer: u32,
    pub n_embd: u64,
    pub n_ff: u64,
    pub n_head: u64,
    pub n_head_kv: u64,
    pub head_dim: u64,
    pub n_vocab: u64,
    pub n_ctx_train: u64,
    /// `rope.dimension_count` (unset: the head size).
    pub rope_dim: Option<u32>,
    pub tied: bool,
}

/// A GLM-4 model (GLM-4-0414, GLM-Z1): Q/K/V biases, a fused gate/up,
/// post-norms (`src/models/glm4.cpp`).
pub(crate) fn glm4(p: &Glm4) -> Draft {
    let embd = p.n_embd;
    let mut d = Draft::new(
        "glm4",
        &Common {
            n_layer: p.n_layer,
            n_embd: u32::try_from(embd).unwrap_or(u32::MAX),
            n_ff: u32::try_from(p.n_ff).unwrap_or(u32::MAX),
            n_head: u32::try_from(p.n_head).unwrap_or(u32::MAX),
            n_head_kv: u32::try_from(p.n_head_kv).unwrap_or(u32::MAX),
            n_vocab: p.n_vocab,
            n_ctx_train: p.n_ctx_train,
            ..Common::default()
        },
    );
    let head = u32::try_from(p.head_dim).unwrap_or(u32::MAX);
    d.kv(
        "attention.head_count_kv",
        u32::try_from(p.n_head_kv).unwrap_or(u32::MAX),
    );
    d.kv("attention.key_length", head);
    d.kv("attention.value_length", head);
    if let Some(rope) = p.rope_dim {
        d.kv("rope.dimension_count", rope);
    }
    d.embeddings(embd, p.tied);
    let (q, kv) = (
        p.n_head.saturating_mul(p.head_dim),
        p.n_head_kv.saturating_mul(p.head_dim),
    );
    for il in 0..p.n_layer {
        d.blk(il, "attn_norm.weight", &[embd]);
        attention(&mut d, il, embd, q, kv, true);
        d.blk(il, "post_attention_norm.weight", &[embd]);
        d.blk(il, "ffn_norm.weight", &[embd]);
        d.blk(il, "ffn_down.weight", &[p.n_ff, embd]);
        d.blk(il, "ffn_up.weight", &[embd, p.n_ff.saturating_mul(2)]);
        d.blk(il, "post_ffw_norm.weight", &[embd]);
    }
    d
}
