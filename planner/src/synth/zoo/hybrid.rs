//! Hybrid models: attention layers with a KV cache between recurrent layers
//! that keep a fixed state per sequence (`src/llama-memory-hybrid.cpp`,
//! `src/llama-memory-recurrent.cpp`).

use super::{Common, Draft};
use crate::gguf::{Array, ArrayItems};

/// Qwen3-Next-80B-A3B with its MTP block (48 layers + 1, hidden 2048; every
/// 4th layer full attention with 16 heads and 2 KV heads of 256 and a gated
/// query, the others gated delta-nets with 16 key heads and 32 value heads
/// of 128 and a convolution of 4; 512 experts of 512 with 10 used and a
/// shared one; vocabulary 151936, context 262144). The layer kinds come
/// from `full_attention_interval` (`src/models/qwen3next.cpp`).
pub(super) fn qwen3next_80b() -> Draft {
    qwen35(&Qwen35 {
        arch: "qwen3next",
        n_layer: 48,
        n_embd: 2048,
        n_ff: 5120,
        n_head: 16,
        n_head_kv: 2,
        head_dim: 256,
        n_vocab: 151_936,
        n_ctx_train: 262_144,
        k_heads: 16,
        v_heads: 32,
        ssm_head: 128,
        conv: 4,
        interval: 4,
        rope_dims: 64,
        rope_sections: None,
        tied: false,
        nextn: 1,
        moe: Some((512, 10, 512, 512)),
    })
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

/// The hyper-parameters of a Granite 4.0 H model (`granitehybrid`), under
/// the names of its GGUF keys where it has one: with experts (Tiny, Small)
/// or a dense FFN on every layer (Micro, the Nano sizes).
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
    /// 0: a dense FFN of `n_ff_exp` on every layer.
    pub n_expert: u64,
    pub n_expert_used: u32,
    /// `feed_forward_length`: one expert's width, or the dense FFN's.
    pub n_ff_exp: u64,
    /// `expert_shared_feed_forward_length` (0: no shared expert; the dense
    /// layout has none, whatever the header says).
    pub n_ff_shexp: u64,
    /// No `output.weight`: the output is the token embedding.
    pub tied: bool,
}

/// A Granite 4.0 H model: the keys and tensors of
/// `src/models/granite-hybrid.cpp` (with experts, the router, the experts
/// and the shared expert; without, `ffn_gate`/`ffn_up`/`ffn_down`). The
/// scale keys are Tiny's: they size nothing.
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
        if experts == 0 {
            d.blk(il, "ffn_gate.weight", &[embd, ff_exp]);
            d.blk(il, "ffn_down.weight", &[ff_exp, embd]);
            d.blk(il, "ffn_up.weight", &[embd, ff_exp]);
            continue;
        }
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

/// A Qwen3-Next, Qwen3.5 or Qwen3.6 text model (`qwen3next`; `qwen35`, or
/// `qwen35moe` with experts): every `interval`-th layer full attention with
/// a gated query, the others gated delta-nets. Qwen3.5 adds M-RoPE sections
/// and stores the delta-net's beta and alpha projections apart, which
/// Qwen3-Next fuses (`ssm_ba`; `src/models/qwen3next.cpp`, `qwen35.cpp`,
/// `qwen35moe.cpp`). The MTP blocks (`nextn`, the config's
/// `mtp_num_hidden_layers`) follow the trunk.
pub(crate) struct Qwen35 {
    /// `qwen3next`, `qwen35` or `qwen35moe`.
    pub arch: &'static str,
    pub n_layer: u32,
    pub n_embd: u64,
    /// Dense FFN width (`feed_forward_length`; unused by the MoE models).
    pub n_ff: u64,
    pub n_head: u64,
    pub n_head_kv: u64,
    pub head_dim: u64,
    pub n_vocab: u64,
    pub n_ctx_train: u64,
    /// Delta-net key heads (`ssm.group_count`).
    pub k_heads: u64,
    /// Delta-net value heads (`ssm.time_step_rank`).
    pub v_heads: u64,
    /// Delta-net head size (`ssm.state_size`).
    pub ssm_head: u64,
    pub conv: u64,
    pub interval: u32,
    /// `rope.dimension_count` (the rotated part of a head).
    pub rope_dims: u32,
    /// `rope.dimension_sections` (Qwen3.5).
    pub rope_sections: Option<[i32; 4]>,
    pub tied: bool,
    pub nextn: u32,
    /// Experts, experts used, expert width, shared expert width.
    pub moe: Option<(u64, u32, u64, u64)>,
}

/// The draft of a [`Qwen35`] model.
pub(crate) fn qwen35(m: &Qwen35) -> Draft {
    let arch = m.arch;
    let n_expert = m.moe.map_or(0, |(e, ..)| e);
    let n_all = m.n_layer + m.nextn;
    let mut d = Draft::new(
        arch,
        &Common {
            n_layer: n_all,
            n_embd: m.n_embd as u32,
            n_ff: m.n_ff as u32,
            n_head: m.n_head as u32,
            n_head_kv: m.n_head_kv as u32,
            n_expert: n_expert as u32,
            n_vocab: m.n_vocab,
            n_ctx_train: m.n_ctx_train,
            rope_base: 10_000_000.0,
            norm_eps: 1e-6,
            ..Common::default()
        },
    );
    let (embd, head) = (m.n_embd, m.head_dim);
    let (key_dim, value_dim) = (m.k_heads * m.ssm_head, m.v_heads * m.ssm_head);
    d.kv("attention.head_count_kv", m.n_head_kv as u32);
    d.kv("attention.key_length", head as u32);
    d.kv("attention.value_length", head as u32);
    d.kv("rope.dimension_count", m.rope_dims);
    if let Some(sections) = m.rope_sections {
        d.kv(
            "rope.dimension_sections",
            Array::new(ArrayItems::I32(sections.to_vec())),
        );
    }
    if m.nextn > 0 {
        d.kv("nextn_predict_layers", m.nextn);
    }
    if let Some((experts, used, ff_exp, ff_shexp)) = m.moe {
        d.kv("expert_count", experts as u32);
        d.kv("expert_used_count", used);
        d.kv("expert_feed_forward_length", ff_exp as u32);
        d.kv("expert_shared_feed_forward_length", ff_shexp as u32);
    }
    d.kv("ssm.conv_kernel", m.conv as u32);
    d.kv("ssm.inner_size", value_dim as u32);
    d.kv("ssm.state_size", m.ssm_head as u32);
    d.kv("ssm.time_step_rank", m.v_heads as u32);
    d.kv("ssm.group_count", m.k_heads as u32);
    d.kv("full_attention_interval", m.interval);
    d.embeddings(embd, m.tied);
    for il in 0..n_all {
        let mtp = il >= m.n_layer;
        d.blk(il, "attn_norm.weight", &[embd]);
        d.blk(il, "post_attention_norm.weight", &[embd]);
        if mtp || (il + 1) % m.interval == 0 {
            d.blk(il, "attn_q.weight", &[embd, 2 * m.n_head * head]);
            d.blk(il, "attn_k.weight", &[embd, m.n_head_kv * head]);
            d.blk(il, "attn_v.weight", &[embd, m.n_head_kv * head]);
            d.blk(il, "attn_output.weight", &[m.n_head * head, embd]);
            d.blk(il, "attn_q_norm.weight", &[head]);
            d.blk(il, "attn_k_norm.weight", &[head]);
        } else {
            let conv_dim = 2 * key_dim + value_dim;
            d.blk(il, "attn_qkv.weight", &[embd, conv_dim]);
            d.blk(il, "attn_gate.weight", &[embd, value_dim]);
            d.blk(il, "ssm_conv1d.weight", &[m.conv, conv_dim]);
            d.blk(il, "ssm_dt.bias", &[m.v_heads]);
            d.blk(il, "ssm_a", &[m.v_heads]);
            if arch == "qwen3next" {
                d.blk(il, "ssm_ba.weight", &[embd, 2 * m.v_heads]);
            } else {
                d.blk(il, "ssm_beta.weight", &[embd, m.v_heads]);
                d.blk(il, "ssm_alpha.weight", &[embd, m.v_heads]);
            }
            d.blk(il, "ssm_norm.weight", &[m.ssm_head]);
            d.blk(il, "ssm_out.weight", &[value_dim, embd]);
        }
        if let Some((experts, _, ff_exp, ff_shexp)) = m.moe {
            d.blk(il, "ffn_gate_inp.weight", &[embd, experts]);
            d.blk(il, "ffn_down_exps.weight", &[ff_exp, embd, experts]);
            d.blk(il, "ffn_gate_exps.weight", &[embd, ff_exp, experts]);
            d.blk(il, "ffn_up_exps.weight", &[embd, ff_exp, experts]);
            d.blk(il, "ffn_gate_inp_shexp.weight", &[embd]);
            d.blk(il, "ffn_gate_shexp.weight", &[embd, ff_shexp]);
            d.blk(il, "ffn_up_shexp.weight", &[embd, ff_shexp]);
            d.blk(il, "ffn_down_shexp.weight", &[ff_shexp, embd]);
        } else {
            d.blk(il, "ffn_gate.weight", &[embd, m.n_ff]);
            d.blk(il, "ffn_down.weight", &[m.n_ff, embd]);
            d.blk(il, "ffn_up.weight", &[embd, m.n_ff]);
        }
        if mtp {
            d.nextn(il, embd);
        }
    }
    d
}

/// Qwen3.5-9B (`Qwen/Qwen3.5-9B` text_config: 32 layers, hidden 4096, FFN
/// 12288; attention 16 heads and 4 KV heads of 256 every 4th layer, rotary
/// 0.25 of a head in M-RoPE sections 11/11/10; delta-nets with 16 key and 32
/// value heads of 128, convolution 4; vocabulary 248320, context 262144,
/// untied; one MTP layer).
pub(super) fn qwen35_9b() -> Draft {
    qwen35(&Qwen35 {
        arch: "qwen35",
        n_layer: 32,
        n_embd: 4096,
        n_ff: 12_288,
        n_head: 16,
        n_head_kv: 4,
        head_dim: 256,
        n_vocab: 248_320,
        n_ctx_train: 262_144,
        k_heads: 16,
        v_heads: 32,
        ssm_head: 128,
        conv: 4,
        interval: 4,
        rope_dims: 64,
        rope_sections: Some([11, 11, 10, 0]),
        tied: false,
        nextn: 1,
        moe: None,
    })
}

/// Qwen3.5-35B-A3B (`Qwen/Qwen3.5-35B-A3B` text_config: 40 layers, hidden
/// 2048; attention 16 heads and 2 KV heads of 256 every 4th layer, rotary
/// 0.25 in M-RoPE sections 11/11/10; delta-nets with 16 key and 32 value
/// heads of 128, convolution 4; 256 experts of 512 with 8 used and a shared
/// one of 512; vocabulary 248320, context 262144, untied; one MTP layer).
pub(super) fn qwen35moe_35b_a3b() -> Draft {
    qwen35(&Qwen35 {
        arch: "qwen35moe",
        n_layer: 40,
        n_embd: 2048,
        n_ff: 0,
        n_head: 16,
        n_head_kv: 2,
        head_dim: 256,
        n_vocab: 248_320,
        n_ctx_train: 262_144,
        k_heads: 16,
        v_heads: 32,
        ssm_head: 128,
        conv: 4,
        interval: 4,
        rope_dims: 64,
        rope_sections: Some([11, 11, 10, 0]),
        tied: false,
        nextn: 1,
        moe: Some((256, 8, 512, 512)),
    })
}
