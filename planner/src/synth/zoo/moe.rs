//! Attention-cache rules on mixture-of-experts (and one dense) shapes:
//! Llama 4's chunked attention, GLM-4.5's MTP block, gpt-oss's sliding
//! window with sinks, Mixtral's few large experts and Phi-3's fused
//! projections.

use super::{Common, Draft};

/// Q, K, V and output projections of a plain GQA layer.
fn gqa(d: &mut Draft, il: u32, embd: u64, q: u64, kv: u64) {
    d.blk(il, "attn_q.weight", &[embd, q]);
    d.blk(il, "attn_k.weight", &[embd, kv]);
    d.blk(il, "attn_v.weight", &[embd, kv]);
    d.blk(il, "attn_output.weight", &[q, embd]);
}

/// Stacked routed experts and their router.
fn experts(d: &mut Draft, il: u32, embd: u64, ff: u64, n: u64) {
    d.blk(il, "ffn_gate_inp.weight", &[embd, n]);
    d.blk(il, "ffn_gate_exps.weight", &[embd, ff, n]);
    d.blk(il, "ffn_down_exps.weight", &[ff, embd, n]);
    d.blk(il, "ffn_up_exps.weight", &[embd, ff, n]);
}

/// A shared expert of width `ff`.
fn shared_expert(d: &mut Draft, il: u32, embd: u64, ff: u64) {
    d.blk(il, "ffn_gate_shexp.weight", &[embd, ff]);
    d.blk(il, "ffn_down_shexp.weight", &[ff, embd]);
    d.blk(il, "ffn_up_shexp.weight", &[embd, ff]);
}

/// Llama-4-Scout-17B-16E (text: 48 layers, hidden 5120, 40 heads, 8 KV
/// heads of 128, 16 experts of 8192 with one used and a shared one, MoE on
/// every layer, vocabulary 202048, context 10M). No `sliding_window` key:
/// llama.cpp (`src/models/llama4.cpp`) then uses chunked attention of 8192
/// on 3 of every 4 layers.
pub(super) fn llama4_scout() -> Draft {
    llama4(&Llama4 {
        n_layer: 48,
        n_embd: 5120,
        n_ff: 16384,
        n_head: 40,
        n_head_kv: 8,
        head_dim: 128,
        n_expert: 16,
        n_expert_used: 1,
        n_ff_exp: 8192,
        moe_step: 1,
        n_vocab: 202_048,
        n_ctx_train: 10_485_760,
        tied: false,
    })
}

/// The hyper-parameters of a Llama 4 (`llama4`) model, under the GGUF keys
/// (`feed_forward_length` the dense layers' `intermediate_size_mlp`,
/// `expert_feed_forward_length` the experts' and the shared expert's
/// `intermediate_size`).
pub(crate) struct Llama4 {
    pub n_layer: u32,
    pub n_embd: u64,
    pub n_ff: u64,
    pub n_head: u64,
    pub n_head_kv: u64,
    pub head_dim: u64,
    pub n_expert: u64,
    pub n_expert_used: u32,
    pub n_ff_exp: u64,
    /// `interleave_moe_layer_step`: every n-th layer is MoE, the others dense.
    pub moe_step: u32,
    pub n_vocab: u64,
    pub n_ctx_train: u64,
    pub tied: bool,
}

/// A Llama 4 model: routed experts with one shared expert on every
/// `moe_step`-th layer, a dense FFN on the others; chunked attention.
pub(crate) fn llama4(p: &Llama4) -> Draft {
    let embd = p.n_embd;
    let n32 = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let mut d = Draft::new(
        "llama4",
        &Common {
            n_layer: p.n_layer,
            n_embd: n32(embd),
            n_ff: n32(p.n_ff),
            n_head: n32(p.n_head),
            n_head_kv: n32(p.n_head_kv),
            n_expert: n32(p.n_expert),
            n_vocab: p.n_vocab,
            n_ctx_train: p.n_ctx_train,
            rope_base: 500_000.0,
            ..Common::default()
        },
    );
    d.kv("attention.head_count_kv", n32(p.n_head_kv));
    d.kv("rope.dimension_count", n32(p.head_dim));
    d.kv("expert_count", n32(p.n_expert));
    d.kv("expert_used_count", p.n_expert_used);
    d.kv("expert_feed_forward_length", n32(p.n_ff_exp));
    d.kv("interleave_moe_layer_step", p.moe_step);
    if p.head_dim.saturating_mul(p.n_head) != embd {
        d.kv("attention.key_length", n32(p.head_dim));
        d.kv("attention.value_length", n32(p.head_dim));
    }
    d.embeddings(embd, p.tied);
    let (q, kv) = (
        p.n_head.saturating_mul(p.head_dim),
        p.n_head_kv.saturating_mul(p.head_dim),
    );
    for il in 0..p.n_layer {
        d.blk(il, "attn_norm.weight", &[embd]);
        gqa(&mut d, il, embd, q, kv);
        d.blk(il, "ffn_norm.weight", &[embd]);
        if p.moe_step > 0 && (il + 1) % p.moe_step == 0 {
            experts(&mut d, il, embd, p.n_ff_exp, p.n_expert);
            shared_expert(&mut d, il, embd, p.n_ff_exp);
        } else {
            d.blk(il, "ffn_gate.weight", &[embd, p.n_ff]);
            d.blk(il, "ffn_down.weight", &[p.n_ff, embd]);
            d.blk(il, "ffn_up.weight", &[embd, p.n_ff]);
        }
    }
    d
}

/// GLM-4.5-Air with its MTP block (46 layers + 1, hidden 4096, 96 heads, 8
/// KV heads of 128 with Q/K/V biases, 128 experts of 1408 with 8 used and
/// one shared, the first layer dense (10944), vocabulary 151552, context
/// 131072). `nextn_predict_layers` 1: llama.cpp skips the last block unless
/// asked to load it (`src/models/glm4-moe.cpp`).
pub(super) fn glm45_air() -> Draft {
    glm4moe(&Glm4Moe {
        n_layer: 47,
        n_nextn: 1,
        n_embd: 4096,
        n_ff: 10944,
        n_head: 96,
        n_head_kv: 8,
        head_dim: 128,
        rope_dim: 64,
        n_expert: 128,
        n_expert_used: 8,
        n_expert_shared: 1,
        n_ff_exp: 1408,
        n_dense_lead: 1,
        n_vocab: 151_552,
        n_ctx_train: 131_072,
        tied: false,
    })
}

/// The hyper-parameters of a GLM-4.5 (`glm4moe`) model, under the GGUF
/// keys: `n_layer` is `block_count`, the MTP blocks included.
pub(crate) struct Glm4Moe {
    pub n_layer: u32,
    /// `nextn_predict_layers`: the last blocks, MTP ones.
    pub n_nextn: u32,
    pub n_embd: u64,
    pub n_ff: u64,
    pub n_head: u64,
    pub n_head_kv: u64,
    pub head_dim: u64,
    pub rope_dim: u32,
    pub n_expert: u64,
    pub n_expert_used: u32,
    pub n_expert_shared: u64,
    pub n_ff_exp: u64,
    pub n_dense_lead: u32,
    pub n_vocab: u64,
    pub n_ctx_train: u64,
    pub tied: bool,
}

/// A GLM-4.5 model without Q/K norms (GLM-4.5-Air's layout): Q/K/V biases,
/// leading dense blocks, routed experts with a selection bias and shared
/// ones, the MTP blocks last.
pub(crate) fn glm4moe(p: &Glm4Moe) -> Draft {
    let embd = p.n_embd;
    let n32 = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let mut d = Draft::new(
        "glm4moe",
        &Common {
            n_layer: p.n_layer,
            n_embd: n32(embd),
            n_ff: n32(p.n_ff),
            n_head: n32(p.n_head),
            n_head_kv: n32(p.n_head_kv),
            n_expert: n32(p.n_expert),
            n_vocab: p.n_vocab,
            n_ctx_train: p.n_ctx_train,
            rope_base: 1_000_000.0,
            ..Common::default()
        },
    );
    d.kv("attention.head_count_kv", n32(p.n_head_kv));
    d.kv("attention.key_length", n32(p.head_dim));
    d.kv("attention.value_length", n32(p.head_dim));
    d.kv("rope.dimension_count", p.rope_dim);
    d.kv("nextn_predict_layers", p.n_nextn);
    d.kv("leading_dense_block_count", p.n_dense_lead);
    d.kv("expert_count", n32(p.n_expert));
    d.kv("expert_used_count", p.n_expert_used);
    d.kv("expert_shared_count", n32(p.n_expert_shared));
    d.kv("expert_feed_forward_length", n32(p.n_ff_exp));
    d.kv("expert_weights_scale", 1.0f32);
    d.kv("expert_weights_norm", true);
    d.kv("expert_gating_func", 2u32);
    d.embeddings(embd, p.tied);
    let (q, kv) = (
        p.n_head.saturating_mul(p.head_dim),
        p.n_head_kv.saturating_mul(p.head_dim),
    );
    let trunk = p.n_layer.saturating_sub(p.n_nextn);
    for il in 0..p.n_layer {
        d.blk(il, "attn_norm.weight", &[embd]);
        gqa(&mut d, il, embd, q, kv);
        d.blk(il, "attn_q.bias", &[q]);
        d.blk(il, "attn_k.bias", &[kv]);
        d.blk(il, "attn_v.bias", &[kv]);
        d.blk(il, "post_attention_norm.weight", &[embd]);
        if il < p.n_dense_lead {
            d.blk(il, "ffn_gate.weight", &[embd, p.n_ff]);
            d.blk(il, "ffn_down.weight", &[p.n_ff, embd]);
            d.blk(il, "ffn_up.weight", &[embd, p.n_ff]);
        } else {
            experts(&mut d, il, embd, p.n_ff_exp, p.n_expert);
            d.blk(il, "exp_probs_b.bias", &[p.n_expert]);
            if p.n_expert_shared > 0 {
                let shared = p.n_ff_exp.saturating_mul(p.n_expert_shared);
                shared_expert(&mut d, il, embd, shared);
            }
        }
        if il >= trunk {
            d.nextn(il, embd);
        }
    }
    d
}

/// gpt-oss-20b (24 layers, hidden 2880, 64 heads, 8 KV heads of 64, 32
/// experts of 2880 with 4 used, sliding window 128 on every other layer,
/// attention sinks, biases everywhere, vocabulary 201088, context 131072).
pub(super) fn gpt_oss_20b() -> Draft {
    const LAYERS: u32 = 24;
    const EMBD: u64 = 2880;
    const FF_EXP: u64 = 2880;
    const EXPERTS: u64 = 32;
    const HEAD: u64 = 64;
    let mut d = Draft::new(
        "gpt-oss",
        &Common {
            n_layer: LAYERS,
            n_embd: EMBD as u32,
            n_ff: FF_EXP as u32,
            n_head: 64,
            n_head_kv: 8,
            n_expert: EXPERTS as u32,
            n_vocab: 201_088,
            n_ctx_train: 131_072,
            rope_base: 150_000.0,
            ..Common::default()
        },
    );
    d.kv("attention.head_count_kv", 8u32);
    d.kv("attention.key_length", HEAD as u32);
    d.kv("attention.value_length", HEAD as u32);
    d.kv("rope.dimension_count", HEAD as u32);
    d.kv("attention.sliding_window", 128u32);
    d.kv("expert_count", EXPERTS as u32);
    d.kv("expert_used_count", 4u32);
    d.kv("expert_feed_forward_length", FF_EXP as u32);
    d.kv("rope.scaling.type", "yarn");
    d.kv("rope.scaling.factor", 32.0f32);
    d.kv("rope.scaling.original_context_length", 4096u32);
    d.embeddings(EMBD, false);
    let (q, kv) = (64 * HEAD, 8 * HEAD);
    for il in 0..LAYERS {
        d.blk(il, "attn_norm.weight", &[EMBD]);
        d.blk(il, "post_attention_norm.weight", &[EMBD]);
        gqa(&mut d, il, EMBD, q, kv);
        d.blk(il, "attn_q.bias", &[q]);
        d.blk(il, "attn_k.bias", &[kv]);
        d.blk(il, "attn_v.bias", &[kv]);
        d.blk(il, "attn_output.bias", &[EMBD]);
        d.blk(il, "attn_sinks.weight", &[64]);
        experts(&mut d, il, EMBD, FF_EXP, EXPERTS);
        d.blk(il, "ffn_gate_inp.bias", &[EXPERTS]);
        d.blk(il, "ffn_gate_exps.bias", &[FF_EXP, EXPERTS]);
        d.blk(il, "ffn_down_exps.bias", &[EMBD, EXPERTS]);
        d.blk(il, "ffn_up_exps.bias", &[FF_EXP, EXPERTS]);
    }
    d
}

/// Mixtral-8x7B (32 layers, hidden 4096, 32 heads, 8 KV heads of 128, 8
/// experts of 14336 with 2 used, vocabulary 32000, context 32768).
pub(super) fn mixtral_8x7b() -> Draft {
    const LAYERS: u32 = 32;
    const EMBD: u64 = 4096;
    const FF: u64 = 14336;
    let mut d = Draft::new(
        "llama",
        &Common {
            n_layer: LAYERS,
            n_embd: EMBD as u32,
            n_ff: FF as u32,
            n_head: 32,
            n_head_kv: 8,
            n_expert: 8,
            n_vocab: 32_000,
            n_ctx_train: 32_768,
            rope_base: 1_000_000.0,
            ..Common::default()
        },
    );
    d.kv("attention.head_count_kv", 8u32);
    d.kv("rope.dimension_count", 128u32);
    d.kv("expert_count", 8u32);
    d.kv("expert_used_count", 2u32);
    d.embeddings(EMBD, false);
    for il in 0..LAYERS {
        d.blk(il, "attn_norm.weight", &[EMBD]);
        gqa(&mut d, il, EMBD, 32 * 128, 8 * 128);
        d.blk(il, "ffn_norm.weight", &[EMBD]);
        experts(&mut d, il, EMBD, FF, 8);
    }
    d
}

/// Phi-3-mini-4k-instruct (32 layers, hidden 3072, 32 heads of 96 without
/// GQA, fused QKV and gate/up, vocabulary 32064, context 4096; its
/// `sliding_window` of 2047 is ignored by llama.cpp, `src/models/phi3.cpp`).
pub(super) fn phi3_mini() -> Draft {
    const LAYERS: u32 = 32;
    const EMBD: u64 = 3072;
    const FF: u64 = 8192;
    let mut d = Draft::new(
        "phi3",
        &Common {
            n_layer: LAYERS,
            n_embd: EMBD as u32,
            n_ff: FF as u32,
            n_head: 32,
            n_head_kv: 32,
            n_vocab: 32_064,
            n_ctx_train: 4096,
            ..Common::default()
        },
    );
    d.kv("attention.head_count_kv", 32u32);
    d.kv("rope.dimension_count", 96u32);
    d.kv("attention.sliding_window", 2047u32);
    d.embeddings(EMBD, false);
    for il in 0..LAYERS {
        d.blk(il, "attn_norm.weight", &[EMBD]);
        d.blk(il, "attn_qkv.weight", &[EMBD, 3 * EMBD]);
        d.blk(il, "attn_output.weight", &[EMBD, EMBD]);
        d.blk(il, "ffn_norm.weight", &[EMBD]);
        d.blk(il, "ffn_down.weight", &[FF, EMBD]);
        d.blk(il, "ffn_up.weight", &[EMBD, 2 * FF]);
    }
    d
}
