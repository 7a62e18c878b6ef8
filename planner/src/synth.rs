//! Synthetic models: real-shaped GGUF headers for well-known architectures,
//! written as sparse files (no tensor data) that llama.cpp accepts.
//!
//! Why: the planner must be checked against llama.cpp's own memory accounting
//! on models far bigger than a test machine can download or hold. A synthetic
//! file has the exact header (hyper-parameters, tokenizer, every tensor's name,
//! shape and type) of e.g. Llama-3-8B in Q4_K_M, and a data section that is a
//! hole in the file: llama.cpp's `no_alloc` load never reads it, and a small
//! model (`llama-1b`) can even be loaded for real and run (on zero weights).
//!
//! Tensor types follow llama.cpp's `llama-quant.cpp` for the chosen mix (see
//! [`quant_type`]), and the tensor set follows each architecture's
//! `load_arch_tensors` in `src/models/<arch>.cpp` — llama.cpp refuses a file
//! with a missing or an extra tensor.

use std::path::Path;

pub mod facts;
pub mod mix;
mod quant;
mod vocab;
pub mod zoo;

pub use quant::{never_quantized, quant_type};

use crate::gguf::writer::{HeaderBuilder, create_sparse_file};
use crate::gguf::{Array, ArrayItems, GgmlType, GgufError, Header};

/// A well-known model shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    /// Llama-3-8B: 32 layers, GQA 32/8, 128k vocabulary, untied output.
    Llama8B,
    /// Llama-3.2-1B: 16 layers, tied embeddings; small enough to run.
    Llama1B,
    /// Gemma-3-1B: sliding window 512 on 5 of every 6 layers, 262k vocabulary,
    /// n_embd 1152 (not a multiple of 256: exercises llama.cpp's quant fallbacks).
    Gemma3_1B,
    /// Gemma-3-4B (text part): sliding window 1024, 8 heads / 4 KV heads.
    Gemma3_4B,
    /// Qwen3-30B-A3B: 48 layers, 128 experts of which 8 are used per token.
    Qwen3Moe30BA3B,
    /// SmolLM2-135M (the `demo` model's shape): 30 layers, n_embd 576, 49k
    /// vocabulary. For speed calibration, not in [`Shape::ALL`].
    SmolLm2_135M,
    /// Gemma-3-270M (the `demo-base` model's shape): 18 layers, n_embd 640,
    /// 262k vocabulary. For speed calibration, not in [`Shape::ALL`].
    Gemma3_270M,
    /// Llama-3.1-70B: 80 layers, GQA 64/8, 128k context. Used for planning
    /// tests only (not in [`Shape::ALL`], which is loaded through llama.cpp).
    Llama70B,
}

/// Tensor type mix, named like llama.cpp's `llama-quantize` file types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mix {
    /// `LLAMA_FTYPE_MOSTLY_Q4_K_M`: Q4_K with Q6_K for sensitive tensors.
    Q4KM,
    /// `LLAMA_FTYPE_MOSTLY_Q8_0`.
    Q8_0,
    /// `LLAMA_FTYPE_MOSTLY_F16`.
    F16,
}

/// Hyper-parameters of a [`Shape`] (values from the models' published configs).
#[derive(Debug, Clone, PartialEq)]
pub struct ShapeSpec {
    /// `general.architecture`.
    pub arch: &'static str,
    /// Transformer blocks.
    pub n_layer: u32,
    /// Hidden size.
    pub n_embd: u64,
    /// Query heads.
    pub n_head: u64,
    /// Key/value heads.
    pub n_head_kv: u64,
    /// Per-head dimension of K and V.
    pub head_dim: u64,
    /// Dense feed-forward size (for MoE: what `feed_forward_length` says).
    pub n_ff: u64,
    /// Vocabulary size.
    pub n_vocab: u64,
    /// Training context length.
    pub n_ctx_train: u32,
    /// RoPE base frequency.
    pub rope_freq_base: f32,
    /// RMS norm epsilon.
    pub rms_eps: f32,
    /// Output projection shares `token_embd.weight` (no `output.weight`).
    pub tied_embeddings: bool,
    /// Experts (0: dense).
    pub n_expert: u32,
    /// Experts used per token.
    pub n_expert_used: u32,
    /// Per-expert feed-forward size.
    pub n_ff_exp: u64,
    /// Sliding-window size for SWA layers (gemma3: every 6th layer is global).
    pub sliding_window: Option<u32>,
    /// Linear RoPE scaling factor of the global layers.
    pub rope_scaling_linear: Option<f32>,
    /// Has the Llama-3.1+ `rope_freqs.weight` (RoPE long-context factors).
    pub rope_freqs: bool,
    /// Gemma-style Q/K norms and post-attention / post-FFN norms.
    pub gemma_norms: bool,
    /// Qwen3-style Q/K norms.
    pub qk_norms: bool,
}

impl Shape {
    /// Every shape.
    pub const ALL: [Shape; 5] = [
        Shape::Llama8B,
        Shape::Llama1B,
        Shape::Gemma3_1B,
        Shape::Gemma3_4B,
        Shape::Qwen3Moe30BA3B,
    ];

    /// Short name, e.g. `llama-8b`.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Llama8B => "llama-8b",
            Shape::Llama1B => "llama-1b",
            Shape::Gemma3_1B => "gemma3-1b",
            Shape::Gemma3_4B => "gemma3-4b",
            Shape::Qwen3Moe30BA3B => "qwen3moe-30b-a3b",
            Shape::Llama70B => "llama-70b",
            Shape::SmolLm2_135M => "smollm2-135m",
            Shape::Gemma3_270M => "gemma3-270m",
        }
    }

    /// The shape called `name` (as [`Shape::name`] spells it).
    pub fn from_name(name: &str) -> Option<Shape> {
        Shape::ALL
            .into_iter()
            .chain([Shape::Llama70B, Shape::SmolLm2_135M, Shape::Gemma3_270M])
            .find(|s| s.name() == name)
    }

    /// Its hyper-parameters.
    pub fn spec(self) -> ShapeSpec {
        let llama = ShapeSpec {
            arch: "llama",
            n_layer: 32,
            n_embd: 4096,
            n_head: 32,
            n_head_kv: 8,
            head_dim: 128,
            n_ff: 14336,
            n_vocab: 128_256,
            n_ctx_train: 8192,
            rope_freq_base: 500_000.0,
            rms_eps: 1e-5,
            tied_embeddings: false,
            n_expert: 0,
            n_expert_used: 0,
            n_ff_exp: 0,
            sliding_window: None,
            rope_scaling_linear: None,
            rope_freqs: false,
            gemma_norms: false,
            qk_norms: false,
        };
        let gemma = ShapeSpec {
            arch: "gemma3",
            n_layer: 26,
            n_embd: 1152,
            n_head: 4,
            n_head_kv: 1,
            head_dim: 256,
            n_ff: 6912,
            n_vocab: 262_144,
            n_ctx_train: 32_768,
            rope_freq_base: 1_000_000.0,
            rms_eps: 1e-6,
            tied_embeddings: true,
            sliding_window: Some(512),
            gemma_norms: true,
            ..llama.clone()
        };
        match self {
            Shape::Llama8B => llama,
            Shape::Llama1B => ShapeSpec {
                n_layer: 16,
                n_embd: 2048,
                head_dim: 64,
                n_ff: 8192,
                n_ctx_train: 131_072,
                tied_embeddings: true,
                rope_freqs: true,
                ..llama
            },
            Shape::Llama70B => ShapeSpec {
                n_layer: 80,
                n_embd: 8192,
                n_head: 64,
                n_ff: 28672,
                n_ctx_train: 131_072,
                rope_freqs: true,
                ..llama
            },
            Shape::SmolLm2_135M => ShapeSpec {
                n_layer: 30,
                n_embd: 576,
                n_head: 9,
                n_head_kv: 3,
                head_dim: 64,
                n_ff: 1536,
                n_vocab: 49_152,
                rope_freq_base: 100_000.0,
                tied_embeddings: true,
                ..llama.clone()
            },
            Shape::Gemma3_270M => ShapeSpec {
                n_layer: 18,
                n_embd: 640,
                n_ff: 2048,
                ..gemma.clone()
            },
            Shape::Gemma3_1B => gemma,
            Shape::Gemma3_4B => ShapeSpec {
                n_layer: 34,
                n_embd: 2560,
                n_head: 8,
                n_head_kv: 4,
                n_ff: 10240,
                n_ctx_train: 131_072,
                sliding_window: Some(1024),
                rope_scaling_linear: Some(8.0),
                ..gemma
            },
            Shape::Qwen3Moe30BA3B => ShapeSpec {
                arch: "qwen3moe",
                n_layer: 48,
                n_embd: 2048,
                n_head: 32,
                n_head_kv: 4,
                head_dim: 128,
                n_ff: 6144,
                n_vocab: 151_936,
                n_ctx_train: 40_960,
                rope_freq_base: 1_000_000.0,
                rms_eps: 1e-6,
                n_expert: 128,
                n_expert_used: 8,
                n_ff_exp: 768,
                qk_norms: true,
                ..llama
            },
        }
    }
}

impl Mix {
    /// Every mix.
    pub const ALL: [Mix; 3] = [Mix::Q4KM, Mix::Q8_0, Mix::F16];

    /// Name as llama.cpp prints file types: `Q4_K_M`, `Q8_0`, `F16`.
    pub fn name(self) -> &'static str {
        match self {
            Mix::Q4KM => "Q4_K_M",
            Mix::Q8_0 => "Q8_0",
            Mix::F16 => "F16",
        }
    }

    /// The mix called `name` (case-insensitive).
    pub fn from_name(name: &str) -> Option<Mix> {
        Mix::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name))
    }

    /// `enum llama_ftype` value, stored as `general.file_type`.
    pub fn ftype(self) -> u32 {
        match self {
            Mix::Q4KM => 15,
            Mix::Q8_0 => 7,
            Mix::F16 => 1,
        }
    }

    /// The mix's default type (`llama_ftype_get_default_type`).
    pub fn default_type(self) -> GgmlType {
        match self {
            Mix::Q4KM => GgmlType::Q4_K,
            Mix::Q8_0 => GgmlType::Q8_0,
            Mix::F16 => GgmlType::F16,
        }
    }
}

/// One tensor of a synthetic model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynthTensor {
    /// GGUF tensor name.
    pub name: String,
    /// Dimensions, innermost first.
    pub dims: Vec<u64>,
    /// Element type.
    pub ty: GgmlType,
}

/// Every tensor of `shape` in file order (token embedding, blocks, output),
/// with the names and shapes its `load_arch_tensors` asks for.
pub fn tensors(shape: Shape, mix: Mix) -> Vec<SynthTensor> {
    let s = shape.spec();
    let (e, hd) = (s.n_embd, s.head_dim);
    let (q, kv) = (s.n_head * hd, s.n_head_kv * hd);
    let mut raw: Vec<(String, Vec<u64>, Option<u32>)> =
        vec![("token_embd.weight".into(), vec![e, s.n_vocab], None)];
    if s.rope_freqs {
        raw.push(("rope_freqs.weight".into(), vec![hd / 2], None));
    }
    for il in 0..s.n_layer {
        let mut t =
            |suffix: &str, dims: Vec<u64>| raw.push((format!("blk.{il}.{suffix}"), dims, Some(il)));
        t("attn_norm.weight", vec![e]);
        t("attn_q.weight", vec![e, q]);
        t("attn_k.weight", vec![e, kv]);
        t("attn_v.weight", vec![e, kv]);
        t("attn_output.weight", vec![q, e]);
        if s.gemma_norms || s.qk_norms {
            t("attn_q_norm.weight", vec![hd]);
            t("attn_k_norm.weight", vec![hd]);
        }
        if s.gemma_norms {
            t("post_attention_norm.weight", vec![e]);
        }
        t("ffn_norm.weight", vec![e]);
        if s.n_expert > 0 {
            let (x, f) = (u64::from(s.n_expert), s.n_ff_exp);
            t("ffn_gate_inp.weight", vec![e, x]);
            t("ffn_gate_exps.weight", vec![e, f, x]);
            t("ffn_down_exps.weight", vec![f, e, x]);
            t("ffn_up_exps.weight", vec![e, f, x]);
        } else {
            t("ffn_gate.weight", vec![e, s.n_ff]);
            t("ffn_up.weight", vec![e, s.n_ff]);
            t("ffn_down.weight", vec![s.n_ff, e]);
        }
        if s.gemma_norms {
            t("post_ffw_norm.weight", vec![e]);
        }
    }
    raw.push(("output_norm.weight".into(), vec![e], None));
    if !s.tied_embeddings {
        raw.push(("output.weight".into(), vec![e, s.n_vocab], None));
    }
    raw.into_iter()
        .map(|(name, dims, layer)| {
            let ty = quant_type(&s, mix, &name, &dims, layer);
            SynthTensor { name, dims, ty }
        })
        .collect()
}

/// The complete header of `shape` in `mix`: metadata llama.cpp requires for
/// the architecture, the tokenizer, and every tensor.
pub fn build(shape: Shape, mix: Mix) -> Result<Header, GgufError> {
    let s = shape.spec();
    let a = s.arch;
    let k = |key: &str| format!("{a}.{key}");
    let u32_of = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let mut b = HeaderBuilder::new()
        .kv("general.architecture", a)
        .kv(
            "general.name",
            format!("headroom synthetic {} {}", shape.name(), mix.name()),
        )
        .kv("general.file_type", mix.ftype())
        .kv("general.quantization_version", 2u32)
        .kv(k("context_length"), s.n_ctx_train)
        .kv(k("embedding_length"), u32_of(s.n_embd))
        .kv(k("block_count"), s.n_layer)
        .kv(k("feed_forward_length"), u32_of(s.n_ff))
        .kv(k("attention.head_count"), u32_of(s.n_head))
        .kv(k("attention.head_count_kv"), u32_of(s.n_head_kv))
        .kv(k("attention.key_length"), u32_of(s.head_dim))
        .kv(k("attention.value_length"), u32_of(s.head_dim))
        .kv(k("attention.layer_norm_rms_epsilon"), s.rms_eps)
        .kv(k("rope.freq_base"), s.rope_freq_base)
        .kv(k("vocab_size"), u32_of(s.n_vocab));
    if s.arch == "llama" {
        b = b.kv(k("rope.dimension_count"), u32_of(s.head_dim));
    }
    if s.n_expert > 0 {
        b = b
            .kv(k("expert_count"), s.n_expert)
            .kv(k("expert_used_count"), s.n_expert_used)
            .kv(k("expert_feed_forward_length"), u32_of(s.n_ff_exp));
    }
    if let Some(w) = s.sliding_window {
        b = b.kv(k("attention.sliding_window"), w);
    }
    if let Some(f) = s.rope_scaling_linear {
        b = b
            .kv(k("rope.scaling.type"), "linear")
            .kv(k("rope.scaling.factor"), f);
    }
    b = tokenizer(b, s.n_vocab);
    for t in tensors(shape, mix) {
        b = b.tensor(t.name, &t.dims, t.ty);
    }
    b.build()
}

/// The tokenizer section of a synthetic header: a SentencePiece vocabulary
/// of `n_vocab` tokens (see [`vocab::vocab`]) and its special tokens.
pub(crate) fn tokenizer(b: HeaderBuilder, n_vocab: u64) -> HeaderBuilder {
    let (tokens, scores, types) = vocab::vocab(n_vocab);
    b.kv("tokenizer.ggml.model", "llama")
        .kv(
            "tokenizer.ggml.tokens",
            Array::new(ArrayItems::String(tokens)),
        )
        .kv("tokenizer.ggml.scores", Array::new(ArrayItems::F32(scores)))
        .kv(
            "tokenizer.ggml.token_type",
            Array::new(ArrayItems::I32(types)),
        )
        .kv("tokenizer.ggml.unknown_token_id", 0u32)
        .kv("tokenizer.ggml.bos_token_id", 1u32)
        .kv("tokenizer.ggml.eos_token_id", 2u32)
        .kv("tokenizer.ggml.add_bos_token", true)
}

/// Writes `shape` in `mix` to `path` as a sparse file (header, then a hole as
/// long as the tensor data) and returns its header.
pub fn write_sparse(path: &Path, shape: Shape, mix: Mix) -> Result<Header, GgufError> {
    let h = build(shape, mix)?;
    create_sparse_file(path, &h)?;
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn n_params(shape: Shape) -> u64 {
        tensors(shape, Mix::F16)
            .iter()
            .map(|t| t.dims.iter().product::<u64>())
            .sum()
    }

    #[test]
    fn parameter_counts_match_the_published_models() {
        // From the models' Hugging Face safetensors metadata.
        assert_eq!(n_params(Shape::Llama8B), 8_030_261_248);
        assert_eq!(n_params(Shape::Llama1B), 1_235_814_400 + 32); // + rope_freqs
        assert_eq!(n_params(Shape::Gemma3_1B), 999_885_952);
        assert_eq!(n_params(Shape::Qwen3Moe30BA3B), 30_532_122_624);
    }

    #[test]
    fn tensor_sets_follow_the_architectures() {
        let names = |s: Shape| -> HashSet<String> {
            tensors(s, Mix::Q8_0).into_iter().map(|t| t.name).collect()
        };
        let llama = names(Shape::Llama8B);
        assert_eq!(llama.len(), 1 + 32 * 9 + 2);
        assert!(llama.contains("output.weight"));
        assert!(!names(Shape::Llama1B).contains("output.weight"), "tied");
        assert!(names(Shape::Llama1B).contains("rope_freqs.weight"));
        let gemma = names(Shape::Gemma3_1B);
        assert!(
            gemma.contains("blk.25.post_ffw_norm.weight")
                && !gemma.contains("blk.26.attn_q.weight")
        );
        let moe = tensors(Shape::Qwen3Moe30BA3B, Mix::Q4KM);
        let down = moe
            .iter()
            .find(|t| t.name == "blk.0.ffn_down_exps.weight")
            .expect("experts");
        assert_eq!(down.dims, vec![768, 2048, 128]);
        let router = moe
            .iter()
            .find(|t| t.name == "blk.0.ffn_gate_inp.weight")
            .expect("router");
        assert_eq!(
            router.ty,
            GgmlType::F32,
            "llama.cpp never quantizes the router"
        );
    }

    #[test]
    fn names_round_trip() {
        for s in Shape::ALL {
            assert_eq!(Shape::from_name(s.name()), Some(s));
        }
        for m in Mix::ALL {
            assert_eq!(Mix::from_name(&m.name().to_lowercase()), Some(m));
        }
        assert_eq!(Shape::from_name("llama-70b"), Some(Shape::Llama70B));
        assert_eq!(Shape::from_name("llama-405b"), None);
    }

    #[test]
    fn sparse_file_has_the_full_length_and_parses_back() -> Result<(), GgufError> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("m.gguf");
        let h = write_sparse(&path, Shape::Llama1B, Mix::Q4KM)?;
        let len = std::fs::metadata(&path)?.len();
        assert_eq!(Some(len), h.total_tensor_bytes().map(|b| b + h.data_offset));
        let back = crate::gguf::read_header_from_file(&path)?;
        assert_eq!(back.tensors, h.tensors);
        assert_eq!(back.get_str("general.architecture"), Some("llama"));
        assert_eq!(back.array_len("tokenizer.ggml.tokens"), Some(128_256));
        Ok(())
    }
}
