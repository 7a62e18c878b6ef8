//! Hybrid models: attention layers with a KV cache between recurrent layers
//! that keep a fixed state per sequence (`src/llama-memory-hybrid.cpp`,
//! `src/llama-memory-recurrent.cpp`).

use super::{Common, Draft};

/// Qwen3-Next-80B-A3B with its MTP block (48 layers + 1, hidden 2048; every
/// 4th layer full attention with 16 heads and 2 KV heads of 256 and a gated
/// query, the others gated delta-nets with 16 key heads and 32 value heads
/// of 128 and a convolution of 4; 512 experts of 512 with 10 used and a
/// shared one; vocabulary 151936, context 262144). The layer kinds come
/// from `full_attention_interval` (`src/models/qwen3next.cpp`).
pub(super) fn qwen3next_80b() -> Draft {
    const TRUNK: u32 = 48;
    const EMBD: u64 = 2048;
    const HEAD: u64 = 256;
    const HEADS: u64 = 16;
    const KV_HEADS: u64 = 2;
    const K_HEADS: u64 = 16;
    const V_HEADS: u64 = 32;
    const SSM_HEAD: u64 = 128;
    const CONV: u64 = 4;
    const EXPERTS: u64 = 512;
    const FF_EXP: u64 = 512;
    let mut d = Draft::new(
        "qwen3next",
        &Common {
            n_layer: TRUNK + 1,
            n_embd: EMBD as u32,
            n_ff: 5120,
            n_head: HEADS as u32,
            n_head_kv: KV_HEADS as u32,
            n_expert: EXPERTS as u32,
            n_vocab: 151_936,
            n_ctx_train: 262_144,
            rope_base: 10_000_000.0,
            norm_eps: 1e-6,
            ..Common::default()
        },
    );
    let (key_dim, value_dim) = (K_HEADS * SSM_HEAD, V_HEADS * SSM_HEAD);
    d.kv("attention.head_count_kv", KV_HEADS as u32);
    d.kv("attention.key_length", HEAD as u32);
    d.kv("attention.value_length", HEAD as u32);
    d.kv("rope.dimension_count", (HEAD / 4) as u32);
    d.kv("nextn_predict_layers", 1u32);
    d.kv("expert_count", EXPERTS as u32);
    d.kv("expert_used_count", 10u32);
    d.kv("expert_feed_forward_length", FF_EXP as u32);
    d.kv("expert_shared_feed_forward_length", FF_EXP as u32);
    d.kv("ssm.conv_kernel", CONV as u32);
    d.kv("ssm.inner_size", value_dim as u32);
    d.kv("ssm.state_size", SSM_HEAD as u32);
    d.kv("ssm.time_step_rank", V_HEADS as u32);
    d.kv("ssm.group_count", K_HEADS as u32);
    d.kv("full_attention_interval", 4u32);
    d.embeddings(EMBD, false);
    for il in 0..=TRUNK {
        d.blk(il, "attn_norm.weight", &[EMBD]);
        d.blk(il, "post_attention_norm.weight", &[EMBD]);
        if il == TRUNK || (il + 1) % 4 == 0 {
            d.blk(il, "attn_q.weight", &[EMBD, 2 * HEADS * HEAD]);
            d.blk(il, "attn_k.weight", &[EMBD, KV_HEADS * HEAD]);
            d.blk(il, "attn_v.weight", &[EMBD, KV_HEADS * HEAD]);
            d.blk(il, "attn_output.weight", &[HEADS * HEAD, EMBD]);
            d.blk(il, "attn_q_norm.weight", &[HEAD]);
            d.blk(il, "attn_k_norm.weight", &[HEAD]);
        } else {
            let conv_dim = 2 * key_dim + value_dim;
            d.blk(il, "attn_qkv.weight", &[EMBD, conv_dim]);
            d.blk(il, "attn_gate.weight", &[EMBD, value_dim]);
            d.blk(il, "ssm_conv1d.weight", &[CONV, conv_dim]);
            d.blk(il, "ssm_dt.bias", &[V_HEADS]);
            d.blk(il, "ssm_a", &[V_HEADS]);
            d.blk(il, "ssm_ba.weight", &[EMBD, 2 * V_HEADS]);
            d.blk(il, "ssm_norm.weight", &[SSM_HEAD]);
            d.blk(il, "ssm_out.weight", &[value_dim, EMBD]);
        }
        d.blk(il, "ffn_gate_inp.weight", &[EMBD, EXPERTS]);
        d.blk(il, "ffn_down_exps.weight", &[FF_EXP, EMBD, EXPERTS]);
        d.blk(il, "ffn_gate_exps.weight", &[EMBD, FF_EXP, EXPERTS]);
        d.blk(il, "ffn_up_exps.weight", &[EMBD, FF_EXP, EXPERTS]);
        d.blk(il, "ffn_gate_inp_shexp.weight", &[EMBD]);
        d.blk(il, "ffn_gate_shexp.weight", &[EMBD, FF_EXP]);
        d.blk(il, "ffn_up_shexp.weight", &[EMBD, FF_EXP]);
        d.blk(il, "ffn_down_shexp.weight", &[FF_EXP, EMBD]);
        if il == TRUNK {
            d.nextn(il, EMBD);
        }
    }
    d
}

/// Granite-4.0-H-Tiny (40 layers, hidden 1536; attention with 12 heads and
/// 4 KV heads of 128 on layers 5, 15, 25 and 35, Mamba-2 on the others with
/// 48 heads of 64, state 128, one group, convolution 4; 64 experts of 512
/// with 6 used and a shared one of 1024; tied embeddings; vocabulary
/// 100352, context 131072). Recurrent layers are those with 0 KV heads
/// (`src/models/granite-hybrid.cpp`).
pub(super) fn granite4_h_tiny() -> Draft {
    const LAYERS: u32 = 40;
    const EMBD: u64 = 1536;
    const INNER: u64 = 2 * EMBD;
    const STATE: u64 = 128;
    const GROUPS: u64 = 1;
    const SSM_HEADS: u64 = 48;
    const CONV: u64 = 4;
    const FF_EXP: u64 = 512;
    const FF_SHARED: u64 = 1024;
    const EXPERTS: u64 = 64;
    let attention = |il: u32| il % 10 == 5;
    let mut d = Draft::new(
        "granitehybrid",
        &Common {
            n_layer: LAYERS,
            n_embd: EMBD as u32,
            n_ff: FF_EXP as u32,
            n_head: 12,
            n_head_kv: 4,
            n_expert: EXPERTS as u32,
            n_vocab: 100_352,
            n_ctx_train: 131_072,
            ..Common::default()
        },
    );
    let kv_heads = (0..LAYERS)
        .map(|il| if attention(il) { 4 } else { 0 })
        .collect();
    d.kv_u32s("attention.head_count_kv", kv_heads);
    d.kv("expert_count", EXPERTS as u32);
    d.kv("expert_used_count", 6u32);
    d.kv("expert_shared_feed_forward_length", FF_SHARED as u32);
    d.kv("ssm.conv_kernel", CONV as u32);
    d.kv("ssm.inner_size", INNER as u32);
    d.kv("ssm.state_size", STATE as u32);
    d.kv("ssm.time_step_rank", SSM_HEADS as u32);
    d.kv("ssm.group_count", GROUPS as u32);
    d.kv("attention.scale", 0.007_812_5f32);
    d.kv("embedding_scale", 12.0f32);
    d.kv("residual_scale", 0.22f32);
    d.kv("logit_scale", 6.0f32);
    d.kv("rope.scaling.finetuned", false);
    d.embeddings(EMBD, true);
    for il in 0..LAYERS {
        d.blk(il, "attn_norm.weight", &[EMBD]);
        if attention(il) {
            d.blk(il, "attn_q.weight", &[EMBD, 12 * 128]);
            d.blk(il, "attn_k.weight", &[EMBD, 4 * 128]);
            d.blk(il, "attn_v.weight", &[EMBD, 4 * 128]);
            d.blk(il, "attn_output.weight", &[12 * 128, EMBD]);
        } else {
            let conv_dim = INNER + 2 * GROUPS * STATE;
            d.blk(
                il,
                "ssm_in.weight",
                &[EMBD, 2 * INNER + 2 * GROUPS * STATE + SSM_HEADS],
            );
            d.blk(il, "ssm_conv1d.weight", &[CONV, conv_dim]);
            d.blk(il, "ssm_conv1d.bias", &[conv_dim]);
            d.blk(il, "ssm_dt.bias", &[SSM_HEADS]);
            d.blk(il, "ssm_a", &[1, SSM_HEADS]);
            d.blk(il, "ssm_d", &[1, SSM_HEADS]);
            d.blk(il, "ssm_norm.weight", &[INNER / GROUPS, GROUPS]);
            d.blk(il, "ssm_out.weight", &[INNER, EMBD]);
        }
        d.blk(il, "ffn_norm.weight", &[EMBD]);
        d.blk(il, "ffn_gate_inp.weight", &[EMBD, EXPERTS]);
        d.blk(il, "ffn_gate_exps.weight", &[EMBD, FF_EXP, EXPERTS]);
        d.blk(il, "ffn_down_exps.weight", &[FF_EXP, EMBD, EXPERTS]);
        d.blk(il, "ffn_up_exps.weight", &[EMBD, FF_EXP, EXPERTS]);
        d.blk(il, "ffn_gate_shexp.weight", &[EMBD, FF_SHARED]);
        d.blk(il, "ffn_up_shexp.weight", &[EMBD, FF_SHARED]);
        d.blk(il, "ffn_down_shexp.weight", &[FF_SHARED, EMBD]);
    }
    d
}
