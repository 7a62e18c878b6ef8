//! Gemma 3n: per-layer token embeddings beside the usual one, four AltUp
//! streams, LAuReL low-rank residuals, and KV sharing: the last layers reuse
//! the cache of the last sliding and the last full layer before them
//! (`n_layer_kv_from_start`, `create_memory`'s `reuse` callback).

use super::{Common, Draft};
use crate::gguf::{Array, ArrayItems, Value};

/// Gemma-3n-E2B (30 layers, hidden 2048, 8 heads, 2 KV heads of 256 with
/// Q/K norms, FFN 8192 on every layer, a sliding window of 512 on four
/// layers of five, the last 10 layers sharing the cache of the first 20,
/// per-layer inputs of 256 per layer, 4 AltUp streams, LAuReL rank 64,
/// final soft-capping 30, tied embeddings, vocabulary 262400, context
/// 32768).
///
/// The `text_config` of `google/gemma-3n-E2B-it`'s `config.json`: the
/// E4B's defaults of transformers' `Gemma3nTextConfig`
/// (`src/transformers/models/gemma3n/configuration_gemma3n.py`: vocabulary
/// 262400 and 262144 per layer, hidden 2048, 8 heads, 2 KV heads of 256,
/// window 512, a full layer every fifth, `hidden_size_per_layer_input` 256,
/// `altup_num_inputs` 4, `laurel_rank` 64, soft-cap 30, RMS epsilon 1e-6,
/// RoPE bases 1e6 and 1e4, context 32768) with 30 layers,
/// `intermediate_size` a list of 30 × 8192 and `num_kv_shared_layers` 10,
/// and the first 10 layers sparse at 0.95. Written as llama.cpp's
/// `Gemma3NModel` converter writes them: the FFN widths as a per-layer
/// array, `layer_types` as the `sliding_window_pattern` flags, the two
/// vocabularies both padded to 262400 rows, the AltUp projections stacked.
/// The tensors are those `src/models/gemma3n.cpp` loads: every layer keeps
/// its K and V projections, shared or not.
pub(super) fn gemma3n_e2b() -> Draft {
    gemma3n(&Gemma3n {
        n_layer: 30,
        n_embd: 2048,
        n_ff: 8192,
        n_head: 8,
        n_head_kv: 2,
        head_dim: 256,
        n_vocab: 262_400,
        n_ctx_train: 32_768,
        sliding_window: 512,
        swa_period: 5,
        per_layer: 256,
        altup: 4,
        laurel: 64,
        shared_kv_layers: 10,
        sparse_layers: Some(10),
    })
}

/// The hyper-parameters of a Gemma 3n (`gemma3n`) model, under the names
/// of its GGUF keys where it has one.
pub(crate) struct Gemma3n {
    pub n_layer: u32,
    pub n_embd: u64,
    /// `feed_forward_length`, the same on every layer.
    pub n_ff: u64,
    pub n_head: u64,
    pub n_head_kv: u64,
    pub head_dim: u64,
    /// Rows of both embeddings (the converter pads the per-layer one to it).
    pub n_vocab: u64,
    pub n_ctx_train: u64,
    pub sliding_window: u32,
    /// Every `swa_period`-th layer is full attention, the others sliding
    /// (`attention.sliding_window_pattern`, written as per-layer flags).
    pub swa_period: u32,
    /// `embedding_length_per_layer_input`.
    pub per_layer: u64,
    /// `altup.num_inputs`.
    pub altup: u64,
    /// LAuReL's rank (no GGUF key: llama.cpp takes 64).
    pub laurel: u64,
    /// `attention.shared_kv_layers`.
    pub shared_kv_layers: u32,
    /// Leading layers with activation sparsity
    /// (`activation_sparsity_scale`, which sizes nothing; unset: no key).
    pub sparse_layers: Option<u32>,
}

/// A Gemma 3n model: the keys and tensors of `src/models/gemma3n.cpp`.
pub(crate) fn gemma3n(p: &Gemma3n) -> Draft {
    let layers = p.n_layer;
    let embd = p.n_embd;
    let ff = p.n_ff;
    let head = p.head_dim;
    let (heads, kv_heads) = (p.n_head, p.n_head_kv);
    let (per_layer, altup, laurel) = (p.per_layer, p.altup, p.laurel);
    let u32_of = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let mut d = Draft::new(
        "gemma3n",
        &Common {
            n_layer: layers,
            n_embd: u32_of(embd),
            n_ff: u32_of(ff),
            n_head: u32_of(heads),
            n_head_kv: u32_of(kv_heads),
            n_vocab: p.n_vocab,
            n_ctx_train: p.n_ctx_train,
            rope_base: 1_000_000.0,
            norm_eps: 1e-6,
            ..Common::default()
        },
    );
    // `intermediate_size` is a per-layer list: the converter writes an array
    // (of int32, gguf-py's type for Python ints).
    let ff_key = format!("{}.feed_forward_length", d.arch);
    let ff_i32 = i32::try_from(ff).unwrap_or(i32::MAX);
    let widths = Array::new(ArrayItems::I32(vec![ff_i32; layers as usize]));
    for (k, v) in &mut d.meta {
        if *k == ff_key {
            *v = Value::Array(widths.clone());
        }
    }
    d.kv("attention.head_count_kv", u32_of(kv_heads));
    d.kv("attention.key_length", u32_of(head));
    d.kv("attention.value_length", u32_of(head));
    d.kv("attention.sliding_window", p.sliding_window);
    d.kv("final_logit_softcapping", 30.0f32);
    d.kv("altup.active_idx", 0u32);
    d.kv("altup.num_inputs", u32_of(altup));
    d.kv("embedding_length_per_layer_input", u32_of(per_layer));
    d.kv("attention.shared_kv_layers", p.shared_kv_layers);
    if let Some(sparse) = p.sparse_layers {
        // `activation_sparsity_pattern` as the converter writes it: the
        // normal distribution's quantile of each layer's sparsity (0.95 →
        // 1.6448536, 0 → -inf).
        let scales = (0..layers)
            .map(|il| {
                if il < sparse {
                    1.644_853_6f32
                } else {
                    f32::NEG_INFINITY
                }
            })
            .collect();
        d.kv(
            "activation_sparsity_scale",
            Array::new(ArrayItems::F32(scales)),
        );
    }
    let period = p.swa_period.max(1);
    let pattern = (0..layers).map(|il| (il + 1) % period != 0).collect();
    d.kv(
        "attention.sliding_window_pattern",
        Array::new(ArrayItems::Bool(pattern)),
    );

    let per_layer_all = per_layer.saturating_mul(u64::from(layers));
    d.embeddings(embd, true);
    d.global("altup_proj.weight", &[embd, embd, altup.saturating_sub(1)]);
    d.global(
        "altup_unembd_proj.weight",
        &[embd, embd, altup.saturating_sub(1)],
    );
    d.global("per_layer_token_embd.weight", &[per_layer_all, d.n_vocab]);
    d.global("per_layer_model_proj.weight", &[embd, per_layer_all]);
    d.global("per_layer_proj_norm.weight", &[per_layer]);
    let (q, kv) = (heads.saturating_mul(head), kv_heads.saturating_mul(head));
    for il in 0..layers {
        d.blk(il, "attn_norm.weight", &[embd]);
        d.blk(il, "attn_q.weight", &[embd, q]);
        d.blk(il, "attn_k.weight", &[embd, kv]);
        d.blk(il, "attn_v.weight", &[embd, kv]);
        d.blk(il, "attn_output.weight", &[q, embd]);
        d.blk(il, "attn_q_norm.weight", &[head]);
        d.blk(il, "attn_k_norm.weight", &[head]);
        d.blk(il, "post_attention_norm.weight", &[embd]);
        d.blk(il, "ffn_norm.weight", &[embd]);
        d.blk(il, "ffn_gate.weight", &[embd, ff]);
        d.blk(il, "ffn_up.weight", &[embd, ff]);
        d.blk(il, "ffn_down.weight", &[ff, embd]);
        d.blk(il, "post_ffw_norm.weight", &[embd]);
        d.blk(il, "inp_gate.weight", &[embd, per_layer]);
        d.blk(il, "proj.weight", &[per_layer, embd]);
        d.blk(il, "post_norm.weight", &[embd]);
        d.blk(il, "altup_correct_coef.weight", &[altup, altup]);
        d.blk(il, "altup_correct_scale.weight", &[embd]);
        d.blk(
            il,
            "altup_predict_coef.weight",
            &[altup, altup.saturating_mul(altup)],
        );
        d.blk(il, "altup_router.weight", &[embd, altup]);
        d.blk(il, "altup_router_norm.weight", &[embd]);
        d.blk(il, "laurel_l.weight", &[embd, laurel]);
        d.blk(il, "laurel_r.weight", &[laurel, embd]);
        d.blk(il, "laurel_post_norm.weight", &[embd]);
    }
    d
}
