//! Dense transformers whose layouts differ from Llama's: Q/K/V biases
//! (Qwen2), Q/K norms (Qwen3), post-norms, logit soft-capping and a sliding
//! window on every other layer (Gemma 2), a fused gate/up and post-norms
//! (GLM-4), Llama's tensors under `mistral3` with Llama-4-style attention
//! temperature scaling (Mistral's models since December 2025), OLMo 2/3's
//! post-norms only and full-width Q/K norms (`olmo2`), and Llama's tensors
//! under `smollm3`, whose every 4th layer has no RoPE (fixed by llama.cpp's
//! loader, no header key). The last three also lay out catalog entries
//! (`synth::facts`).

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

/// The hyper-parameters of a `mistral3` model.
pub(crate) struct Mistral3 {
    pub n_layer: u32,
    pub n_embd: u64,
    pub n_ff: u64,
    pub n_head: u64,
    pub n_head_kv: u64,
    pub head_dim: u64,
    pub n_vocab: u64,
    pub n_ctx_train: u64,
    pub rope_base: f32,
    /// `attention.temperature_scale`: when set, llama.cpp scales Q by a
    /// per-position input (`build_inp_attn_scale`), a node the graph of a
    /// `llama` file does not have.
    pub temperature_scale: Option<f32>,
    pub tied: bool,
}

/// A `mistral3` model (`src/models/mistral3.cpp`): Llama's tensors, with the
/// keys of the Ministral 3 converter that shape llama.cpp's graph (its YaRN
/// keys size nothing and are not written).
pub(crate) fn mistral3(p: &Mistral3) -> Draft {
    let embd = p.n_embd;
    let mut d = Draft::new(
        "mistral3",
        &Common {
            n_layer: p.n_layer,
            n_embd: u32::try_from(embd).unwrap_or(u32::MAX),
            n_ff: u32::try_from(p.n_ff).unwrap_or(u32::MAX),
            n_head: u32::try_from(p.n_head).unwrap_or(u32::MAX),
            n_head_kv: u32::try_from(p.n_head_kv).unwrap_or(u32::MAX),
            n_vocab: p.n_vocab,
            n_ctx_train: p.n_ctx_train,
            rope_base: p.rope_base,
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
    d.kv("rope.dimension_count", head);
    if let Some(t) = p.temperature_scale {
        d.kv("attention.temperature_scale", t);
    }
    d.embeddings(embd, p.tied);
    let (q, kv) = (
        p.n_head.saturating_mul(p.head_dim),
        p.n_head_kv.saturating_mul(p.head_dim),
    );
    for il in 0..p.n_layer {
        d.blk(il, "attn_norm.weight", &[embd]);
        attention(&mut d, il, embd, q, kv, false);
        d.blk(il, "ffn_norm.weight", &[embd]);
        swiglu(&mut d, il, embd, p.n_ff);
    }
    d
}

/// The hyper-parameters of an `olmo2` model (OLMo 2, and OLMo 3, which
/// llama.cpp loads as `olmo2` with a sliding window).
pub(crate) struct Olmo2 {
    pub n_layer: u32,
    pub n_embd: u64,
    pub n_ff: u64,
    pub n_head: u64,
    pub n_head_kv: u64,
    pub n_vocab: u64,
    pub n_ctx_train: u64,
    pub rope_base: f32,
    /// OLMo 3's window on 3 layers of 4 (`load_swa_pattern(ml, 4)`).
    pub sliding_window: Option<u32>,
}

/// An `olmo2` model (`src/models/olmo2.cpp`): no pre-norms, a post-norm
/// after attention and after the FFN, Q and K norms over the whole
/// projection (not per head), an output matrix always of its own; the head
/// size is the hidden size over the heads.
pub(crate) fn olmo2(p: &Olmo2) -> Draft {
    let embd = p.n_embd;
    let mut d = Draft::new(
        "olmo2",
        &Common {
            n_layer: p.n_layer,
            n_embd: u32::try_from(embd).unwrap_or(u32::MAX),
            n_ff: u32::try_from(p.n_ff).unwrap_or(u32::MAX),
            n_head: u32::try_from(p.n_head).unwrap_or(u32::MAX),
            n_head_kv: u32::try_from(p.n_head_kv).unwrap_or(u32::MAX),
            n_vocab: p.n_vocab,
            n_ctx_train: p.n_ctx_train,
            rope_base: p.rope_base,
            norm_eps: 1e-6,
            ..Common::default()
        },
    );
    d.kv(
        "attention.head_count_kv",
        u32::try_from(p.n_head_kv).unwrap_or(u32::MAX),
    );
    if let Some(w) = p.sliding_window {
        d.kv("attention.sliding_window", w);
    }
    d.embeddings(embd, false);
    let kv = (embd / p.n_head.max(1)).saturating_mul(p.n_head_kv);
    for il in 0..p.n_layer {
        attention(&mut d, il, embd, embd, kv, false);
        d.blk(il, "attn_q_norm.weight", &[embd]);
        d.blk(il, "attn_k_norm.weight", &[kv]);
        d.blk(il, "post_attention_norm.weight", &[embd]);
        swiglu(&mut d, il, embd, p.n_ff);
        d.blk(il, "post_ffw_norm.weight", &[embd]);
    }
    d
}

/// Devstral-Small-2-24B-Instruct-2512 as llama.cpp converts it (40 layers,
/// hidden 5120, 32 heads, 8 KV heads of 128, FFN 32768, vocabulary 131072,
/// context 393216, RoPE base 1e8, attention temperature scale 0.1): the
/// values of llama.cpp's dump of the converted header
/// (danbev/learning-ai `notes/llama.cpp/devstral2-conversion.md` at
/// 93693d4). Its YaRN keys size nothing and are left out.
pub(super) fn devstral_small_2() -> Draft {
    mistral3(&Mistral3 {
        n_layer: 40,
        n_embd: 5120,
        n_ff: 32768,
        n_head: 32,
        n_head_kv: 8,
        head_dim: 128,
        n_vocab: 131_072,
        n_ctx_train: 393_216,
        rope_base: 100_000_000.0,
        temperature_scale: Some(0.1),
        tied: false,
    })
}

/// OLMo-2-1124-7B (32 layers, hidden 4096, 32 heads and 32 KV heads,
/// FFN 11008, vocabulary 100352 as padded, context 4096, RoPE base 500000,
/// no window): litgpt's `config.py` (Lightning-AI/litgpt at 26857050, its
/// copy of allenai/OLMo-2-1124-7B's config.json; the OLMo 2 entries came in
/// with d19df7aa, 2025-06-04).
pub(super) fn olmo2_7b() -> Draft {
    olmo2(&Olmo2 {
        n_layer: 32,
        n_embd: 4096,
        n_ff: 11008,
        n_head: 32,
        n_head_kv: 32,
        n_vocab: 100_352,
        n_ctx_train: 4096,
        rope_base: 500_000.0,
        sliding_window: None,
    })
}

/// Olmo-3-7B (32 layers, hidden 4096, 32 heads and 32 KV heads, FFN
/// 11008, vocabulary 100278, context 65536, a 4096 window on 3 layers of
/// 4): fairseq2's `olmo3_7b` configuration
/// (facebookresearch/fairseq2 `src/fairseq2/models/olmo/config.py` at
/// 1d050dd). llama.cpp loads it as `olmo2` with the window key.
pub(super) fn olmo3_7b() -> Draft {
    olmo2(&Olmo2 {
        n_layer: 32,
        n_embd: 4096,
        n_ff: 11008,
        n_head: 32,
        n_head_kv: 32,
        n_vocab: 100_278,
        n_ctx_train: 65_536,
        rope_base: 500_000.0,
        sliding_window: Some(4096),
    })
}

/// The hyper-parameters of a `smollm3` model.
pub(crate) struct Smollm3 {
    pub n_layer: u32,
    pub n_embd: u64,
    pub n_ff: u64,
    pub n_head: u64,
    pub n_head_kv: u64,
    pub head_dim: u64,
    pub n_vocab: u64,
    pub n_ctx_train: u64,
    pub rope_base: f32,
    pub tied: bool,
}

/// A `smollm3` model (`src/models/smollm3.cpp`): Llama's tensors without
/// RoPE factors or biases; llama.cpp skips RoPE on every 4th layer
/// (`n_no_rope_layer_step`, fixed at 4, read from no key).
pub(crate) fn smollm3(p: &Smollm3) -> Draft {
    let embd = p.n_embd;
    let mut d = Draft::new(
        "smollm3",
        &Common {
            n_layer: p.n_layer,
            n_embd: u32::try_from(embd).unwrap_or(u32::MAX),
            n_ff: u32::try_from(p.n_ff).unwrap_or(u32::MAX),
            n_head: u32::try_from(p.n_head).unwrap_or(u32::MAX),
            n_head_kv: u32::try_from(p.n_head_kv).unwrap_or(u32::MAX),
            n_vocab: p.n_vocab,
            n_ctx_train: p.n_ctx_train,
            rope_base: p.rope_base,
            norm_eps: 1e-6,
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
    d.embeddings(embd, p.tied);
    let (q, kv) = (
        p.n_head.saturating_mul(p.head_dim),
        p.n_head_kv.saturating_mul(p.head_dim),
    );
    for il in 0..p.n_layer {
        d.blk(il, "attn_norm.weight", &[embd]);
        attention(&mut d, il, embd, q, kv, false);
        d.blk(il, "ffn_norm.weight", &[embd]);
        swiglu(&mut d, il, embd, p.n_ff);
    }
    d
}

/// SmolLM3-3B (36 layers, hidden 2048, 16 heads, 4 KV heads of 128, FFN
/// 11008, vocabulary 128256, context 65536, RoPE base 5e6, tied
/// embeddings): HuggingFaceTB/SmolLM3-3B's config.json as a C# test copies
/// it (code-index file id 59164739030, "Authoritative copy of
/// HuggingFaceTB/SmolLM3-3B/config.json's shape").
pub(super) fn smollm3_3b() -> Draft {
    smollm3(&Smollm3 {
        n_layer: 36,
        n_embd: 2048,
        n_ff: 11008,
        n_head: 16,
        n_head_kv: 4,
        head_dim: 128,
        n_vocab: 128_256,
        n_ctx_train: 65_536,
        rope_base: 5_000_000.0,
        tied: true,
    })
}
