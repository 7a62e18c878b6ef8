//! LFM2: gated short-convolution layers, whose only state is the last
//! `l_cache - 1` inputs of the convolution per sequence, between
//! grouped-query attention layers with Q/K norms (`src/models/lfm2.cpp`).
//! A layer is a convolution when its KV head count is 0.

use super::{Common, Draft};

/// LFM2-1.2B (16 layers, hidden 2048; attention with 32 heads and 8 KV
/// heads of 64 on layers 2, 5, 8, 10, 12 and 14, short convolutions of 3 on
/// the others; FFN 8192; tied embeddings; vocabulary 65536, context 128000).
///
/// `LiquidAI/LFM2-1.2B`'s `config.json`: `hidden_size` 2048,
/// `num_hidden_layers` 16, `num_attention_heads` 32, `num_key_value_heads`
/// 8, `full_attn_idxs` [2, 5, 8, 10, 12, 14], `conv_L_cache` 3,
/// `block_ff_dim` 12288 with `block_auto_adjust_ff_dim` (2/3 of it, times
/// `block_ffn_dim_multiplier` 1.0, rounded up to `block_multiple_of` 256:
/// 8192, the width llama.cpp's converter writes and its loader names 1.2B),
/// `vocab_size` 65536, `max_position_embeddings` 128000, `rope_theta` 1e6,
/// `norm_eps` 1e-5, no separate output matrix.
pub(super) fn lfm2_1_2b() -> Draft {
    lfm2(&Lfm2 {
        n_layer: 16,
        n_embd: 2048,
        n_ff: 8192,
        n_head: 32,
        n_head_kv: 8,
        n_vocab: 65_536,
        n_ctx_train: 128_000,
        l_cache: 3,
        attention_layers: vec![2, 5, 8, 10, 12, 14],
        tied: true,
    })
}

/// The hyper-parameters of an LFM2 (`lfm2`) model, under the names of its
/// GGUF keys where it has one.
pub(crate) struct Lfm2 {
    pub n_layer: u32,
    pub n_embd: u64,
    /// `feed_forward_length` as the converter writes it (the adjusted width).
    pub n_ff: u64,
    pub n_head: u64,
    /// KV heads of an attention layer (0 on the convolution layers).
    pub n_head_kv: u64,
    pub n_vocab: u64,
    pub n_ctx_train: u64,
    /// `shortconv.l_cache`: the convolution's length.
    pub l_cache: u32,
    /// The attention layers (`full_attn_idxs`); the others are convolutions.
    pub attention_layers: Vec<u32>,
    /// No `output.weight`: the output is the token embedding.
    pub tied: bool,
}

/// An LFM2 model: the keys and tensors of `src/models/lfm2.cpp`.
pub(crate) fn lfm2(p: &Lfm2) -> Draft {
    let embd = p.n_embd;
    let head = embd / p.n_head.max(1);
    let u32_of = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let attention = |il: u32| p.attention_layers.contains(&il);
    let mut d = Draft::new(
        "lfm2",
        &Common {
            n_layer: p.n_layer,
            n_embd: u32_of(embd),
            n_ff: u32_of(p.n_ff),
            n_head: u32_of(p.n_head),
            n_head_kv: u32_of(p.n_head_kv),
            n_vocab: p.n_vocab,
            n_ctx_train: p.n_ctx_train,
            rope_base: 1_000_000.0,
            norm_eps: 1e-5,
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
    d.kv("shortconv.l_cache", p.l_cache);
    // The output norm is stored under the embedding norm's name
    // (`LLM_TENSOR_OUTPUT_NORM_LFM2`).
    d.global("token_embd.weight", &[embd, p.n_vocab]);
    d.global("token_embd_norm.weight", &[embd]);
    if !p.tied {
        d.global("output.weight", &[embd, p.n_vocab]);
    }
    for il in 0..p.n_layer {
        d.blk(il, "ffn_norm.weight", &[embd]);
        d.blk(il, "ffn_gate.weight", &[embd, p.n_ff]);
        d.blk(il, "ffn_down.weight", &[p.n_ff, embd]);
        d.blk(il, "ffn_up.weight", &[embd, p.n_ff]);
        d.blk(il, "attn_norm.weight", &[embd]);
        if attention(il) {
            let kv = p.n_head_kv * head;
            d.blk(il, "attn_q_norm.weight", &[head]);
            d.blk(il, "attn_k_norm.weight", &[head]);
            d.blk(il, "attn_q.weight", &[embd, embd]);
            d.blk(il, "attn_k.weight", &[embd, kv]);
            d.blk(il, "attn_v.weight", &[embd, kv]);
            d.blk(il, "attn_output.weight", &[embd, embd]);
        } else {
            d.blk(il, "shortconv.conv.weight", &[u64::from(p.l_cache), embd]);
            d.blk(il, "shortconv.in_proj.weight", &[embd, 3 * embd]);
            d.blk(il, "shortconv.out_proj.weight", &[embd, embd]);
        }
    }
    d
}
