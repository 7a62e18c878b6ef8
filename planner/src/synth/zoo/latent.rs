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
    const LAYERS: u32 = 27;
    const EMBD: u64 = 2048;
    const HEADS: u64 = 16;
    const LORA: u64 = 512;
    const NOPE: u64 = 128;
    const ROPE: u64 = 64;
    const V: u64 = 128;
    const EXPERTS: u64 = 64;
    const FF_EXP: u64 = 1408;
    const FF: u64 = 10944;
    let mut d = Draft::new(
        "deepseek2",
        &Common {
            n_layer: LAYERS,
            n_embd: EMBD as u32,
            n_ff: FF as u32,
            n_head: HEADS as u32,
            n_head_kv: if split { 1 } else { HEADS as u32 },
            n_expert: EXPERTS as u32,
            n_vocab: 102_400,
            n_ctx_train: 163_840,
            norm_eps: 1e-6,
            ..Common::default()
        },
    );
    if split {
        // The converter's MLA layout: one latent "head" of lora + rope for K,
        // lora for V; the per-head sizes move to the `_mla` keys.
        d.kv("attention.head_count_kv", 1u32);
        d.kv("attention.key_length", (LORA + ROPE) as u32);
        d.kv("attention.value_length", LORA as u32);
        d.kv("attention.key_length_mla", (NOPE + ROPE) as u32);
        d.kv("attention.value_length_mla", V as u32);
    } else {
        d.kv("attention.head_count_kv", HEADS as u32);
        d.kv("attention.key_length", (NOPE + ROPE) as u32);
        d.kv("attention.value_length", V as u32);
    }
    d.kv("rope.dimension_count", ROPE as u32);
    d.kv("attention.kv_lora_rank", LORA as u32);
    d.kv("leading_dense_block_count", 1u32);
    d.kv("expert_count", EXPERTS as u32);
    d.kv("expert_used_count", 6u32);
    d.kv("expert_shared_count", 2u32);
    d.kv("expert_feed_forward_length", FF_EXP as u32);
    d.kv("expert_weights_scale", 1.0f32);
    d.kv("rope.scaling.type", "yarn");
    d.kv("rope.scaling.factor", 40.0f32);
    d.kv("rope.scaling.original_context_length", 4096u32);
    d.kv("rope.scaling.yarn_log_multiplier", 0.0707f32);
    d.embeddings(EMBD, false);
    for il in 0..LAYERS {
        d.blk(il, "attn_norm.weight", &[EMBD]);
        d.blk(il, "attn_kv_a_norm.weight", &[LORA]);
        d.blk(il, "attn_q.weight", &[EMBD, HEADS * (NOPE + ROPE)]);
        d.blk(il, "attn_kv_a_mqa.weight", &[EMBD, LORA + ROPE]);
        if split {
            d.blk(il, "attn_k_b.weight", &[NOPE, LORA, HEADS]);
            d.blk(il, "attn_v_b.weight", &[LORA, V, HEADS]);
        } else {
            d.blk(il, "attn_kv_b.weight", &[LORA, HEADS * (NOPE + V)]);
        }
        d.blk(il, "attn_output.weight", &[HEADS * V, EMBD]);
        d.blk(il, "ffn_norm.weight", &[EMBD]);
        if il == 0 {
            d.blk(il, "ffn_gate.weight", &[EMBD, FF]);
            d.blk(il, "ffn_down.weight", &[FF, EMBD]);
            d.blk(il, "ffn_up.weight", &[EMBD, FF]);
        } else {
            let shared = 2 * FF_EXP;
            d.blk(il, "ffn_gate_inp.weight", &[EMBD, EXPERTS]);
            d.blk(il, "ffn_down_exps.weight", &[FF_EXP, EMBD, EXPERTS]);
            d.blk(il, "ffn_gate_exps.weight", &[EMBD, FF_EXP, EXPERTS]);
            d.blk(il, "ffn_up_exps.weight", &[EMBD, FF_EXP, EXPERTS]);
            d.blk(il, "ffn_gate_shexp.weight", &[EMBD, shared]);
            d.blk(il, "ffn_down_shexp.weight", &[shared, EMBD]);
            d.blk(il, "ffn_up_shexp.weight", &[EMBD, shared]);
        }
    }
    d
}
