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
    granite4_h(&Granite4H {
        n_layer: 40,
        n_embd: 1536,
        n_head: 12,
        n_head_kv: 4,
        head_dim: 128,
        n_vocab: 100_352,
        n_ctx_train: 131_072,
        attention_layers: vec![5, 15, 25, 35],
        d_conv: 4,
        d_inner: 3072,
        d_state: 128,
        n_ssm_head: 48,
        n_group: 1,
        n_expert: 64,
        n_expert_used: 6,
        n_ff_exp: 512,
        n_ff_shexp: 1024,
        tied: true,
    })
}

/// The hyper-parameters of a Granite 4.0 H MoE model (`granitehybrid`),
/// under the names of its GGUF keys where it has one. The dense FFN layout
/// (no experts) is not laid out: its accounting is not recorded.
pub(crate) struct Granite4H {
    pub n_layer: u32,
    pub n_embd: u64,
    pub n_head: u64,
    /// KV heads of an attention layer (0 on the Mamba-2 layers).
    pub n_head_kv: u64,
    pub head_dim: u64,
    pub n_vocab: u64,
    pub n_ctx_train: u64,
    /// The attention layers; the others are Mamba-2.
    pub attention_layers: Vec<u32>,
    /// `ssm.conv_kernel`.
    pub d_conv: u64,
    /// `ssm.inner_size` (llama.cpp loads only twice the hidden size).
    pub d_inner: u64,
    /// `ssm.state_size`.
    pub d_state: u64,
    /// `ssm.time_step_rank`: the SSM heads.
    pub n_ssm_head: u64,
    /// `ssm.group_count`.
    pub n_group: u64,
    pub n_expert: u64,
    pub n_expert_used: u32,
    /// `feed_forward_length`: one expert's width.
    pub n_ff_exp: u64,
    /// `expert_shared_feed_forward_length` (0: no shared expert).
    pub n_ff_shexp: u64,
    /// No `output.weight`: the output is the token embedding.
    pub tied: bool,
}

/// A Granite 4.0 H MoE model: the keys and tensors of
/// `src/models/granite-hybrid.cpp`. The scale keys are Tiny's: they size
/// nothing.
pub(crate) fn granite4_h(p: &Granite4H) -> Draft {
    let embd = p.n_embd;
    let (inner, state, groups, ssm_heads) = (p.d_inner, p.d_state, p.n_group, p.n_ssm_head);
    let (experts, ff_exp, ff_shared) = (p.n_expert, p.n_ff_exp, p.n_ff_shexp);
    let u32_of = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let attention = |il: u32| p.attention_layers.contains(&il);
    let mut d = Draft::new(
        "granitehybrid",
        &Common {
            n_layer: p.n_layer,
            n_embd: u32_of(embd),
            n_ff: u32_of(ff_exp),
            n_head: u32_of(p.n_head),
            n_head_kv: u32_of(p.n_head_kv),
            n_expert: u32_of(experts),
            n_vocab: p.n_vocab,
            n_ctx_train: p.n_ctx_train,
            ..Common::default()
        },
    );
    let kv_heads = (0..p.n_layer)
        .map(|il| {
            if attention(il) {
                u32_of(p.n_head_kv)
            } else {
                0
            }
        })
        .collect();
    d.kv_u32s("attention.head_count_kv", kv_heads);
    if p.head_dim != embd / p.n_head.max(1) {
        d.kv("attention.key_length", u32_of(p.head_dim));
        d.kv("attention.value_length", u32_of(p.head_dim));
    }
    d.kv("expert_count", u32_of(experts));
    d.kv("expert_used_count", p.n_expert_used);
    d.kv("expert_shared_feed_forward_length", u32_of(ff_shared));
    d.kv("ssm.conv_kernel", u32_of(p.d_conv));
    d.kv("ssm.inner_size", u32_of(inner));
    d.kv("ssm.state_size", u32_of(state));
    d.kv("ssm.time_step_rank", u32_of(ssm_heads));
    d.kv("ssm.group_count", u32_of(groups));
    d.kv("attention.scale", 0.007_812_5f32);
    d.kv("embedding_scale", 12.0f32);
    d.kv("residual_scale", 0.22f32);
    d.kv("logit_scale", 6.0f32);
    d.kv("rope.scaling.finetuned", false);
    d.embeddings(embd, p.tied);
    let (q, kv) = (p.n_head * p.head_dim, p.n_head_kv * p.head_dim);
    for il in 0..p.n_layer {
        d.blk(il, "attn_norm.weight", &[embd]);
        if attention(il) {
            d.blk(il, "attn_q.weight", &[embd, q]);
            d.blk(il, "attn_k.weight", &[embd, kv]);
            d.blk(il, "attn_v.weight", &[embd, kv]);
            d.blk(il, "attn_output.weight", &[q, embd]);
        } else {
            let conv_dim = inner + 2 * groups * state;
            d.blk(
                il,
                "ssm_in.weight",
                &[embd, 2 * inner + 2 * groups * state + ssm_heads],
            );
            d.blk(il, "ssm_conv1d.weight", &[p.d_conv, conv_dim]);
            d.blk(il, "ssm_conv1d.bias", &[conv_dim]);
            d.blk(il, "ssm_dt.bias", &[ssm_heads]);
            d.blk(il, "ssm_a", &[1, ssm_heads]);
            d.blk(il, "ssm_d", &[1, ssm_heads]);
            d.blk(il, "ssm_norm.weight", &[inner / groups.max(1), groups]);
            d.blk(il, "ssm_out.weight", &[inner, embd]);
        }
        d.blk(il, "ffn_norm.weight", &[embd]);
        d.blk(il, "ffn_gate_inp.weight", &[embd, experts]);
        d.blk(il, "ffn_gate_exps.weight", &[embd, ff_exp, experts]);
        d.blk(il, "ffn_down_exps.weight", &[ff_exp, embd, experts]);
        d.blk(il, "ffn_up_exps.weight", &[embd, ff_exp, experts]);
        if ff_shared > 0 {
            d.blk(il, "ffn_gate_shexp.weight", &[embd, ff_shared]);
            d.blk(il, "ffn_up_shexp.weight", &[embd, ff_shared]);
            d.blk(il, "ffn_down_shexp.weight", &[ff_shared, embd]);
        }
    }
    d
}
