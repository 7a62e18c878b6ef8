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
    const LAYERS: u32 = 48;
    const EMBD: u64 = 5120;
    const FF_EXP: u64 = 8192;
    const EXPERTS: u64 = 16;
    let mut d = Draft::new(
        "llama4",
        &Common {
            n_layer: LAYERS,
            n_embd: EMBD as u32,
            n_ff: 16384,
            n_head: 40,
            n_head_kv: 8,
            n_expert: EXPERTS as u32,
            n_vocab: 202_048,
            n_ctx_train: 10_485_760,
            rope_base: 500_000.0,
            ..Common::default()
        },
    );
    d.kv("attention.head_count_kv", 8u32);
    d.kv("rope.dimension_count", 128u32);
    d.kv("expert_count", EXPERTS as u32);
    d.kv("expert_used_count", 1u32);
    d.kv("expert_feed_forward_length", FF_EXP as u32);
    d.kv("interleave_moe_layer_step", 1u32);
    d.embeddings(EMBD, false);
    for il in 0..LAYERS {
        d.blk(il, "attn_norm.weight", &[EMBD]);
        gqa(&mut d, il, EMBD, 40 * 128, 8 * 128);
        d.blk(il, "ffn_norm.weight", &[EMBD]);
        experts(&mut d, il, EMBD, FF_EXP, EXPERTS);
        shared_expert(&mut d, il, EMBD, FF_EXP);
    }
    d
}

/// GLM-4.5-Air with its MTP block (46 layers + 1, hidden 4096, 96 heads, 8
/// KV heads of 128 with Q/K/V biases, 128 experts of 1408 with 8 used and
/// one shared, the first layer dense (10944), vocabulary 151552, context
/// 131072). `nextn_predict_layers` 1: llama.cpp skips the last block unless
/// asked to load it (`src/models/glm4-moe.cpp`).
pub(super) fn glm45_air() -> Draft {
    const TRUNK: u32 = 46;
    const EMBD: u64 = 4096;
    const FF: u64 = 10944;
    const FF_EXP: u64 = 1408;
    const EXPERTS: u64 = 128;
    let mut d = Draft::new(
        "glm4moe",
        &Common {
            n_layer: TRUNK + 1,
            n_embd: EMBD as u32,
            n_ff: FF as u32,
            n_head: 96,
            n_head_kv: 8,
            n_expert: EXPERTS as u32,
            n_vocab: 151_552,
            n_ctx_train: 131_072,
            rope_base: 1_000_000.0,
            ..Common::default()
        },
    );
    d.kv("attention.head_count_kv", 8u32);
    d.kv("attention.key_length", 128u32);
    d.kv("attention.value_length", 128u32);
    d.kv("rope.dimension_count", 64u32);
    d.kv("nextn_predict_layers", 1u32);
    d.kv("leading_dense_block_count", 1u32);
    d.kv("expert_count", EXPERTS as u32);
    d.kv("expert_used_count", 8u32);
    d.kv("expert_shared_count", 1u32);
    d.kv("expert_feed_forward_length", FF_EXP as u32);
    d.kv("expert_weights_scale", 1.0f32);
    d.kv("expert_weights_norm", true);
    d.kv("expert_gating_func", 2u32);
    d.embeddings(EMBD, false);
    let (q, kv) = (96 * 128, 8 * 128);
    for il in 0..=TRUNK {
        d.blk(il, "attn_norm.weight", &[EMBD]);
        gqa(&mut d, il, EMBD, q, kv);
        d.blk(il, "attn_q.bias", &[q]);
        d.blk(il, "attn_k.bias", &[kv]);
        d.blk(il, "attn_v.bias", &[kv]);
        d.blk(il, "post_attention_norm.weight", &[EMBD]);
        if il == 0 {
            d.blk(il, "ffn_gate.weight", &[EMBD, FF]);
            d.blk(il, "ffn_down.weight", &[FF, EMBD]);
            d.blk(il, "ffn_up.weight", &[EMBD, FF]);
        } else {
            experts(&mut d, il, EMBD, FF_EXP, EXPERTS);
            d.blk(il, "exp_probs_b.bias", &[EXPERTS]);
            shared_expert(&mut d, il, EMBD, FF_EXP);
        }
        if il == TRUNK {
            d.nextn(il, EMBD);
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
