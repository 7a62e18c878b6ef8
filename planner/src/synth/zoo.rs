//! Real-shaped headers of the architectures whose memory rules differ from a
//! plain transformer's: latent attention in both of DeepSeek's file layouts
//! and with a compressed query (GLM-4.7-Flash), chunked attention (Llama 4),
//! hybrid recurrent models (Qwen3-Next's and Qwen3.5's gated delta-nets,
//! Granite 4's Mamba-2, LFM2's short convolutions), multi-token-prediction
//! blocks (Qwen3-Next, Qwen3.5, GLM-4.5), attention sinks with a sliding
//! window (gpt-oss), MoE shapes with few and with many experts, the dense
//! layouts of Qwen2, Qwen3, Gemma 2, GLM-4 and Phi-3, Gemma 3n (per-layer
//! token embeddings, AltUp streams, layers that reuse an earlier layer's KV
//! cache) and Gemma 4 (per-layer embeddings and shared KV layers in E2B,
//! different head sizes and KV head counts on sliding and full layers,
//! 26B-A4B's experts beside a dense FFN),
//! and the dense layouts of `mistral3` (a per-position attention
//! temperature scale), OLMo 2 (post-norms only) and SmolLM3.
//!
//! Why: each of these is a rule of llama.cpp's loader or KV cache that a plain
//! shape ([`super::Shape`]) does not exercise, and the planner must be held to
//! llama.cpp's own accounting on each (`app/tests/cli/planner_vs_llama.rs`).
//! The hyper-parameters are the published `config.json` values, written under
//! the keys llama.cpp's converter uses; the tensor set is exactly what the
//! architecture's `load_arch_tensors` (`src/models/<arch>.cpp` of the vendored
//! llama.cpp) asks for, since llama.cpp refuses a file with a missing or an
//! extra tensor; the types are llama-quantize's ([`super::mix`]).

use std::path::Path;

use super::mix::{FileType, MixModel, MixPlan, MixTensor};
use super::tokenizer;
use crate::gguf::writer::{HeaderBuilder, create_sparse_file};
use crate::gguf::{Array, ArrayItems, GgufError, Header, Value};

pub(super) mod dense;
pub(super) mod gemma3n;
pub(super) mod gemma4;
pub(super) mod hybrid;
pub(super) mod latent;
pub(super) mod lfm2;
pub(super) mod moe;

/// An architecture's reference model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Model {
    /// DeepSeek-V2-Lite as 2024's GGUFs store it: one `attn_kv_b` per
    /// layer, no `*_mla` keys, 16 KV heads of 192/128: llama.cpp caches full
    /// K and V.
    DeepSeekV2Lite2024,
    /// DeepSeek-V2-Lite as the current converter writes it: `attn_k_b` and
    /// `attn_v_b`, `key_length_mla`: llama.cpp caches one latent row (K only).
    DeepSeekV2Lite,
    /// Llama-4-Scout-17B-16E: chunked attention (8192) on 3 of 4 layers.
    Llama4Scout,
    /// Qwen3-Next-80B-A3B with its MTP block: 36 gated delta-net layers, 12
    /// full-attention layers, 512 experts.
    Qwen3Next80B,
    /// GLM-4.5-Air with its MTP block: 128 experts, one shared.
    Glm45Air,
    /// Granite-4.0-H-Tiny: 36 Mamba-2 layers, 4 attention layers, 64 experts.
    Granite4HTiny,
    /// gpt-oss-20b: sliding window 128 on every other layer, sinks, MXFP4 experts.
    GptOss20B,
    /// Mixtral-8x7B: a few large experts.
    Mixtral8x7B,
    /// Phi-3-mini-4k: fused QKV and gate/up projections (named without "phi3",
    /// which would make llama.cpp look for Phi-3 special tokens).
    Phi3Mini,
    /// Qwen2.5-7B: Q/K/V biases.
    Qwen25_7B,
    /// Qwen3-8B: Q/K norms.
    Qwen3_8B,
    /// Gemma-2-9B: a 4096 window on every other layer, soft-capping.
    Gemma2_9B,
    /// GLM-4-9B-0414: fused gate/up, post-norms.
    Glm4_9B,
    /// Gemma-3n-E2B: per-layer token embeddings, AltUp and LAuReL, the last
    /// 10 of 30 layers reusing the cache of the first 20.
    Gemma3nE2B,
    /// GLM-4.7-Flash: `deepseek2` latent attention with a compressed query
    /// (`q_lora_rank`), sigmoid-gated experts with a selection bias.
    Glm47Flash,
    /// Qwen3.5-9B: dense Qwen3.5, 24 gated delta-net layers, 8 full-attention
    /// layers with M-RoPE sections, an MTP block.
    Qwen35_9B,
    /// Qwen3.5-35B-A3B: 30 gated delta-net layers, 10 full-attention layers,
    /// 256 experts and a shared one, an MTP block.
    Qwen35Moe35BA3B,
    /// LFM2-1.2B: 10 short-convolution layers with a 2-token state, 6
    /// attention layers.
    Lfm2_1_2B,
    /// Gemma-4-E2B: per-layer token embeddings, heads of 256 (sliding) and
    /// 512 (full), the last 20 of 35 layers reusing the cache of the first
    /// 15 with no K/V projections of their own.
    Gemma4E2B,
    /// Gemma-4-31B: 16 KV heads of 256 on sliding layers, 4 of 512 on full
    /// ones, which have no V projection.
    Gemma4_31B,
    /// Gemma-4-26B-A4B: Gemma 4's attention (31B's kinds of layer) with a
    /// dense FFN beside 128 experts on every layer, a router with its own
    /// input scale, fused gate/up experts, a per-expert output scale.
    Gemma4_26BA4B,
    /// Devstral-Small-2-24B-Instruct-2512: `mistral3`, Llama's tensors with
    /// Llama-4-style attention temperature scaling (a per-position Q scale).
    DevstralSmall2,
    /// OLMo-2-1124-7B: `olmo2`, post-norms only, Q/K norms over the whole
    /// projection, 32 KV heads.
    Olmo2_7B,
    /// SmolLM3-3B: `smollm3`, Llama's tensors with RoPE skipped on every
    /// 4th layer, tied embeddings.
    SmolLm3_3B,
    /// Olmo-3-7B: `olmo2` with a 4096 window on 3 layers of 4.
    Olmo3_7B,
}

impl Model {
    /// Every model.
    pub const ALL: [Model; 25] = [
        Model::DeepSeekV2Lite2024,
        Model::DeepSeekV2Lite,
        Model::Llama4Scout,
        Model::Qwen3Next80B,
        Model::Glm45Air,
        Model::Granite4HTiny,
        Model::GptOss20B,
        Model::Mixtral8x7B,
        Model::Phi3Mini,
        Model::Qwen25_7B,
        Model::Qwen3_8B,
        Model::Gemma2_9B,
        Model::Glm4_9B,
        Model::Gemma3nE2B,
        Model::Glm47Flash,
        Model::Qwen35_9B,
        Model::Qwen35Moe35BA3B,
        Model::Lfm2_1_2B,
        Model::Gemma4E2B,
        Model::Gemma4_31B,
        Model::DevstralSmall2,
        Model::Olmo2_7B,
        Model::SmolLm3_3B,
        Model::Olmo3_7B,
        Model::Gemma4_26BA4B,
    ];

    /// Short name, e.g. `deepseek2-lite-2024`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Model::DeepSeekV2Lite2024 => "deepseek2-lite-2024",
            Model::DeepSeekV2Lite => "deepseek2-lite",
            Model::Llama4Scout => "llama4-scout",
            Model::Qwen3Next80B => "qwen3next-80b-a3b",
            Model::Glm45Air => "glm4moe-4.5-air",
            Model::Granite4HTiny => "granitehybrid-4.0-h-tiny",
            Model::GptOss20B => "gpt-oss-20b",
            Model::Mixtral8x7B => "mixtral-8x7b",
            Model::Phi3Mini => "phi-mini-4k",
            Model::Qwen25_7B => "qwen2.5-7b",
            Model::Qwen3_8B => "qwen3-8b",
            Model::Gemma2_9B => "gemma2-9b",
            Model::Glm4_9B => "glm4-9b",
            Model::Gemma3nE2B => "gemma3n-e2b",
            Model::Glm47Flash => "deepseek2-glm-4.7-flash",
            Model::Qwen35_9B => "qwen35-9b",
            Model::Qwen35Moe35BA3B => "qwen35moe-35b-a3b",
            Model::Lfm2_1_2B => "lfm2-1.2b",
            Model::Gemma4E2B => "gemma4-e2b",
            Model::Gemma4_31B => "gemma4-31b",
            Model::Gemma4_26BA4B => "gemma4-26b-a4b",
            Model::DevstralSmall2 => "mistral3-devstral-small-2",
            Model::Olmo2_7B => "olmo2-7b",
            Model::SmolLm3_3B => "smollm3-3b",
            Model::Olmo3_7B => "olmo2-olmo3-7b",
        }
    }

    /// The model called `name` (as [`Model::name`] spells it).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Model> {
        Model::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The mix its files are tested in: gpt-oss ships MXFP4 experts.
    #[must_use]
    pub fn file_type(self) -> FileType {
        match self {
            Model::GptOss20B => FileType::MXFP4_MOE,
            _ => FileType::Q4_K_M,
        }
    }

    fn draft(self) -> Draft {
        match self {
            Model::DeepSeekV2Lite2024 => latent::deepseek_v2_lite(false),
            Model::DeepSeekV2Lite => latent::deepseek_v2_lite(true),
            Model::Llama4Scout => moe::llama4_scout(),
            Model::Qwen3Next80B => hybrid::qwen3next_80b(),
            Model::Glm45Air => moe::glm45_air(),
            Model::Granite4HTiny => hybrid::granite4_h_tiny(),
            Model::GptOss20B => moe::gpt_oss_20b(),
            Model::Mixtral8x7B => moe::mixtral_8x7b(),
            Model::Phi3Mini => moe::phi3_mini(),
            Model::Qwen25_7B => dense::qwen25_7b(),
            Model::Qwen3_8B => dense::qwen3_8b(),
            Model::Gemma2_9B => dense::gemma2_9b(),
            Model::Glm4_9B => dense::glm4_9b(),
            Model::Gemma3nE2B => gemma3n::gemma3n_e2b(),
            Model::Glm47Flash => latent::glm47_flash(),
            Model::Qwen35_9B => hybrid::qwen35_9b(),
            Model::Qwen35Moe35BA3B => hybrid::qwen35moe_35b_a3b(),
            Model::Lfm2_1_2B => lfm2::lfm2_1_2b(),
            Model::Gemma4E2B => gemma4::gemma4_e2b(),
            Model::Gemma4_31B => gemma4::gemma4_31b(),
            Model::Gemma4_26BA4B => gemma4::gemma4_26b_a4b(),
            Model::DevstralSmall2 => dense::devstral_small_2(),
            Model::Olmo2_7B => dense::olmo2_7b(),
            Model::SmolLm3_3B => dense::smollm3_3b(),
            Model::Olmo3_7B => dense::olmo3_7b(),
        }
    }

    /// `general.architecture`.
    #[must_use]
    pub fn arch(self) -> &'static str {
        self.draft().arch
    }

    /// Training context (`{arch}.context_length`).
    #[must_use]
    pub fn n_ctx_train(self) -> u64 {
        self.draft().n_ctx_train
    }
}

/// A model's header before typing: metadata, tensor names and shapes.
pub(super) struct Draft {
    arch: &'static str,
    n_vocab: u64,
    n_ctx_train: u64,
    meta: Vec<(String, Value)>,
    tensors: Vec<(String, Vec<u64>)>,
    mix: MixModel,
}

impl Draft {
    /// The keys every architecture reads: sizes, heads, RoPE base, norm
    /// epsilon, vocabulary size.
    fn new(arch: &'static str, c: &Common) -> Draft {
        let mut d = Draft {
            arch,
            n_vocab: c.n_vocab,
            n_ctx_train: c.n_ctx_train,
            meta: Vec::new(),
            tensors: Vec::new(),
            mix: MixModel {
                n_layer: c.n_layer,
                n_head: u64::from(c.n_head),
                n_head_kv: u64::from(c.n_head_kv),
                n_expert: c.n_expert,
                is_70b: false,
            },
        };
        let n_ctx = u32::try_from(c.n_ctx_train).unwrap_or(u32::MAX);
        d.kv("context_length", n_ctx);
        d.kv("embedding_length", c.n_embd);
        d.kv("block_count", c.n_layer);
        d.kv("feed_forward_length", c.n_ff);
        d.kv("attention.head_count", c.n_head);
        d.kv("rope.freq_base", c.rope_base);
        d.kv(c.norm_eps_key, c.norm_eps);
        d.kv("vocab_size", u32::try_from(c.n_vocab).unwrap_or(u32::MAX));
        d
    }

    /// Its metadata (without the general keys and the tokenizer) and its
    /// tensors' names and shapes, in file order: what `synth::facts` builds
    /// a catalog entry's header from when the zoo lays out its architecture.
    pub(super) fn into_parts(self) -> (Vec<(String, Value)>, Vec<(String, Vec<u64>)>) {
        (self.meta, self.tensors)
    }

    /// `{arch}.{key}`.
    fn kv(&mut self, key: &str, v: impl Into<Value>) {
        self.meta.push((format!("{}.{key}", self.arch), v.into()));
    }

    /// `{arch}.{key}` as an array of u32 (per-layer values).
    fn kv_u32s(&mut self, key: &str, v: Vec<u32>) {
        self.kv(key, Array::new(ArrayItems::U32(v)));
    }

    /// A tensor outside the blocks.
    fn global(&mut self, name: &str, dims: &[u64]) {
        self.tensors.push((name.to_string(), dims.to_vec()));
    }

    /// `blk.{il}.{suffix}`.
    fn blk(&mut self, il: u32, suffix: &str, dims: &[u64]) {
        self.tensors
            .push((format!("blk.{il}.{suffix}"), dims.to_vec()));
    }

    /// The embedding, and the output norm and matrix (unless tied).
    fn embeddings(&mut self, n_embd: u64, tied: bool) {
        self.global("token_embd.weight", &[n_embd, self.n_vocab]);
        self.global("output_norm.weight", &[n_embd]);
        if !tied {
            self.global("output.weight", &[n_embd, self.n_vocab]);
        }
    }

    /// A multi-token-prediction block's own tensors (`blk.{il}.nextn.*`),
    /// as the converters of GLM-4.5, DeepSeek and Qwen3-Next write them.
    fn nextn(&mut self, il: u32, n_embd: u64) {
        self.blk(il, "nextn.eh_proj.weight", &[2 * n_embd, n_embd]);
        self.blk(il, "nextn.enorm.weight", &[n_embd]);
        self.blk(il, "nextn.hnorm.weight", &[n_embd]);
        self.blk(il, "nextn.shared_head_norm.weight", &[n_embd]);
    }
}

/// The hyper-parameters every draft states.
struct Common {
    n_layer: u32,
    n_embd: u32,
    n_ff: u32,
    n_head: u32,
    n_head_kv: u32,
    n_expert: u32,
    n_vocab: u64,
    n_ctx_train: u64,
    rope_base: f32,
    norm_eps: f32,
    /// `attention.layer_norm_rms_epsilon`, or `attention.layer_norm_epsilon`.
    norm_eps_key: &'static str,
}

impl Default for Common {
    fn default() -> Self {
        Common {
            n_layer: 0,
            n_embd: 0,
            n_ff: 0,
            n_head: 0,
            n_head_kv: 0,
            n_expert: 0,
            n_vocab: 0,
            n_ctx_train: 0,
            rope_base: 10_000.0,
            norm_eps: 1e-5,
            norm_eps_key: "attention.layer_norm_rms_epsilon",
        }
    }
}

/// The complete header of `model` in `ftype`: metadata, tokenizer and every
/// tensor with llama-quantize's type.
///
/// # Errors
/// Sizes the GGUF writer cannot lay out.
pub fn build(model: Model, ftype: FileType) -> Result<Header, GgufError> {
    let d = model.draft();
    let input: Vec<MixTensor<'_>> = d
        .tensors
        .iter()
        .map(|(name, dims)| MixTensor { name, dims })
        .collect();
    let types = MixPlan::new(&d.mix, &input).types(ftype);
    let mut b = HeaderBuilder::new()
        .kv("general.architecture", d.arch)
        .kv(
            "general.name",
            format!("headroom synthetic {} {}", model.name(), ftype.name()),
        )
        .kv("general.file_type", ftype.id())
        .kv("general.quantization_version", 2u32);
    for (key, value) in d.meta {
        b = b.kv(key, value);
    }
    b = tokenizer(b, d.n_vocab);
    for ((name, dims), ty) in d.tensors.into_iter().zip(types) {
        b = b.tensor(name, &dims, ty);
    }
    b.build()
}

/// Writes `model` in `ftype` to `path` as a sparse file (header, then a hole
/// as long as the tensor data) and returns its header.
///
/// # Errors
/// The header cannot be laid out or the file cannot be written.
pub fn write_sparse(path: &Path, model: Model, ftype: FileType) -> Result<Header, GgufError> {
    let h = build(model, ftype)?;
    create_sparse_file(path, &h)?;
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::profile;

    fn n_params(m: Model) -> u64 {
        m.draft()
            .tensors
            .iter()
            .map(|(_, dims)| dims.iter().product::<u64>())
            .sum()
    }

    #[test]
    fn names_round_trip_and_headers_profile() {
        for m in Model::ALL {
            assert_eq!(Model::from_name(m.name()), Some(m));
            let h = build(m, m.file_type()).expect("header");
            let p = profile(&h).unwrap_or_else(|e| panic!("{}: {e}", m.name()));
            assert_eq!(p.arch, m.arch());
        }
    }

    /// `arch::VERIFIED` is exactly the architectures with a synthetic file
    /// checked against llama.cpp (the plain shapes and the zoo): a new entry
    /// needs a test, and a test makes its architecture verified.
    #[test]
    fn verified_architectures_are_those_with_a_synthetic_file() {
        let mut tested: Vec<&str> = Model::ALL
            .iter()
            .map(|m| m.arch())
            .chain(crate::synth::Shape::ALL.iter().map(|s| s.spec().arch))
            .collect();
        tested.sort_unstable();
        tested.dedup();
        let mut verified = crate::arch::VERIFIED.to_vec();
        verified.sort_unstable();
        assert_eq!(tested, verified);
    }

    #[test]
    fn parameter_counts_match_the_published_models() {
        // Safetensors totals of the published checkpoints (the vision tower
        // of Llama 4 left out); the MTP blocks are part of these files.
        for (m, published, tolerance) in [
            (Model::DeepSeekV2Lite2024, 15_706_484_224u64, 0.0),
            (Model::Llama4Scout, 107_770_000_000, 0.01),
            (Model::Qwen3Next80B, 81_300_000_000, 0.02),
            (Model::Glm45Air, 110_470_000_000, 0.02),
            (Model::Granite4HTiny, 6_940_000_000, 0.02),
            (Model::Mixtral8x7B, 46_702_792_704, 0.0),
            (Model::Phi3Mini, 3_821_079_552, 0.0),
            (Model::Qwen25_7B, 7_615_616_512, 0.0),
            (Model::Qwen3_8B, 8_190_735_360, 0.0),
            (Model::Gemma2_9B, 9_241_705_984, 0.0),
            (Model::Glm4_9B, 9_400_000_000, 0.02),
            // LFM2-1.2B: the count another project lists for LiquidAI's
            // LFM2-1.2B Q4_K_M file (code-index file id 57856444710).
            (Model::Lfm2_1_2B, 1_170_340_608, 0.0),
            // Gemma-4-26B-A4B: llama.cpp's `model params = 25.23 B` in its
            // dump of the header (code-index file id 54492899325).
            (Model::Gemma4_26BA4B, 25_230_000_000, 0.001),
        ] {
            let n = n_params(m) as f64;
            let off = (n / published as f64 - 1.0).abs();
            assert!(
                off <= tolerance,
                "{}: {n} parameters, published {published}",
                m.name()
            );
        }
    }
}
