//! Real-shaped headers from architecture facts: what a model's GGUF header
//! would say, built from the numbers its `config.json` (or model card) gives,
//! so a model can be planned before its file is on disk.
//!
//! Why: `headroom fit` ranks a whole catalog of models without reading any of
//! their files, and must agree with `headroom plan` on the files themselves.
//! So a catalog entry becomes a [`Header`] with the same tensor names, shapes
//! and (through [`super::mix`]) the same per-tensor quantization types the
//! real file has, then goes through the very same [`crate::profile::profile`]
//! and solver as a file read from disk. Only the tokenizer is left out (it
//! costs a few MB of header and no device memory).
//!
//! Tensor layouts follow llama.cpp's `load_arch_tensors` for the families the
//! catalog holds (llama and its Mistral/Mixtral variants, qwen2, qwen3,
//! qwen3moe, gemma2, gemma3, phi3, deepseek2, gpt-oss, and through the
//! zoo's builders glm4, gemma3n, glm4moe, llama4, qwen3next, qwen35,
//! qwen35moe, lfm2, granitehybrid, gemma4, mistral3, olmo2 and smollm3); any other
//! architecture gets the llama layout, which has the same per-layer bytes to
//! within its norms and biases. Where facts are missing, [`estimate`] fills
//! them from the parameter count with a documented generic shape, and the
//! caller must say the result is estimated.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::SynthTensor;
use super::mix::{FileType, MixModel, MixPlan, MixTensor};
use crate::gguf::writer::HeaderBuilder;
use crate::gguf::{ArrayItems, GgmlType, GgufError, Header, TensorInfo, Value};
use crate::profile::{self, ModelProfile, ProfileError};

/// Why facts cannot become a header or a profile.
#[derive(Debug, Error)]
pub enum FactsError {
    /// Required facts are absent.
    #[error("missing architecture facts: {}", .0.join(", "))]
    Missing(Vec<&'static str>),
    /// The facts contradict each other.
    #[error("inconsistent architecture facts: {0}")]
    Inconsistent(String),
    /// The header could not be laid out.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// The header does not make a valid model.
    #[error(transparent)]
    Profile(#[from] ProfileError),
}

/// The most parameters facts may describe: 2^50, a thousand times the
/// largest open models (about 2^41). Facts are untrusted text (a catalog
/// file); this bound keeps every element count, and every byte count the
/// planner derives from them (at most 4 bytes an element), far inside u64.
pub const MAX_PARAMS: u64 = 1 << 50;

/// Architecture facts as a catalog lists them, any of them possibly unknown.
/// Field names are the GGUF keys without the `{arch}.` prefix (and without
/// `attention.` for the attention keys).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartialFacts {
    /// `general.architecture` (`llama`, `qwen2`, `gemma2`, …).
    pub architecture: Option<String>,
    /// Transformer blocks.
    pub block_count: Option<u32>,
    /// Hidden size.
    pub embedding_length: Option<u64>,
    /// Dense feed-forward size.
    pub feed_forward_length: Option<u64>,
    /// Query heads.
    pub head_count: Option<u64>,
    /// Key/value heads.
    pub head_count_kv: Option<u64>,
    /// Per-head key size (default: hidden size ÷ heads).
    pub key_length: Option<u64>,
    /// Per-head value size (default: the key size).
    pub value_length: Option<u64>,
    /// Vocabulary size.
    pub vocab_size: Option<u64>,
    /// Training context.
    pub context_length: Option<u64>,
    /// The output projection is the token embedding.
    pub tied_embeddings: Option<bool>,
    /// Experts per MoE layer.
    pub expert_count: Option<u32>,
    /// Experts used per token.
    pub expert_used_count: Option<u32>,
    /// Feed-forward size of one expert.
    pub expert_feed_forward_length: Option<u64>,
    /// Shared (always active) experts.
    pub expert_shared_count: Option<u32>,
    /// Leading blocks with a dense FFN instead of experts (DeepSeek).
    pub leading_dense_block_count: Option<u32>,
    /// Sliding-window size of the windowed layers.
    pub sliding_window: Option<u32>,
    /// Multi-head latent attention: the compressed KV rank (DeepSeek).
    pub kv_lora_rank: Option<u32>,
    /// Rotary dimensions (for latent attention, those kept uncompressed).
    pub rope_dimension_count: Option<u64>,
    /// Has Llama-3.1-style `rope_freqs.weight` (long-context RoPE factors).
    pub rope_freqs: Option<bool>,
    /// Expert tensors are stored in this type in every quantization
    /// (gpt-oss ships MXFP4 experts that quantizers keep).
    pub expert_type: Option<GgmlType>,
    /// Every n-th layer is full attention, the others sliding
    /// (`attention.sliding_window_pattern`; Gemma 3n: 5).
    pub sliding_window_pattern: Option<u32>,
    /// The last layers that reuse an earlier layer's KV cache
    /// (`attention.shared_kv_layers`, Gemma 3n).
    pub shared_kv_layers: Option<u32>,
    /// Width of each layer's own token embedding
    /// (`embedding_length_per_layer_input`, Gemma 3n).
    pub embedding_length_per_layer_input: Option<u64>,
    /// AltUp streams (`altup.num_inputs`, Gemma 3n).
    pub altup_num_inputs: Option<u64>,
    /// Rank of the LAuReL residual projections (Gemma 3n; no GGUF key).
    pub laurel_rank: Option<u64>,
    /// The last blocks that are multi-token-prediction (MTP) blocks,
    /// counted in `block_count` (`nextn_predict_layers`, GLM-4.5).
    pub nextn_predict_layers: Option<u32>,
    /// Every n-th block is MoE, the others dense
    /// (`interleave_moe_layer_step`, Llama 4).
    pub interleave_moe_layer_step: Option<u32>,
    /// Latent attention with a compressed query: its rank
    /// (`attention.q_lora_rank`; DeepSeek V3, GLM-4.7-Flash).
    pub q_lora_rank: Option<u32>,
    /// Every n-th layer is full attention, the others recurrent
    /// (`full_attention_interval`; Qwen3-Next, Qwen3.5: 4).
    pub full_attention_interval: Option<u32>,
    /// Width of the recurrent layers' convolution (`ssm.conv_kernel`).
    pub ssm_conv_kernel: Option<u64>,
    /// Size of a delta-net head (`ssm.state_size`, the config's
    /// `linear_key_head_dim`).
    pub ssm_state_size: Option<u64>,
    /// Delta-net key heads (`ssm.group_count`, `linear_num_key_heads`).
    pub ssm_group_count: Option<u64>,
    /// Delta-net value heads (`ssm.time_step_rank`,
    /// `linear_num_value_heads`).
    pub ssm_time_step_rank: Option<u64>,
    /// Feed-forward size of the shared expert
    /// (`expert_shared_feed_forward_length`).
    pub expert_shared_feed_forward_length: Option<u64>,
    /// Length of the short convolution (`shortconv.l_cache`, LFM2).
    pub shortconv_l_cache: Option<u32>,
    /// The attention layers of a hybrid, the others recurrent (LFM2's
    /// `full_attn_idxs`; in the header, the layers with KV heads).
    pub attention_layers: Option<Vec<u32>>,
    /// Mamba-2 inner size (`ssm.inner_size`, Granite 4.0 H).
    pub ssm_inner_size: Option<u64>,
    /// Key (and value) head size of the sliding layers
    /// (`attention.key_length_swa`, Gemma 4; `key_length` is the full
    /// layers').
    pub key_length_swa: Option<u64>,
    /// KV heads of the full-attention layers, where they differ from the
    /// sliding ones' (`num_global_key_value_heads`, Gemma 4).
    pub head_count_kv_full: Option<u64>,
    /// The KV-sharing layers' FFN is twice as wide (`use_double_wide_mlp`,
    /// Gemma 4).
    pub double_wide_mlp: Option<bool>,
    /// The full layers have no V projection: their values are their keys
    /// (`attention_k_eq_v`, Gemma 4).
    pub attention_k_eq_v: Option<bool>,
    /// Llama-4-style attention temperature scaling
    /// (`attention.temperature_scale`, mistral3 since Ministral 3): a
    /// per-position Q scale, one more node in llama.cpp's graph.
    pub attention_temperature_scale: Option<f64>,
}

/// Complete architecture facts: enough to lay out every tensor.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ArchFacts {
    /// `general.architecture`.
    pub architecture: String,
    /// Transformer blocks.
    pub block_count: u32,
    /// Hidden size.
    pub embedding_length: u64,
    /// Dense feed-forward size.
    pub feed_forward_length: u64,
    /// Query heads.
    pub head_count: u64,
    /// Key/value heads.
    pub head_count_kv: u64,
    /// Per-head key size.
    pub key_length: u64,
    /// Per-head value size.
    pub value_length: u64,
    /// Vocabulary size.
    pub vocab_size: u64,
    /// Training context (0: unknown).
    pub context_length: u64,
    /// The output projection is the token embedding.
    pub tied_embeddings: bool,
    /// Experts per MoE layer (0: dense).
    pub expert_count: u32,
    /// Experts used per token.
    pub expert_used_count: u32,
    /// Feed-forward size of one expert.
    pub expert_feed_forward_length: u64,
    /// Shared experts.
    pub expert_shared_count: u32,
    /// Leading dense blocks in an MoE model.
    pub leading_dense_block_count: u32,
    /// Sliding-window size.
    pub sliding_window: Option<u32>,
    /// Latent-attention rank (0: none).
    pub kv_lora_rank: u32,
    /// Rotary dimensions (0: not stated).
    pub rope_dimension_count: u64,
    /// Has `rope_freqs.weight`.
    pub rope_freqs: bool,
    /// Fixed expert tensor type, if any.
    pub expert_type: Option<GgmlType>,
    /// Full attention every n-th layer (Gemma 3n).
    pub sliding_window_pattern: Option<u32>,
    /// Layers reusing an earlier layer's KV cache (Gemma 3n).
    pub shared_kv_layers: Option<u32>,
    /// Per-layer token embedding width (Gemma 3n).
    pub embedding_length_per_layer_input: Option<u64>,
    /// AltUp streams (Gemma 3n).
    pub altup_num_inputs: Option<u64>,
    /// LAuReL rank (Gemma 3n).
    pub laurel_rank: Option<u64>,
    /// MTP blocks at the end of `block_count` (0: none).
    pub nextn_predict_layers: u32,
    /// Every n-th block is MoE (Llama 4).
    pub interleave_moe_layer_step: Option<u32>,
    /// Compressed-query rank of latent attention (0: none).
    pub q_lora_rank: u32,
    /// Full attention every n-th layer, the others recurrent (Qwen3-Next, Qwen3.5).
    pub full_attention_interval: Option<u32>,
    /// Recurrent convolution width.
    pub ssm_conv_kernel: Option<u64>,
    /// Delta-net head size.
    pub ssm_state_size: Option<u64>,
    /// Delta-net key heads.
    pub ssm_group_count: Option<u64>,
    /// Delta-net value heads.
    pub ssm_time_step_rank: Option<u64>,
    /// Shared expert width.
    pub expert_shared_feed_forward_length: Option<u64>,
    /// Short convolution length (LFM2).
    pub shortconv_l_cache: Option<u32>,
    /// Attention layers of a hybrid (LFM2, Granite 4.0 H).
    pub attention_layers: Option<Vec<u32>>,
    /// Mamba-2 inner size (Granite 4.0 H).
    pub ssm_inner_size: Option<u64>,
    /// Head size of the sliding layers (Gemma 4).
    pub key_length_swa: Option<u64>,
    /// KV heads of the full layers (Gemma 4).
    pub head_count_kv_full: Option<u64>,
    /// Doubled FFN on the KV-sharing layers (Gemma 4).
    pub double_wide_mlp: bool,
    /// Full layers without a V projection (Gemma 4).
    pub attention_k_eq_v: bool,
    /// Attention temperature scale (mistral3).
    pub attention_temperature_scale: Option<Scale>,
}

/// A scale factor from the facts, compared and hashed by its bits (facts are
/// keys of sets of distinct shapes).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Scale(pub f64);

impl Eq for Scale {}

impl std::hash::Hash for Scale {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

impl ArchFacts {
    /// The same facts, as a (complete) [`PartialFacts`].
    #[must_use]
    pub fn partial(&self) -> PartialFacts {
        PartialFacts {
            architecture: Some(self.architecture.clone()),
            block_count: Some(self.block_count),
            embedding_length: Some(self.embedding_length),
            feed_forward_length: Some(self.feed_forward_length),
            head_count: Some(self.head_count),
            head_count_kv: Some(self.head_count_kv),
            key_length: Some(self.key_length),
            value_length: Some(self.value_length),
            vocab_size: Some(self.vocab_size),
            context_length: (self.context_length > 0).then_some(self.context_length),
            tied_embeddings: Some(self.tied_embeddings),
            expert_count: Some(self.expert_count),
            expert_used_count: Some(self.expert_used_count),
            expert_feed_forward_length: Some(self.expert_feed_forward_length),
            expert_shared_count: Some(self.expert_shared_count),
            leading_dense_block_count: Some(self.leading_dense_block_count),
            sliding_window: self.sliding_window,
            kv_lora_rank: Some(self.kv_lora_rank),
            rope_dimension_count: Some(self.rope_dimension_count),
            rope_freqs: Some(self.rope_freqs),
            expert_type: self.expert_type,
            sliding_window_pattern: self.sliding_window_pattern,
            shared_kv_layers: self.shared_kv_layers,
            embedding_length_per_layer_input: self.embedding_length_per_layer_input,
            altup_num_inputs: self.altup_num_inputs,
            laurel_rank: self.laurel_rank,
            nextn_predict_layers: Some(self.nextn_predict_layers),
            interleave_moe_layer_step: self.interleave_moe_layer_step,
            q_lora_rank: Some(self.q_lora_rank),
            full_attention_interval: self.full_attention_interval,
            ssm_conv_kernel: self.ssm_conv_kernel,
            ssm_state_size: self.ssm_state_size,
            ssm_group_count: self.ssm_group_count,
            ssm_time_step_rank: self.ssm_time_step_rank,
            expert_shared_feed_forward_length: self.expert_shared_feed_forward_length,
            shortconv_l_cache: self.shortconv_l_cache,
            attention_layers: self.attention_layers.clone(),
            ssm_inner_size: self.ssm_inner_size,
            key_length_swa: self.key_length_swa,
            head_count_kv_full: self.head_count_kv_full,
            double_wide_mlp: Some(self.double_wide_mlp),
            attention_k_eq_v: Some(self.attention_k_eq_v),
            attention_temperature_scale: self.attention_temperature_scale.map(|s| s.0),
        }
    }
}

/// Calls `$m!` with the facts [`PartialFacts::conflicts`] compares, in the
/// order it reports them, then the `$extra` ones.
macro_rules! with_compared_facts {
    ($m:ident; $($extra:ident),*) => {
        $m!(
            architecture, block_count, embedding_length, feed_forward_length,
            head_count, head_count_kv, key_length, value_length, vocab_size,
            tied_embeddings, expert_count, expert_used_count, expert_feed_forward_length,
            expert_shared_count, leading_dense_block_count, sliding_window, kv_lora_rank,
            rope_dimension_count, sliding_window_pattern, shared_kv_layers,
            embedding_length_per_layer_input, altup_num_inputs, laurel_rank,
            nextn_predict_layers, interleave_moe_layer_step, q_lora_rank,
            full_attention_interval, ssm_conv_kernel, ssm_state_size, ssm_group_count,
            ssm_time_step_rank, expert_shared_feed_forward_length, shortconv_l_cache,
            attention_layers, ssm_inner_size, key_length_swa, head_count_kv_full,
            double_wide_mlp, attention_k_eq_v, attention_temperature_scale $(, $extra)*
        )
    };
}

impl PartialFacts {
    /// These facts, with the gaps filled from `other` (facts of a model with
    /// the same architecture).
    #[must_use]
    pub fn or(&self, other: &PartialFacts) -> PartialFacts {
        macro_rules! pick {
            ($($f:ident),*) => { PartialFacts { $($f: self.$f.clone().or_else(|| other.$f.clone()),)* } };
        }
        with_compared_facts!(pick; context_length, rope_freqs, expert_type)
    }

    /// The facts both sets state with different values, as `key: a ≠ b`.
    #[must_use]
    pub fn conflicts(&self, other: &PartialFacts) -> Vec<String> {
        let mut out = Vec::new();
        macro_rules! cmp {
            ($($f:ident),*) => {$(
                if let (Some(a), Some(b)) = (&self.$f, &other.$f) && a != b {
                    out.push(format!("{}: {:?} ≠ {:?}", stringify!($f), a, b));
                }
            )*};
        }
        with_compared_facts!(cmp;);
        out
    }

    /// Whether every fact needed to lay out the tensors is present.
    #[must_use]
    pub fn is_complete(&self) -> bool {
        self.complete().is_ok()
    }

    /// Complete facts, or the names of the missing ones.
    ///
    /// # Errors
    /// [`FactsError::Missing`] listing what is absent, or
    /// [`FactsError::Inconsistent`] for impossible values.
    pub fn complete(&self) -> Result<ArchFacts, FactsError> {
        // Checked first, so that partial facts can be refused too (and no
        // layout loops over billions of layers).
        if let Some(n) = self.block_count
            && n > profile::MAX_LAYERS
        {
            return Err(FactsError::Inconsistent(format!(
                "{n} layers, more than llama.cpp's {}",
                profile::MAX_LAYERS
            )));
        }
        if let Some(n) = self.expert_count
            && n > profile::MAX_EXPERTS
        {
            return Err(FactsError::Inconsistent(format!(
                "{n} experts, more than llama.cpp's {}",
                profile::MAX_EXPERTS
            )));
        }
        let mut missing = Vec::new();
        macro_rules! need {
            ($f:ident) => {
                match &self.$f {
                    Some(v) => v.clone(),
                    None => {
                        missing.push(stringify!($f));
                        Default::default()
                    }
                }
            };
        }
        let architecture: String = need!(architecture);
        let block_count: u32 = need!(block_count);
        let embedding_length: u64 = need!(embedding_length);
        // qwen35moe has no dense FFN, and its GGUFs no feed_forward_length.
        let feed_forward_length: u64 = if architecture == "qwen35moe" {
            self.feed_forward_length.unwrap_or(0)
        } else {
            need!(feed_forward_length)
        };
        let head_count: u64 = need!(head_count);
        let head_count_kv: u64 = need!(head_count_kv);
        let vocab_size: u64 = need!(vocab_size);
        let expert_count = self.expert_count.unwrap_or(0);
        let (expert_used_count, expert_feed_forward_length) = if expert_count > 0 {
            (need!(expert_used_count), need!(expert_feed_forward_length))
        } else {
            (0, 0)
        };
        if !missing.is_empty() {
            return Err(FactsError::Missing(missing));
        }
        if block_count == 0 || embedding_length == 0 || head_count == 0 || head_count_kv == 0 {
            return Err(FactsError::Inconsistent(
                "block_count, embedding_length, head_count and head_count_kv must be above 0"
                    .into(),
            ));
        }
        if !head_count.is_multiple_of(head_count_kv) {
            return Err(FactsError::Inconsistent(format!(
                "{head_count_kv} KV heads do not divide {head_count} heads"
            )));
        }
        if architecture == "gemma3n" {
            check_gemma3n(self, block_count)?;
        }
        check_zoo_moe(self, &architecture, block_count, expert_count)?;
        if is_qwen_delta_net(&architecture) {
            check_qwen_delta_net(self, &architecture, block_count, head_count)?;
        }
        if architecture == "lfm2" {
            check_lfm2(self, block_count)?;
        }
        if architecture == "gemma4" {
            check_gemma4(self, block_count)?;
        }
        if architecture == "granitehybrid" {
            check_granitehybrid(self, block_count, embedding_length)?;
        }
        let key_length = self.key_length.unwrap_or(embedding_length / head_count);
        let tied = self.tied_embeddings.unwrap_or(false) || layout(&architecture).always_tied;
        let f = ArchFacts {
            architecture,
            block_count,
            embedding_length,
            feed_forward_length,
            head_count,
            head_count_kv,
            key_length,
            value_length: self.value_length.unwrap_or(key_length),
            vocab_size,
            context_length: self.context_length.unwrap_or(0),
            tied_embeddings: tied,
            expert_count,
            expert_used_count,
            expert_feed_forward_length,
            expert_shared_count: self.expert_shared_count.unwrap_or(0),
            leading_dense_block_count: self.leading_dense_block_count.unwrap_or(0),
            sliding_window: self.sliding_window,
            kv_lora_rank: self.kv_lora_rank.unwrap_or(0),
            rope_dimension_count: self.rope_dimension_count.unwrap_or(0),
            rope_freqs: self.rope_freqs.unwrap_or(false),
            expert_type: self.expert_type,
            sliding_window_pattern: self.sliding_window_pattern,
            shared_kv_layers: self.shared_kv_layers,
            embedding_length_per_layer_input: self.embedding_length_per_layer_input,
            altup_num_inputs: self.altup_num_inputs,
            laurel_rank: self.laurel_rank,
            nextn_predict_layers: self.nextn_predict_layers.unwrap_or(0),
            interleave_moe_layer_step: self.interleave_moe_layer_step,
            q_lora_rank: self.q_lora_rank.unwrap_or(0),
            full_attention_interval: self.full_attention_interval,
            ssm_conv_kernel: self.ssm_conv_kernel,
            ssm_state_size: self.ssm_state_size,
            ssm_group_count: self.ssm_group_count,
            ssm_time_step_rank: self.ssm_time_step_rank,
            expert_shared_feed_forward_length: self.expert_shared_feed_forward_length,
            shortconv_l_cache: self.shortconv_l_cache,
            attention_layers: self.attention_layers.clone(),
            ssm_inner_size: self.ssm_inner_size,
            key_length_swa: self.key_length_swa,
            head_count_kv_full: self.head_count_kv_full,
            double_wide_mlp: self.double_wide_mlp.unwrap_or(false),
            attention_k_eq_v: self.attention_k_eq_v.unwrap_or(false),
            attention_temperature_scale: self.attention_temperature_scale.map(Scale),
        };
        if checked_n_params(&raw_tensors(&f)).is_none_or(|n| n > MAX_PARAMS) {
            return Err(FactsError::Inconsistent(format!(
                "the tensors would hold more than {MAX_PARAMS} parameters"
            )));
        }
        Ok(f)
    }
}

/// Gemma 3n's own facts are all stated, and are the values llama.cpp's
/// loader assumes whatever the header says (`src/models/gemma3n.cpp` and
/// `llama-hparams.h`: the cache of the first 20 layers is shared, 4 AltUp
/// streams, LAuReL rank 64, per-layer inputs of 256): a model with others
/// would not be what llama.cpp loads.
fn check_gemma3n(f: &PartialFacts, block_count: u32) -> Result<(), FactsError> {
    let mut missing = Vec::new();
    macro_rules! need {
        ($f:ident) => {
            if f.$f.is_none() {
                missing.push(stringify!($f));
            }
        };
    }
    need!(sliding_window);
    need!(sliding_window_pattern);
    need!(shared_kv_layers);
    need!(embedding_length_per_layer_input);
    need!(altup_num_inputs);
    need!(laurel_rank);
    if !missing.is_empty() {
        return Err(FactsError::Missing(missing));
    }
    let shared = f.shared_kv_layers.unwrap_or(0);
    let fixed = [
        (
            "layers before the shared ones",
            u64::from(block_count.saturating_sub(shared)),
            20,
        ),
        (
            "embedding_length_per_layer_input",
            f.embedding_length_per_layer_input.unwrap_or(0),
            256,
        ),
        ("altup_num_inputs", f.altup_num_inputs.unwrap_or(0), 4),
        ("laurel_rank", f.laurel_rank.unwrap_or(0), 64),
    ];
    for (what, v, llama_cpp) in fixed {
        if v != llama_cpp {
            return Err(FactsError::Inconsistent(format!(
                "gemma3n {what} {v}: llama.cpp loads {llama_cpp}"
            )));
        }
    }
    if f.sliding_window_pattern == Some(0) {
        return Err(FactsError::Inconsistent(
            "sliding_window_pattern must be above 0".into(),
        ));
    }
    Ok(())
}

/// GLM-4.5 (`glm4moe`), Llama 4 (`llama4`) and compressed-query latent
/// attention (`deepseek2` with `q_lora_rank`) facts state what their zoo
/// layouts need: experts, the rotary size of GLM-4.5's partial RoPE (its
/// heads are not hidden ÷ heads wide), Llama 4's MoE layer step, the latent
/// ranks and per-head sizes; and the MTP blocks are fewer than the blocks.
fn check_zoo_moe(
    f: &PartialFacts,
    arch: &str,
    block_count: u32,
    expert_count: u32,
) -> Result<(), FactsError> {
    let mut missing = Vec::new();
    match arch {
        "deepseek2" if f.q_lora_rank.unwrap_or(0) > 0 => {
            for (fact, v) in [
                ("kv_lora_rank", f.kv_lora_rank.map(u64::from)),
                ("rope_dimension_count", f.rope_dimension_count),
                ("key_length", f.key_length),
                ("value_length", f.value_length),
            ] {
                if v.is_none() {
                    missing.push(fact);
                }
            }
            if missing.is_empty()
                && f.key_length.unwrap_or(0) <= f.rope_dimension_count.unwrap_or(0)
            {
                return Err(FactsError::Inconsistent(
                    "deepseek2 key_length must exceed rope_dimension_count".into(),
                ));
            }
        }
        "glm4moe" => {
            if f.key_length.is_none() {
                missing.push("key_length");
            }
            if f.rope_dimension_count.is_none() {
                missing.push("rope_dimension_count");
            }
        }
        "llama4" => {
            if f.interleave_moe_layer_step.is_none() {
                missing.push("interleave_moe_layer_step");
            }
        }
        _ => return Ok(()),
    }
    if !missing.is_empty() {
        return Err(FactsError::Missing(missing));
    }
    if expert_count == 0 {
        return Err(FactsError::Inconsistent(format!(
            "{arch} needs expert_count above 0"
        )));
    }
    if f.nextn_predict_layers.unwrap_or(0) >= block_count
        || f.leading_dense_block_count.unwrap_or(0) >= block_count
    {
        return Err(FactsError::Inconsistent(format!(
            "{arch}: the MTP and the leading dense blocks must be fewer than the {block_count} blocks"
        )));
    }
    Ok(())
}

/// The gated delta-net hybrids the zoo lays out (Qwen3-Next, Qwen3.5 and
/// Qwen3.6, dense and MoE).
fn is_qwen_delta_net(arch: &str) -> bool {
    matches!(arch, "qwen3next" | "qwen35" | "qwen35moe")
}

/// A Qwen delta-net hybrid states its recurrent layers' sizes and layer
/// pattern, and is shaped as llama.cpp's loader reads it: the delta-net's
/// key and value heads share one size (`ssm.state_size` for both), the value
/// heads are a multiple of the key heads, the full-attention layers' heads
/// are a key_length wide, and `qwen35moe`/`qwen3next` have experts (with a
/// shared one) where `qwen35` has none.
fn check_qwen_delta_net(
    f: &PartialFacts,
    arch: &str,
    block_count: u32,
    head_count: u64,
) -> Result<(), FactsError> {
    let mut missing = Vec::new();
    macro_rules! need {
        ($f:ident) => {
            if f.$f.is_none() {
                missing.push(stringify!($f));
            }
        };
    }
    need!(key_length);
    need!(full_attention_interval);
    need!(ssm_conv_kernel);
    need!(ssm_state_size);
    need!(ssm_group_count);
    need!(ssm_time_step_rank);
    need!(rope_dimension_count);
    let moe = f.expert_count.unwrap_or(0) > 0;
    if moe {
        need!(expert_shared_feed_forward_length);
    }
    if !missing.is_empty() {
        return Err(FactsError::Missing(missing));
    }
    let bad = |why: String| Err(FactsError::Inconsistent(format!("{arch}: {why}")));
    let interval = f.full_attention_interval.unwrap_or(0);
    let nextn = f.nextn_predict_layers.unwrap_or(0);
    let (groups, heads) = (
        f.ssm_group_count.unwrap_or(0),
        f.ssm_time_step_rank.unwrap_or(0),
    );
    if interval == 0 || nextn >= block_count {
        return bad(format!(
            "full_attention_interval {interval} and {nextn} MTP of {block_count} blocks"
        ));
    }
    if groups == 0 || !heads.is_multiple_of(groups) || f.ssm_state_size == Some(0) {
        return bad(format!("{heads} delta-net value heads, {groups} key heads"));
    }
    if f.ssm_conv_kernel == Some(0) || head_count == 0 {
        return bad("ssm_conv_kernel must be above 0".into());
    }
    if moe != (arch != "qwen35") {
        return bad(format!("expert_count {:?}", f.expert_count));
    }
    Ok(())
}

/// LFM2's own facts are stated: which layers attend (the others are short
/// convolutions, whose state is sized by `shortconv_l_cache`), each below
/// `block_count`; llama.cpp needs a convolution longer than 1
/// (`build_shortconv_block`).
fn check_lfm2(f: &PartialFacts, block_count: u32) -> Result<(), FactsError> {
    let mut missing = Vec::new();
    if f.shortconv_l_cache.is_none() {
        missing.push("shortconv_l_cache");
    }
    if f.attention_layers.is_none() {
        missing.push("attention_layers");
    }
    if !missing.is_empty() {
        return Err(FactsError::Missing(missing));
    }
    if f.shortconv_l_cache.is_some_and(|l| l < 2) {
        return Err(FactsError::Inconsistent(
            "lfm2 shortconv_l_cache must be above 1".into(),
        ));
    }
    if let Some(il) = f
        .attention_layers
        .iter()
        .flatten()
        .find(|&&il| il >= block_count)
    {
        return Err(FactsError::Inconsistent(format!(
            "lfm2 attention layer {il} of {block_count} layers"
        )));
    }
    Ok(())
}

/// Granite 4.0 H's own facts are stated: the Mamba-2 sizes, which layers
/// attend, and with experts the shared expert's width (without, every layer
/// has a dense FFN of `feed_forward_length`: Micro and the Nano sizes);
/// llama.cpp loads only an inner size of twice the hidden size
/// (`src/models/granite-hybrid.cpp`), one expert width
/// (`feed_forward_length`), and groups that divide the inner size.
fn check_granitehybrid(
    f: &PartialFacts,
    block_count: u32,
    embedding_length: u64,
) -> Result<(), FactsError> {
    let mut missing = Vec::new();
    macro_rules! need {
        ($f:ident) => {
            if f.$f.is_none() {
                missing.push(stringify!($f));
            }
        };
    }
    need!(attention_layers);
    need!(ssm_conv_kernel);
    need!(ssm_inner_size);
    need!(ssm_state_size);
    need!(ssm_time_step_rank);
    need!(ssm_group_count);
    let moe = f.expert_count.unwrap_or(0) > 0;
    if moe {
        need!(expert_shared_feed_forward_length);
    }
    if !missing.is_empty() {
        return Err(FactsError::Missing(missing));
    }
    let bad = |why: String| Err(FactsError::Inconsistent(format!("granitehybrid {why}")));
    if f.ssm_inner_size != Some(embedding_length.saturating_mul(2)) {
        return bad(format!(
            "ssm_inner_size {:?}: llama.cpp loads twice the hidden size",
            f.ssm_inner_size
        ));
    }
    if moe && f.expert_feed_forward_length != f.feed_forward_length {
        return bad("expert_feed_forward_length differs from feed_forward_length".into());
    }
    let groups = f.ssm_group_count.unwrap_or(0);
    if groups == 0 || !f.ssm_inner_size.unwrap_or(0).is_multiple_of(groups) {
        return bad(format!("ssm_group_count {groups}"));
    }
    if let Some(il) = f
        .attention_layers
        .iter()
        .flatten()
        .find(|&&il| il >= block_count)
    {
        return bad(format!("attention layer {il} of {block_count} layers"));
    }
    Ok(())
}

/// Gemma 4's layout facts are all stated: its loader reads the window, the
/// head sizes of both kinds of layer, the layer pattern, the shared layers
/// and the per-layer input width (0: none) from the header, with no
/// default to fall back on; the shared layers reuse the cache of the last
/// sliding and the last full layer before them, so at least two layers
/// (one of each kind) keep their own.
fn check_gemma4(f: &PartialFacts, block_count: u32) -> Result<(), FactsError> {
    let mut missing = Vec::new();
    macro_rules! need {
        ($f:ident) => {
            if f.$f.is_none() {
                missing.push(stringify!($f));
            }
        };
    }
    need!(key_length);
    need!(key_length_swa);
    need!(sliding_window);
    need!(sliding_window_pattern);
    need!(shared_kv_layers);
    need!(embedding_length_per_layer_input);
    if !missing.is_empty() {
        return Err(FactsError::Missing(missing));
    }
    let period = f.sliding_window_pattern.unwrap_or(0);
    let own = block_count.saturating_sub(f.shared_kv_layers.unwrap_or(0));
    if period < 2 || own < period {
        return Err(FactsError::Inconsistent(format!(
            "gemma4: {own} layers with their own cache, a full layer every {period}: \
             llama.cpp needs a sliding and a full one among them"
        )));
    }
    if let Some(kv) = f.head_count_kv_full
        && (kv == 0 || !f.head_count.unwrap_or(0).is_multiple_of(kv))
    {
        return Err(FactsError::Inconsistent(format!(
            "gemma4: {kv} KV heads on full layers"
        )));
    }
    Ok(())
}

/// The generic shape [`estimate`] uses for what the facts leave open.
pub mod generic {
    /// Head size.
    pub const HEAD_DIM: u64 = 128;
    /// Query heads per KV head.
    pub const GQA: u64 = 4;
    /// Feed-forward size ÷ hidden size (SwiGLU models: 2.7–3.5).
    pub const FF_RATIO: f64 = 3.5;
    /// Hidden size ÷ layers.
    pub const WIDTH_PER_LAYER: u64 = 128;
    /// Vocabulary (Llama 3's).
    pub const VOCAB: u64 = 128_256;
}

/// Fill the facts a catalog lacks from its parameter count, with the
/// [`generic`] dense shape: hidden size solved so the parameters come out at
/// `target` parameters, keeping every fact that is known. The result is an estimate
/// and must be shown as one.
///
/// # Errors
/// MoE facts without the expert size (no generic MoE shape is assumed), or
/// a parameter count no shape reaches.
pub fn estimate(known: &PartialFacts, target: u64) -> Result<ArchFacts, FactsError> {
    if let Ok(f) = known.complete() {
        return Ok(f);
    }
    if known.expert_count.unwrap_or(0) > 0 && known.expert_feed_forward_length.is_none() {
        return Err(FactsError::Missing(vec!["expert_feed_forward_length"]));
    }
    let shape = |e: u64| -> PartialFacts {
        let layers = known.block_count.unwrap_or_else(|| {
            u32::try_from((e / generic::WIDTH_PER_LAYER).max(1))
                .map_or(profile::MAX_LAYERS, |n| n.min(profile::MAX_LAYERS))
        });
        let n_head = known
            .head_count
            .unwrap_or_else(|| (e / generic::HEAD_DIM).max(1));
        let n_kv = known
            .head_count_kv
            .unwrap_or_else(|| (n_head / generic::GQA).max(1));
        let ff = known.feed_forward_length.unwrap_or_else(|| {
            let raw = (e as f64 * generic::FF_RATIO) as u64;
            raw.div_ceil(256) * 256
        });
        PartialFacts {
            architecture: Some("llama".into()),
            block_count: Some(layers),
            embedding_length: Some(e),
            feed_forward_length: Some(ff),
            head_count: Some(n_head),
            head_count_kv: Some(if n_head.is_multiple_of(n_kv) { n_kv } else { 1 }),
            // Unset: hidden size ÷ heads, which is HEAD_DIM when the heads are generic too.
            vocab_size: Some(generic::VOCAB),
            ..PartialFacts::default()
        }
    };
    let params_at = |e: u64| -> Result<u64, FactsError> {
        let f = known.or(&shape(e)).complete()?;
        Ok(n_params(&f))
    };
    let fixed_width = known.embedding_length;
    let e = match fixed_width {
        Some(e) => e,
        None => {
            // Parameters grow with the width: bisect on multiples of 256.
            let (mut lo, mut hi) = (1u64, 128u64); // in units of 256
            if params_at(hi * 256)? < target {
                return Err(FactsError::Inconsistent(format!(
                    "{target} parameters is beyond the generic shape"
                )));
            }
            while hi - lo > 1 {
                let mid = u64::midpoint(lo, hi);
                if params_at(mid * 256)? < target {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            let below = params_at(lo * 256)?;
            let above = params_at(hi * 256)?;
            if target.abs_diff(below) <= above.abs_diff(target) {
                lo * 256
            } else {
                hi * 256
            }
        }
    };
    let mut f = known.or(&shape(e)).complete()?;
    if known.feed_forward_length.is_none() {
        // Parameters are linear in the FFN width: move it (in steps of 256)
        // to land on the count the width alone could only bracket.
        let at = |ff: u64| {
            let mut g = f.clone();
            g.feed_forward_length = ff;
            n_params(&g)
        };
        let (ff0, step) = (f.feed_forward_length, 256u64);
        let per_step = at(ff0 + step).saturating_sub(at(ff0)).max(1);
        let delta = (target as f64 - at(ff0) as f64) / per_step as f64;
        let ff = ff0 as f64 + delta.round() * step as f64;
        f.feed_forward_length = (ff.max(step as f64) as u64)
            .div_ceil(step)
            .saturating_mul(step);
        // A huge target can move the FFN past what any model holds.
        f = f.partial().complete()?;
    }
    Ok(f)
}

/// The tensor layout family of an architecture.
#[derive(Debug, Clone, Copy, Default)]
struct Layout {
    /// Q, K, V biases (qwen2).
    qkv_bias: bool,
    /// Per-head Q/K norms (qwen3, gemma3).
    qk_norm: bool,
    /// Post-attention and post-FFN norms (gemma2/3).
    post_norms: bool,
    /// Output is always the token embedding (gemma).
    always_tied: bool,
    /// Fused QKV and gate+up projections (phi3).
    fused: bool,
    /// Latent attention (deepseek2).
    mla: bool,
    /// gpt-oss: biases everywhere, attention sinks, post-attention norm.
    gpt_oss: bool,
}

fn layout(arch: &str) -> Layout {
    let d = Layout::default();
    match arch {
        "qwen2" | "qwen2moe" => Layout {
            qkv_bias: true,
            ..d
        },
        "qwen3" | "qwen3moe" => Layout { qk_norm: true, ..d },
        "gemma2" => Layout {
            post_norms: true,
            always_tied: true,
            ..d
        },
        "gemma3" => Layout {
            post_norms: true,
            qk_norm: true,
            always_tied: true,
            ..d
        },
        // Laid out by the zoo ([`zoo_parts`]); tied, as gemma2/3.
        "gemma3n" | "gemma4" => Layout {
            always_tied: true,
            ..d
        },
        "phi3" => Layout { fused: true, ..d },
        "deepseek2" => Layout { mla: true, ..d },
        "gpt-oss" => Layout { gpt_oss: true, ..d },
        _ => d,
    }
}

/// The metadata and tensors of `f` laid out by the zoo's builder of its
/// architecture (see [`super::zoo`]), for the architectures whose layout only
/// the zoo knows: one layout per architecture, checked against llama.cpp
/// there.
fn zoo_parts(f: &ArchFacts) -> Option<(Vec<(String, Value)>, Vec<(String, Vec<u64>)>)> {
    use super::zoo::{dense, gemma3n, gemma4, hybrid, latent, lfm2, moe};
    let draft = match f.architecture.as_str() {
        "glm4" => dense::glm4(&dense::Glm4 {
            n_layer: f.block_count,
            n_embd: f.embedding_length,
            n_ff: f.feed_forward_length,
            n_head: f.head_count,
            n_head_kv: f.head_count_kv,
            head_dim: f.key_length,
            n_vocab: f.vocab_size,
            n_ctx_train: f.context_length,
            rope_dim: u32::try_from(f.rope_dimension_count)
                .ok()
                .filter(|&n| n > 0),
            tied: f.tied_embeddings,
        }),
        "gemma3n" => gemma3n::gemma3n(&gemma3n::Gemma3n {
            n_layer: f.block_count,
            n_embd: f.embedding_length,
            n_ff: f.feed_forward_length,
            n_head: f.head_count,
            n_head_kv: f.head_count_kv,
            head_dim: f.key_length,
            n_vocab: f.vocab_size,
            n_ctx_train: f.context_length,
            sliding_window: f.sliding_window?,
            swa_period: f.sliding_window_pattern?,
            per_layer: f.embedding_length_per_layer_input?,
            altup: f.altup_num_inputs?,
            laurel: f.laurel_rank?,
            shared_kv_layers: f.shared_kv_layers?,
            sparse_layers: None,
        }),
        "glm4moe" => moe::glm4moe(&moe::Glm4Moe {
            n_layer: f.block_count,
            n_nextn: f.nextn_predict_layers,
            n_embd: f.embedding_length,
            n_ff: f.feed_forward_length,
            n_head: f.head_count,
            n_head_kv: f.head_count_kv,
            head_dim: f.key_length,
            rope_dim: u32::try_from(f.rope_dimension_count).ok()?,
            n_expert: u64::from(f.expert_count),
            n_expert_used: f.expert_used_count,
            n_expert_shared: u64::from(f.expert_shared_count),
            n_ff_exp: f.expert_feed_forward_length,
            n_dense_lead: f.leading_dense_block_count,
            n_vocab: f.vocab_size,
            n_ctx_train: f.context_length,
            tied: f.tied_embeddings,
        }),
        "llama4" => moe::llama4(&moe::Llama4 {
            n_layer: f.block_count,
            n_embd: f.embedding_length,
            n_ff: f.feed_forward_length,
            n_head: f.head_count,
            n_head_kv: f.head_count_kv,
            head_dim: f.key_length,
            n_expert: u64::from(f.expert_count),
            n_expert_used: f.expert_used_count,
            n_ff_exp: f.expert_feed_forward_length,
            moe_step: f.interleave_moe_layer_step?,
            n_vocab: f.vocab_size,
            n_ctx_train: f.context_length,
            tied: f.tied_embeddings,
        }),
        // The converter's MLA layout with a compressed query (DeepSeek V3's
        // family: sigmoid gating with a selection bias); DeepSeek-V2-Lite's
        // 2024 files (no q_lora) keep the layout of [`raw_tensors`].
        "deepseek2" if f.q_lora_rank > 0 => latent::deepseek2(&latent::Deepseek2 {
            n_layer: f.block_count,
            n_embd: f.embedding_length,
            n_ff: f.feed_forward_length,
            n_head: f.head_count,
            q_lora: u64::from(f.q_lora_rank),
            kv_lora: u64::from(f.kv_lora_rank),
            nope: f.key_length.saturating_sub(f.rope_dimension_count),
            rope: f.rope_dimension_count,
            v: f.value_length,
            n_expert: u64::from(f.expert_count),
            n_expert_used: f.expert_used_count,
            n_expert_shared: u64::from(f.expert_shared_count),
            n_ff_exp: f.expert_feed_forward_length,
            n_dense_lead: f.leading_dense_block_count,
            n_vocab: f.vocab_size,
            n_ctx_train: f.context_length,
            split: true,
            sigmoid_gating: Some(1.0),
            yarn: false,
        }),
        "qwen3next" | "qwen35" | "qwen35moe" => hybrid::qwen35(&hybrid::Qwen35 {
            arch: match f.architecture.as_str() {
                "qwen3next" => "qwen3next",
                "qwen35" => "qwen35",
                _ => "qwen35moe",
            },
            n_layer: f.block_count - f.nextn_predict_layers,
            n_embd: f.embedding_length,
            n_ff: f.feed_forward_length,
            n_head: f.head_count,
            n_head_kv: f.head_count_kv,
            head_dim: f.key_length,
            n_vocab: f.vocab_size,
            n_ctx_train: f.context_length,
            k_heads: f.ssm_group_count?,
            v_heads: f.ssm_time_step_rank?,
            ssm_head: f.ssm_state_size?,
            conv: f.ssm_conv_kernel?,
            interval: f.full_attention_interval?,
            rope_dims: u32::try_from(f.rope_dimension_count).ok()?,
            // M-RoPE's split of the rotated dimensions (time, height,
            // width): the `mrope_section` [11, 11, 10] of every Qwen3.5 and
            // Qwen3.6 config; it sizes nothing, but qwen35 needs the key.
            rope_sections: (f.architecture != "qwen3next").then_some([11, 11, 10, 0]),
            tied: f.tied_embeddings,
            nextn: f.nextn_predict_layers,
            moe: (f.expert_count > 0).then_some((
                u64::from(f.expert_count),
                f.expert_used_count,
                f.expert_feed_forward_length,
                f.expert_shared_feed_forward_length.unwrap_or(0),
            )),
        }),
        "lfm2" => lfm2::lfm2(&lfm2::Lfm2 {
            n_layer: f.block_count,
            n_embd: f.embedding_length,
            n_ff: f.feed_forward_length,
            n_head: f.head_count,
            n_head_kv: f.head_count_kv,
            n_vocab: f.vocab_size,
            n_ctx_train: f.context_length,
            l_cache: f.shortconv_l_cache?,
            attention_layers: f.attention_layers.clone()?,
            tied: f.tied_embeddings,
        }),
        "granitehybrid" => hybrid::granite4_h(&hybrid::Granite4H {
            n_layer: f.block_count,
            n_embd: f.embedding_length,
            n_head: f.head_count,
            n_head_kv: f.head_count_kv,
            head_dim: f.key_length,
            n_vocab: f.vocab_size,
            n_ctx_train: f.context_length,
            attention_layers: f.attention_layers.clone()?,
            d_conv: f.ssm_conv_kernel?,
            d_inner: f.ssm_inner_size?,
            d_state: f.ssm_state_size?,
            n_ssm_head: f.ssm_time_step_rank?,
            n_group: f.ssm_group_count?,
            n_expert: u64::from(f.expert_count),
            n_expert_used: f.expert_used_count,
            n_ff_exp: if f.expert_count > 0 {
                f.expert_feed_forward_length
            } else {
                f.feed_forward_length
            },
            n_ff_shexp: f.expert_shared_feed_forward_length.unwrap_or(0),
            tied: f.tied_embeddings,
        }),
        "gemma4" => gemma4::gemma4(&gemma4::Gemma4 {
            n_layer: f.block_count,
            n_embd: f.embedding_length,
            n_ff: f.feed_forward_length,
            n_head: f.head_count,
            n_head_kv: f.head_count_kv,
            head_dim_swa: f.key_length_swa?,
            head_dim: f.key_length,
            n_vocab: f.vocab_size,
            n_ctx_train: f.context_length,
            sliding_window: f.sliding_window?,
            swa_period: f.sliding_window_pattern?,
            per_layer: f.embedding_length_per_layer_input?,
            shared_kv_layers: f.shared_kv_layers?,
            double_wide_mlp: f.double_wide_mlp,
            n_head_kv_full: f.head_count_kv_full.unwrap_or(f.head_count_kv),
            k_eq_v: f.attention_k_eq_v,
            n_expert: f.expert_count,
            n_expert_used: f.expert_used_count,
            n_ff_exp: f.expert_feed_forward_length,
        }),
        // RoPE base and YaRN size nothing and are not facts: the builder's
        // defaults stand in for them.
        "mistral3" => dense::mistral3(&dense::Mistral3 {
            n_layer: f.block_count,
            n_embd: f.embedding_length,
            n_ff: f.feed_forward_length,
            n_head: f.head_count,
            n_head_kv: f.head_count_kv,
            head_dim: f.key_length,
            n_vocab: f.vocab_size,
            n_ctx_train: f.context_length,
            rope_base: 10_000.0,
            temperature_scale: f.attention_temperature_scale.map(|s| s.0 as f32),
            tied: f.tied_embeddings,
        }),
        // olmo2 (OLMo 2, OLMo 3 with its window): the output matrix is
        // always its own; the head size is the hidden size over the heads.
        "olmo2" => dense::olmo2(&dense::Olmo2 {
            n_layer: f.block_count,
            n_embd: f.embedding_length,
            n_ff: f.feed_forward_length,
            n_head: f.head_count,
            n_head_kv: f.head_count_kv,
            n_vocab: f.vocab_size,
            n_ctx_train: f.context_length,
            rope_base: 10_000.0,
            sliding_window: f.sliding_window,
        }),
        "smollm3" => dense::smollm3(&dense::Smollm3 {
            n_layer: f.block_count,
            n_embd: f.embedding_length,
            n_ff: f.feed_forward_length,
            n_head: f.head_count,
            n_head_kv: f.head_count_kv,
            head_dim: f.key_length,
            n_vocab: f.vocab_size,
            n_ctx_train: f.context_length,
            rope_base: 10_000.0,
            tied: f.tied_embeddings,
        }),
        _ => return None,
    };
    Some(draft.into_parts())
}

/// Every tensor's name and shape, in file order.
fn raw_tensors(f: &ArchFacts) -> Vec<(String, Vec<u64>)> {
    if let Some((_, tensors)) = zoo_parts(f) {
        return tensors;
    }
    let l = layout(&f.architecture);
    let e = f.embedding_length;
    // Saturating: facts are validated ([`PartialFacts::complete`]) by laying
    // them out, so the layout must survive any of them.
    let (q, kv) = (
        f.head_count.saturating_mul(f.key_length),
        f.head_count_kv.saturating_mul(f.key_length),
    );
    let v_out = f.head_count.saturating_mul(f.value_length);
    let kv_v = f.head_count_kv.saturating_mul(f.value_length);
    let mut raw: Vec<(String, Vec<u64>)> =
        vec![("token_embd.weight".into(), vec![e, f.vocab_size])];
    if f.rope_freqs {
        raw.push(("rope_freqs.weight".into(), vec![f.key_length / 2]));
    }
    for il in 0..f.block_count {
        let mut t = |suffix: &str, dims: Vec<u64>| raw.push((format!("blk.{il}.{suffix}"), dims));
        t("attn_norm.weight", vec![e]);
        if l.mla {
            let rope = f.rope_dimension_count;
            let lora = u64::from(f.kv_lora_rank);
            t("attn_q.weight", vec![e, q]);
            t("attn_kv_a_mqa.weight", vec![e, lora.saturating_add(rope)]);
            t("attn_kv_a_norm.weight", vec![lora]);
            let per_head = f
                .key_length
                .saturating_sub(rope)
                .saturating_add(f.value_length);
            t(
                "attn_kv_b.weight",
                vec![lora, f.head_count.saturating_mul(per_head)],
            );
        } else if l.fused {
            t(
                "attn_qkv.weight",
                vec![e, q.saturating_add(kv).saturating_add(kv_v)],
            );
        } else {
            t("attn_q.weight", vec![e, q]);
            t("attn_k.weight", vec![e, kv]);
            t("attn_v.weight", vec![e, kv_v]);
            if l.qkv_bias || l.gpt_oss {
                t("attn_q.bias", vec![q]);
                t("attn_k.bias", vec![kv]);
                t("attn_v.bias", vec![kv_v]);
            }
        }
        t("attn_output.weight", vec![v_out, e]);
        if l.gpt_oss {
            t("attn_output.bias", vec![e]);
            t("attn_sinks.weight", vec![f.head_count]);
        }
        if l.qk_norm {
            t("attn_q_norm.weight", vec![f.key_length]);
            t("attn_k_norm.weight", vec![f.key_length]);
        }
        if l.post_norms || l.gpt_oss {
            t("post_attention_norm.weight", vec![e]);
        }
        if !l.gpt_oss {
            t("ffn_norm.weight", vec![e]);
        }
        let moe = f.expert_count > 0 && il >= f.leading_dense_block_count;
        if moe {
            let (x, ff) = (u64::from(f.expert_count), f.expert_feed_forward_length);
            t("ffn_gate_inp.weight", vec![e, x]);
            t("ffn_gate_exps.weight", vec![e, ff, x]);
            t("ffn_down_exps.weight", vec![ff, e, x]);
            t("ffn_up_exps.weight", vec![e, ff, x]);
            if l.gpt_oss {
                t("ffn_gate_inp.bias", vec![x]);
                t("ffn_gate_exps.bias", vec![ff, x]);
                t("ffn_down_exps.bias", vec![e, x]);
                t("ffn_up_exps.bias", vec![ff, x]);
            }
            if f.expert_shared_count > 0 {
                let sh = ff.saturating_mul(u64::from(f.expert_shared_count));
                t("ffn_gate_shexp.weight", vec![e, sh]);
                t("ffn_down_shexp.weight", vec![sh, e]);
                t("ffn_up_shexp.weight", vec![e, sh]);
            }
        } else if l.fused {
            t(
                "ffn_up.weight",
                vec![e, f.feed_forward_length.saturating_mul(2)],
            );
            t("ffn_down.weight", vec![f.feed_forward_length, e]);
        } else {
            t("ffn_gate.weight", vec![e, f.feed_forward_length]);
            t("ffn_up.weight", vec![e, f.feed_forward_length]);
            t("ffn_down.weight", vec![f.feed_forward_length, e]);
        }
        if l.post_norms {
            t("post_ffw_norm.weight", vec![e]);
        }
    }
    raw.push(("output_norm.weight".into(), vec![e]));
    if !f.tied_embeddings {
        raw.push(("output.weight".into(), vec![e, f.vocab_size]));
    }
    raw
}

/// A model's tensors (names and shapes) laid out once, to be typed,
/// sized and profiled under any of its quantizations cheaply: a catalog
/// entry has up to twenty files of one architecture.
#[derive(Debug, Clone)]
pub struct Skeleton {
    facts: ArchFacts,
    raw: Vec<(String, Vec<u64>)>,
    mix: MixPlan,
    n_params: u64,
}

impl Skeleton {
    /// Lay out the tensors of `f`.
    #[must_use]
    pub fn new(f: &ArchFacts) -> Skeleton {
        let raw = raw_tensors(f);
        let model = MixModel {
            n_layer: f.block_count,
            n_head: f.head_count,
            n_head_kv: f.head_count_kv,
            n_expert: f.expert_count,
            is_70b: f.architecture == "llama"
                && f.block_count == 80
                && f.head_count != f.head_count_kv,
        };
        let input: Vec<MixTensor<'_>> = raw
            .iter()
            .map(|(name, dims)| MixTensor { name, dims })
            .collect();
        let mix = MixPlan::new(&model, &input);
        let n_params = saturating_n_params(&raw);
        Skeleton {
            facts: f.clone(),
            raw,
            mix,
            n_params,
        }
    }

    /// The facts it was laid out from.
    #[must_use]
    pub fn facts(&self) -> &ArchFacts {
        &self.facts
    }

    /// Parameters (sum of tensor elements).
    #[must_use]
    pub fn n_params(&self) -> u64 {
        self.n_params
    }

    /// Each tensor's type in `ftype`, in file order.
    fn types(&self, ftype: FileType) -> Vec<GgmlType> {
        let mut types = self.mix.types(ftype);
        if let Some(fixed) = self.facts.expert_type {
            for ((name, _), ty) in self.raw.iter().zip(&mut types) {
                if name.contains("_exps.weight") {
                    *ty = fixed;
                }
            }
        }
        types
    }

    /// Bytes of all tensor data in `ftype`, and of the repeating layers only.
    #[must_use]
    pub fn weight_bytes(&self, ftype: FileType) -> (u64, u64) {
        let (mut all, mut layers) = (0u64, 0u64);
        for ((name, dims), ty) in self.raw.iter().zip(self.types(ftype)) {
            let b = ty.tensor_bytes(dims).unwrap_or(0);
            all += b;
            if name.starts_with("blk.") {
                layers += b;
            }
        }
        (all, layers)
    }

    /// Every tensor in `ftype`, with llama-quantize's types.
    #[must_use]
    pub fn tensors(&self, ftype: FileType) -> Vec<SynthTensor> {
        self.raw
            .iter()
            .zip(self.types(ftype))
            .map(|((name, dims), ty)| SynthTensor {
                name: name.clone(),
                dims: dims.clone(),
                ty,
            })
            .collect()
    }

    /// The planner's profile in `ftype` (see [`profile`]).
    ///
    /// # Errors
    /// Facts llama.cpp would refuse.
    pub fn profile(&self, ftype: FileType) -> Result<ModelProfile, FactsError> {
        Ok(profile::profile(&header_direct(
            &self.facts,
            ftype,
            self.tensors(ftype),
        )?)?)
    }
}

/// Every tensor of the model in `ftype`, with llama-quantize's types.
#[must_use]
pub fn tensors(f: &ArchFacts, ftype: FileType) -> Vec<SynthTensor> {
    Skeleton::new(f).tensors(ftype)
}

/// Parameters of the model (sum of tensor elements).
#[must_use]
pub fn n_params(f: &ArchFacts) -> u64 {
    saturating_n_params(&raw_tensors(f))
}

/// Elements of all `raw` tensors, `None` past u64 (or where a dimension
/// saturated while laying them out).
fn checked_n_params(raw: &[(String, Vec<u64>)]) -> Option<u64> {
    raw.iter().try_fold(0u64, |sum, (_, dims)| {
        let n = dims.iter().try_fold(1u64, |n, &d| {
            (d < u64::MAX).then_some(())?;
            n.checked_mul(d)
        })?;
        sum.checked_add(n)
    })
}

/// Elements of all `raw` tensors, saturating (facts that passed
/// [`PartialFacts::complete`] hold at most [`MAX_PARAMS`]).
fn saturating_n_params(raw: &[(String, Vec<u64>)]) -> u64 {
    checked_n_params(raw).unwrap_or(u64::MAX)
}

/// Bytes of all tensor data of the model in `ftype` (what the file holds
/// besides its header).
#[must_use]
pub fn weight_bytes(f: &ArchFacts, ftype: FileType) -> u64 {
    Skeleton::new(f).weight_bytes(ftype).0
}

/// The metadata of the model's header in `ftype` (no tokenizer).
fn metadata(f: &ArchFacts, ftype: FileType) -> Result<Vec<(String, Value)>, FactsError> {
    let a = f.architecture.as_str();
    let k = |key: &str| format!("{a}.{key}");
    // `key` as a GGUF u32, or an error naming the fact `what`.
    let u32_kv = |key: &str, what: &str, v: u64| -> Result<(String, Value), FactsError> {
        let n = u32::try_from(v)
            .map_err(|_| FactsError::Inconsistent(format!("{what} {v} does not fit a GGUF u32")))?;
        Ok((k(key), n.into()))
    };
    // The fact `f.$fact` under `key`, named as its field.
    macro_rules! u32_fact {
        ($key:literal, $fact:ident) => {
            u32_kv($key, stringify!($fact), f.$fact)?
        };
    }
    let mut m: Vec<(String, Value)> = vec![
        ("general.architecture".into(), a.into()),
        (
            "general.name".into(),
            format!("{a} from facts {}", ftype.name()).into(),
        ),
        ("general.file_type".into(), ftype.id().into()),
        ("general.quantization_version".into(), 2u32.into()),
        (k("block_count"), f.block_count.into()),
        u32_fact!("embedding_length", embedding_length),
        u32_fact!("feed_forward_length", feed_forward_length),
        u32_fact!("attention.head_count", head_count),
        u32_fact!("attention.head_count_kv", head_count_kv),
        u32_fact!("attention.key_length", key_length),
        u32_fact!("attention.value_length", value_length),
        u32_fact!("vocab_size", vocab_size),
    ];
    if let Some((meta, _)) = zoo_parts(f) {
        // The zoo's keys for its architecture (sizes, heads, and the keys
        // llama.cpp requires of it), after the general ones.
        m.truncate(4);
        m.extend(meta);
        return Ok(m);
    }
    if f.context_length > 0 {
        m.push(u32_fact!("context_length", context_length));
    }
    if f.expert_count > 0 {
        m.push((k("expert_count"), f.expert_count.into()));
        m.push((k("expert_used_count"), f.expert_used_count.into()));
        m.push(u32_fact!(
            "expert_feed_forward_length",
            expert_feed_forward_length
        ));
        if f.expert_shared_count > 0 {
            m.push((k("expert_shared_count"), f.expert_shared_count.into()));
        }
        if f.leading_dense_block_count > 0 {
            m.push((
                k("leading_dense_block_count"),
                f.leading_dense_block_count.into(),
            ));
        }
    }
    if let Some(w) = f.sliding_window {
        m.push((k("attention.sliding_window"), w.into()));
    }
    if f.kv_lora_rank > 0 {
        m.push((k("attention.kv_lora_rank"), f.kv_lora_rank.into()));
    }
    if f.rope_dimension_count > 0 {
        m.push(u32_fact!("rope.dimension_count", rope_dimension_count));
    }
    Ok(m)
}

/// The model's header in `ftype`, without a tokenizer, laid out and checked
/// by the GGUF writer and reader (what a file written from it would hold).
///
/// # Errors
/// Sizes that do not fit the GGUF integer types.
pub fn header(f: &ArchFacts, ftype: FileType) -> Result<Header, FactsError> {
    let mut b = HeaderBuilder::new();
    for (key, value) in metadata(f, ftype)? {
        b = b.kv(key, value);
    }
    for t in tensors(f, ftype) {
        b = b.tensor(t.name, &t.dims, t.ty);
    }
    Ok(b.build()?)
}

/// Bytes a metadata value takes in a GGUF header (the scalar and string
/// types [`metadata`] writes).
fn value_len(v: &Value) -> Option<u64> {
    Some(match v {
        Value::U8(_) | Value::I8(_) | Value::Bool(_) => 1,
        Value::U16(_) | Value::I16(_) => 2,
        Value::U32(_) | Value::I32(_) | Value::F32(_) => 4,
        Value::U64(_) | Value::I64(_) | Value::F64(_) => 8,
        Value::String(s) => 8 + s.len() as u64,
        // Element type, count, then the elements (the per-layer arrays the
        // zoo's layouts write).
        Value::Array(a) => {
            let n = |len: usize, size: u64| 4 + 8 + len as u64 * size;
            match a.items() {
                ArrayItems::Bool(v) => n(v.len(), 1),
                ArrayItems::I32(v) => n(v.len(), 4),
                ArrayItems::U32(v) => n(v.len(), 4),
                ArrayItems::F32(v) => n(v.len(), 4),
                _ => return None,
            }
        }
    })
}

/// [`header`] without writing and re-reading it: the same [`Header`]
/// (a test holds them equal), at a fraction of the cost, for ranking a
/// whole catalog.
fn header_direct(
    f: &ArchFacts,
    ftype: FileType,
    tensors: Vec<SynthTensor>,
) -> Result<Header, FactsError> {
    const ALIGN: u64 = crate::gguf::DEFAULT_ALIGNMENT;
    let metadata = metadata(f, ftype)?;
    let mut header_bytes = 4 + 4 + 8 + 8;
    for (key, value) in &metadata {
        let len = value_len(value)
            .ok_or_else(|| FactsError::Inconsistent(format!("array value for {key}")))?;
        header_bytes += 8 + key.len() as u64 + 4 + len;
    }
    let mut offset = 0u64;
    let tensors: Vec<TensorInfo> = tensors
        .into_iter()
        .map(|t| {
            header_bytes += 8 + t.name.len() as u64 + 4 + 8 * t.dims.len() as u64 + 4 + 8;
            let bytes = t.ty.tensor_bytes(&t.dims).unwrap_or(0);
            let info = TensorInfo {
                name: t.name,
                dims: t.dims,
                ty: t.ty,
                offset,
                bytes,
            };
            offset += bytes.div_ceil(ALIGN) * ALIGN;
            info
        })
        .collect();
    Ok(Header {
        version: 3,
        alignment: ALIGN,
        metadata,
        tensors,
        data_offset: header_bytes.div_ceil(ALIGN) * ALIGN,
        header_bytes,
    })
}

/// The planner's profile of the model in `ftype`: what `headroom plan`
/// would build from the real file's header.
///
/// # Errors
/// Facts llama.cpp would refuse (see [`profile::profile`]).
pub fn profile(f: &ArchFacts, ftype: FileType) -> Result<ModelProfile, FactsError> {
    Skeleton::new(f).profile(ftype)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{self, Mix, Shape};

    fn from_shape(shape: Shape) -> ArchFacts {
        let s = shape.spec();
        PartialFacts {
            architecture: Some(s.arch.into()),
            block_count: Some(s.n_layer),
            embedding_length: Some(s.n_embd),
            feed_forward_length: Some(s.n_ff),
            head_count: Some(s.n_head),
            head_count_kv: Some(s.n_head_kv),
            key_length: Some(s.head_dim),
            vocab_size: Some(s.n_vocab),
            context_length: Some(u64::from(s.n_ctx_train)),
            tied_embeddings: Some(s.tied_embeddings),
            expert_count: Some(s.n_expert),
            expert_used_count: Some(s.n_expert_used),
            expert_feed_forward_length: Some(s.n_ff_exp),
            sliding_window: s.sliding_window,
            rope_freqs: Some(s.rope_freqs),
            ..PartialFacts::default()
        }
        .complete()
        .expect("complete")
    }

    #[test]
    fn same_tensors_as_the_synthetic_shapes() {
        // The general mirror and layouts agree with the hand-checked synth
        // shapes (which the app checks against llama.cpp itself).
        for shape in Shape::ALL.into_iter().chain([Shape::Llama70B]) {
            let f = from_shape(shape);
            for mix in Mix::ALL {
                let ftype = FileType::from_name(mix.name()).expect("known");
                let mut ours: Vec<_> = tensors(&f, ftype)
                    .into_iter()
                    .map(|t| (t.name, t.dims, t.ty))
                    .collect();
                let mut theirs: Vec<_> = synth::tensors(shape, mix)
                    .into_iter()
                    .map(|t| (t.name, t.dims, t.ty))
                    .collect();
                ours.sort();
                theirs.sort();
                if shape == Shape::Llama70B && mix == Mix::Q4KM {
                    // synth::quant_type leaves out the 70B attn_v rule.
                    let diff = ours.iter().zip(&theirs).filter(|(a, b)| a != b).count();
                    assert!(diff > 0 && ours.len() == theirs.len());
                    continue;
                }
                assert_eq!(ours, theirs, "{} {}", shape.name(), mix.name());
            }
        }
    }

    #[test]
    fn profiles_parse_and_count_parameters() -> Result<(), FactsError> {
        let f = from_shape(Shape::Llama8B);
        let p = profile(&f, FileType::Q4_K_M)?;
        assert_eq!(p.n_params, 8_030_261_248);
        assert_eq!(p.quant, "Q4_K_M");
        assert_eq!(p.n_layer, 32);
        assert_eq!(n_params(&f), p.n_params);
        assert_eq!(weight_bytes(&f, FileType::Q4_K_M), p.weight_bytes);
        let moe = profile(&from_shape(Shape::Qwen3Moe30BA3B), FileType::Q8_0)?;
        assert_eq!(moe.n_params, 30_532_122_624);
        assert_eq!(moe.experts.map(|e| e.count), Some(128));
        Ok(())
    }

    #[test]
    fn the_direct_header_is_the_written_one() -> Result<(), FactsError> {
        for shape in [Shape::Llama8B, Shape::Gemma3_1B, Shape::Qwen3Moe30BA3B] {
            let f = from_shape(shape);
            for ftype in [FileType::Q4_K_M, FileType::IQ2_M, FileType::BF16] {
                let direct = header_direct(&f, ftype, tensors(&f, ftype))?;
                assert_eq!(direct, header(&f, ftype)?, "{}", shape.name());
            }
        }
        Ok(())
    }

    /// Gemma-3n-E2B's facts as `config.json` states them.
    fn gemma3n_e2b() -> PartialFacts {
        PartialFacts {
            architecture: Some("gemma3n".into()),
            block_count: Some(30),
            embedding_length: Some(2048),
            feed_forward_length: Some(8192),
            head_count: Some(8),
            head_count_kv: Some(2),
            key_length: Some(256),
            vocab_size: Some(262_400),
            context_length: Some(32_768),
            sliding_window: Some(512),
            sliding_window_pattern: Some(5),
            shared_kv_layers: Some(10),
            embedding_length_per_layer_input: Some(256),
            altup_num_inputs: Some(4),
            laurel_rank: Some(64),
            ..PartialFacts::default()
        }
    }

    /// A catalog entry of Gemma 3n gets the zoo's Gemma-3n-E2B header,
    /// tensor for tensor and byte for byte in every file type (the zoo's
    /// header is the one held to llama.cpp's accounting, in
    /// `memory/tests_zoo.rs`), and the same metadata but for the
    /// activation sparsity, which sizes nothing.
    #[test]
    fn gemma3n_facts_give_the_zoo_s_header() -> Result<(), FactsError> {
        use crate::synth::zoo::{self, Model};
        let f = gemma3n_e2b().complete()?;
        assert!(f.tied_embeddings);
        for ftype in [
            FileType::Q4_K_M,
            FileType::Q8_0,
            FileType::Q6_K,
            FileType::IQ2_M,
            FileType::BF16,
        ] {
            let ours = header(&f, ftype)?;
            let zoo = zoo::build(Model::Gemma3nE2B, ftype)?;
            assert_eq!(ours.tensors, zoo.tensors, "{}", ftype.name());
            assert_eq!(
                ours.total_tensor_bytes(),
                zoo.total_tensor_bytes(),
                "{}",
                ftype.name()
            );
            let keys = |h: &Header| -> Vec<(String, Value)> {
                h.metadata
                    .iter()
                    .filter(|(k, _)| {
                        k.starts_with("gemma3n.") && !k.ends_with("activation_sparsity_scale")
                    })
                    .cloned()
                    .collect()
            };
            assert_eq!(keys(&ours), keys(&zoo));
            assert_eq!(header_direct(&f, ftype, tensors(&f, ftype))?, ours);
            assert_eq!(
                profile(&f, ftype)?.weight_bytes,
                crate::profile::profile(&zoo)?.weight_bytes
            );
        }
        Ok(())
    }

    /// GLM-4.5-Air's facts as llama.cpp's dump of its GGUF header states
    /// them (47 blocks, the last the MTP block).
    fn glm45_air() -> PartialFacts {
        PartialFacts {
            architecture: Some("glm4moe".into()),
            block_count: Some(47),
            embedding_length: Some(4096),
            feed_forward_length: Some(10944),
            head_count: Some(96),
            head_count_kv: Some(8),
            key_length: Some(128),
            value_length: Some(128),
            vocab_size: Some(151_552),
            context_length: Some(131_072),
            expert_count: Some(128),
            expert_used_count: Some(8),
            expert_feed_forward_length: Some(1408),
            expert_shared_count: Some(1),
            leading_dense_block_count: Some(1),
            rope_dimension_count: Some(64),
            nextn_predict_layers: Some(1),
            ..PartialFacts::default()
        }
    }

    /// Llama-4-Scout-17B-16E's facts under the converter's keys.
    fn llama4_scout() -> PartialFacts {
        PartialFacts {
            architecture: Some("llama4".into()),
            block_count: Some(48),
            embedding_length: Some(5120),
            feed_forward_length: Some(16384),
            head_count: Some(40),
            head_count_kv: Some(8),
            key_length: Some(128),
            vocab_size: Some(202_048),
            context_length: Some(10_485_760),
            expert_count: Some(16),
            expert_used_count: Some(1),
            expert_feed_forward_length: Some(8192),
            expert_shared_count: Some(1),
            interleave_moe_layer_step: Some(1),
            ..PartialFacts::default()
        }
    }

    /// A catalog entry of GLM-4.5 or Llama 4 gets the zoo's header of its
    /// reference model (held to llama.cpp's accounting in
    /// `memory/tests_zoo.rs`), tensor for tensor, with the same keys.
    #[test]
    fn glm4moe_and_llama4_facts_give_the_zoo_s_headers() -> Result<(), FactsError> {
        use crate::synth::zoo::{self, Model};
        for (facts, model) in [
            (glm45_air(), Model::Glm45Air),
            (llama4_scout(), Model::Llama4Scout),
        ] {
            let f = facts.complete()?;
            for ftype in [FileType::Q4_K_M, FileType::Q8_0, FileType::IQ2_M] {
                let ours = header(&f, ftype)?;
                let zoo = zoo::build(model, ftype)?;
                assert_eq!(ours.tensors, zoo.tensors, "{}", ftype.name());
                let keys = |h: &Header| -> Vec<(String, Value)> {
                    h.metadata
                        .iter()
                        .filter(|(k, _)| k.starts_with(&format!("{}.", f.architecture)))
                        .cloned()
                        .collect()
                };
                assert_eq!(keys(&ours), keys(&zoo));
                assert_eq!(header_direct(&f, ftype, tensors(&f, ftype))?, ours);
            }
        }
        let no_step = PartialFacts {
            interleave_moe_layer_step: None,
            ..llama4_scout()
        };
        assert!(
            matches!(no_step.complete(), Err(FactsError::Missing(m)) if m == vec!["interleave_moe_layer_step"])
        );
        let no_rope = PartialFacts {
            rope_dimension_count: None,
            ..glm45_air()
        };
        assert!(
            matches!(no_rope.complete(), Err(FactsError::Missing(m)) if m == vec!["rope_dimension_count"])
        );
        Ok(())
    }

    /// GLM-4.7-Flash's facts under the catalog's names (per-head sizes as
    /// `config.json` gives them).
    fn glm47_flash() -> PartialFacts {
        PartialFacts {
            architecture: Some("deepseek2".into()),
            block_count: Some(47),
            embedding_length: Some(2048),
            feed_forward_length: Some(10240),
            head_count: Some(20),
            head_count_kv: Some(20),
            key_length: Some(256),
            value_length: Some(256),
            vocab_size: Some(154_880),
            context_length: Some(202_752),
            expert_count: Some(64),
            expert_used_count: Some(4),
            expert_feed_forward_length: Some(1536),
            expert_shared_count: Some(1),
            leading_dense_block_count: Some(1),
            kv_lora_rank: Some(512),
            q_lora_rank: Some(768),
            rope_dimension_count: Some(64),
            ..PartialFacts::default()
        }
    }

    /// A `deepseek2` entry with a compressed query gets the zoo's
    /// GLM-4.7-Flash header (held to llama.cpp's accounting), tensor for
    /// tensor, with the same keys but the routed scaling factor.
    #[test]
    fn q_lora_facts_give_the_zoo_s_latent_header() -> Result<(), FactsError> {
        use crate::synth::zoo::{self, Model};
        let f = glm47_flash().complete()?;
        for ftype in [FileType::Q4_K_M, FileType::Q8_0] {
            let ours = header(&f, ftype)?;
            let zoo = zoo::build(Model::Glm47Flash, ftype)?;
            assert_eq!(ours.tensors, zoo.tensors, "{}", ftype.name());
            let keys = |h: &Header| -> Vec<(String, Value)> {
                h.metadata
                    .iter()
                    .filter(|(k, _)| {
                        k.starts_with("deepseek2.") && !k.ends_with("expert_weights_scale")
                    })
                    .cloned()
                    .collect()
            };
            assert_eq!(keys(&ours), keys(&zoo));
            assert_eq!(ours.tensors.len(), 844, "the unsloth file's count");
        }
        let no_rope = PartialFacts {
            rope_dimension_count: None,
            ..glm47_flash()
        };
        assert!(
            matches!(no_rope.complete(), Err(FactsError::Missing(m)) if m == vec!["rope_dimension_count"])
        );
        Ok(())
    }

    #[test]
    fn gemma3n_facts_are_those_llama_cpp_loads() {
        let missing = PartialFacts {
            laurel_rank: None,
            ..gemma3n_e2b()
        };
        assert!(
            matches!(missing.complete(), Err(FactsError::Missing(m)) if m == vec!["laurel_rank"])
        );
        for (f, why) in [
            (
                PartialFacts {
                    shared_kv_layers: Some(15),
                    ..gemma3n_e2b()
                },
                "gemma3n layers before the shared ones 15: llama.cpp loads 20",
            ),
            (
                PartialFacts {
                    altup_num_inputs: Some(2),
                    ..gemma3n_e2b()
                },
                "gemma3n altup_num_inputs 2: llama.cpp loads 4",
            ),
        ] {
            match f.complete() {
                Err(FactsError::Inconsistent(w)) => assert_eq!(w, why),
                other => panic!("{other:?}"),
            }
        }
        // E4B: 35 layers, the last 15 sharing.
        let e4b = PartialFacts {
            block_count: Some(35),
            feed_forward_length: Some(16_384),
            shared_kv_layers: Some(15),
            ..gemma3n_e2b()
        };
        assert!(e4b.complete().is_ok());
    }

    /// mistral3, olmo2 and smollm3 entries are laid out by the zoo's
    /// builders: the temperature scale is in the header (llama.cpp adds a
    /// node for it), OLMo 2 has post-norms, full-width Q/K norms and no
    /// pre-norms, SmolLM3 is Llama's tensors under its own name.
    #[test]
    fn mistral3_olmo2_and_smollm3_facts_use_their_zoo_layouts() -> Result<(), FactsError> {
        let base = PartialFacts {
            block_count: Some(2),
            embedding_length: Some(512),
            feed_forward_length: Some(1024),
            head_count: Some(4),
            head_count_kv: Some(2),
            vocab_size: Some(1000),
            context_length: Some(4096),
            ..PartialFacts::default()
        };
        let m = PartialFacts {
            architecture: Some("mistral3".into()),
            attention_temperature_scale: Some(0.1),
            ..base.clone()
        }
        .complete()?;
        let h = header(&m, FileType::Q4_K_M)?;
        assert!(h.get("mistral3.attention.temperature_scale").is_some());
        assert!(h.tensors.iter().any(|t| t.name == "blk.1.attn_norm.weight"));
        let s = PartialFacts {
            architecture: Some("smollm3".into()),
            tied_embeddings: Some(true),
            ..base.clone()
        }
        .complete()?;
        let h = header(&s, FileType::Q4_K_M)?;
        assert!(h.get("smollm3.attention.key_length").is_some());
        assert!(!h.tensors.iter().any(|t| t.name == "output.weight"));
        let o = PartialFacts {
            architecture: Some("olmo2".into()),
            sliding_window: Some(4096),
            ..base
        }
        .complete()?;
        let h = header(&o, FileType::Q4_K_M)?;
        let names: Vec<&str> = h.tensors.iter().map(|t| t.name.as_str()).collect();
        assert!(!names.contains(&"blk.0.attn_norm.weight"));
        assert!(!names.contains(&"blk.0.ffn_norm.weight"));
        for n in [
            "blk.0.post_attention_norm.weight",
            "blk.0.post_ffw_norm.weight",
            "output.weight",
        ] {
            assert!(names.contains(&n), "{n}");
        }
        let q_norm = h
            .tensors
            .iter()
            .find(|t| t.name == "blk.0.attn_q_norm.weight");
        assert_eq!(q_norm.map(|t| t.dims.clone()), Some(vec![512]));
        assert!(h.get("olmo2.attention.sliding_window").is_some());
        Ok(())
    }

    #[test]
    fn missing_facts_are_named() {
        let partial = PartialFacts {
            architecture: Some("llama".into()),
            block_count: Some(32),
            ..PartialFacts::default()
        };
        let Err(FactsError::Missing(m)) = partial.complete() else {
            panic!("incomplete facts must fail");
        };
        assert!(m.contains(&"embedding_length") && m.contains(&"vocab_size"));
        assert!(!m.contains(&"block_count"));
    }

    #[test]
    fn estimates_keep_known_facts_and_reach_the_parameter_count() -> Result<(), FactsError> {
        let known = PartialFacts {
            block_count: Some(80),
            head_count: Some(64),
            head_count_kv: Some(8),
            ..PartialFacts::default()
        };
        let f = estimate(&known, 72_700_000_000)?;
        assert_eq!((f.block_count, f.head_count, f.head_count_kv), (80, 64, 8));
        let n = n_params(&f) as f64;
        assert!((n / 72.7e9 - 1.0).abs() < 0.005, "{n}");
        let small = estimate(&PartialFacts::default(), 8_000_000_000)?;
        assert!((n_params(&small) as f64 / 8e9 - 1.0).abs() < 0.005);
        let large = estimate(&PartialFacts::default(), 122_600_000_000)?;
        assert!((n_params(&large) as f64 / 122.6e9 - 1.0).abs() < 0.005);
        let moe = PartialFacts {
            expert_count: Some(8),
            ..PartialFacts::default()
        };
        assert!(estimate(&moe, 47_000_000_000).is_err(), "no generic MoE");
        Ok(())
    }

    #[test]
    fn or_fills_gaps_and_conflicts_are_listed() {
        let a = PartialFacts {
            block_count: Some(28),
            head_count: Some(28),
            ..PartialFacts::default()
        };
        let b = PartialFacts {
            block_count: Some(28),
            head_count: Some(32),
            vocab_size: Some(152_064),
            ..PartialFacts::default()
        };
        let merged = a.or(&b);
        let full = estimate(&merged, 7_000_000_000).expect("estimate");
        assert_eq!(full.partial().complete().expect("round trip"), full);
        assert_eq!(merged.head_count, Some(28));
        assert_eq!(merged.vocab_size, Some(152_064));
        assert_eq!(a.conflicts(&b), vec!["head_count: 28 ≠ 32".to_string()]);
    }

    #[test]
    fn facts_past_any_model_are_inconsistent_not_overflows() {
        let llama = PartialFacts {
            architecture: Some("llama".into()),
            block_count: Some(2),
            embedding_length: Some(256),
            feed_forward_length: Some(512),
            head_count: Some(4),
            head_count_kv: Some(2),
            vocab_size: Some(64),
            ..PartialFacts::default()
        };
        assert!(llama.complete().is_ok());
        let inconsistent = |f: &PartialFacts| match f.complete() {
            Err(FactsError::Inconsistent(why)) => why,
            other => panic!("expected inconsistent facts, got {other:?}"),
        };
        // Each of these overflowed u64 while the tensors were laid out.
        for f in [
            PartialFacts {
                feed_forward_length: Some(20_455_555_555_555_558),
                ..llama.clone()
            },
            PartialFacts {
                key_length: Some(u64::MAX),
                ..llama.clone()
            },
            PartialFacts {
                architecture: Some("phi3".into()),
                head_count: Some(1 << 40),
                head_count_kv: Some(1 << 40),
                key_length: Some(1 << 30),
                ..llama.clone()
            },
        ] {
            assert_eq!(
                inconsistent(&f),
                "the tensors would hold more than 1125899906842624 parameters"
            );
        }
        let layers = PartialFacts {
            block_count: Some(u32::MAX),
            ..PartialFacts::default()
        };
        assert_eq!(
            inconsistent(&layers),
            "4294967295 layers, more than llama.cpp's 512"
        );
    }

    #[test]
    fn estimates_of_absurd_counts_fail_without_overflow() {
        let wide = PartialFacts {
            embedding_length: Some(u64::MAX / 2),
            ..PartialFacts::default()
        };
        assert!(estimate(&wide, 7_000_000_000).is_err());
        assert!(estimate(&PartialFacts::default(), u64::MAX).is_err());
        // A known width with the layers left open: 1024 at the generic
        // width per layer, but llama.cpp takes at most 512.
        let f = estimate(
            &PartialFacts {
                embedding_length: Some(1 << 17),
                ..PartialFacts::default()
            },
            1 << 40,
        )
        .expect("a 1T model");
        assert_eq!(f.block_count, 512);
    }

    /// The zoo's Qwen delta-net hybrids as their configs state them
    /// (Qwen3.5-9B, Qwen3.5-35B-A3B, Qwen3-Next-80B-A3B), MTP block included.
    fn qwen_delta_nets() -> Vec<(crate::synth::zoo::Model, PartialFacts)> {
        use crate::synth::zoo::Model;
        let common = PartialFacts {
            key_length: Some(256),
            context_length: Some(262_144),
            tied_embeddings: Some(false),
            full_attention_interval: Some(4),
            ssm_conv_kernel: Some(4),
            ssm_state_size: Some(128),
            ssm_group_count: Some(16),
            ssm_time_step_rank: Some(32),
            rope_dimension_count: Some(64),
            nextn_predict_layers: Some(1),
            ..PartialFacts::default()
        };
        vec![
            (
                Model::Qwen35_9B,
                PartialFacts {
                    architecture: Some("qwen35".into()),
                    block_count: Some(33),
                    embedding_length: Some(4096),
                    feed_forward_length: Some(12_288),
                    head_count: Some(16),
                    head_count_kv: Some(4),
                    vocab_size: Some(248_320),
                    ..common.clone()
                },
            ),
            (
                Model::Qwen35Moe35BA3B,
                PartialFacts {
                    architecture: Some("qwen35moe".into()),
                    block_count: Some(41),
                    embedding_length: Some(2048),
                    feed_forward_length: Some(0),
                    head_count: Some(16),
                    head_count_kv: Some(2),
                    vocab_size: Some(248_320),
                    expert_count: Some(256),
                    expert_used_count: Some(8),
                    expert_feed_forward_length: Some(512),
                    expert_shared_feed_forward_length: Some(512),
                    ..common.clone()
                },
            ),
            (
                Model::Qwen3Next80B,
                PartialFacts {
                    architecture: Some("qwen3next".into()),
                    block_count: Some(49),
                    embedding_length: Some(2048),
                    feed_forward_length: Some(5120),
                    head_count: Some(16),
                    head_count_kv: Some(2),
                    vocab_size: Some(151_936),
                    expert_count: Some(512),
                    expert_used_count: Some(10),
                    expert_feed_forward_length: Some(512),
                    expert_shared_feed_forward_length: Some(512),
                    ..common
                },
            ),
        ]
    }

    /// A catalog entry of a Qwen delta-net hybrid gets the zoo's header of
    /// its reference model, tensor for tensor and key for key (the zoo's
    /// header is the one held to llama.cpp's accounting).
    #[test]
    fn qwen_delta_net_facts_give_the_zoo_s_header() -> Result<(), FactsError> {
        use crate::synth::zoo;
        for (model, facts) in qwen_delta_nets() {
            let f = facts.complete()?;
            for ftype in [FileType::Q4_K_M, FileType::Q8_0, FileType::BF16] {
                let ours = header(&f, ftype)?;
                let zoo = zoo::build(model, ftype)?;
                assert_eq!(ours.tensors, zoo.tensors, "{}", model.name());
                let prefix = format!("{}.", f.architecture);
                let keys = |h: &Header| -> Vec<(String, Value)> {
                    h.metadata
                        .iter()
                        .filter(|(k, _)| k.starts_with(&prefix))
                        .cloned()
                        .collect()
                };
                assert_eq!(keys(&ours), keys(&zoo), "{}", model.name());
                assert_eq!(header_direct(&f, ftype, tensors(&f, ftype))?, ours);
                assert_eq!(
                    profile(&f, ftype)?.weight_bytes,
                    crate::profile::profile(&zoo)?.weight_bytes
                );
            }
        }
        Ok(())
    }

    #[test]
    fn qwen_delta_net_facts_are_complete_and_consistent() {
        let (_, dense) = qwen_delta_nets().remove(0);
        assert!(matches!(
            PartialFacts {
                ssm_state_size: None,
                ..dense.clone()
            }
            .complete(),
            Err(FactsError::Missing(m)) if m == ["ssm_state_size"]
        ));
        for broken in [
            PartialFacts {
                ssm_group_count: Some(5),
                ..dense.clone()
            },
            PartialFacts {
                full_attention_interval: Some(0),
                ..dense.clone()
            },
            PartialFacts {
                expert_count: Some(8),
                expert_used_count: Some(2),
                expert_feed_forward_length: Some(512),
                expert_shared_feed_forward_length: Some(512),
                ..dense.clone()
            },
        ] {
            assert!(
                matches!(broken.complete(), Err(FactsError::Inconsistent(_))),
                "{broken:?}"
            );
        }
    }

    /// LFM2-1.2B's facts as its `config.json` states them (the FFN width
    /// adjusted as the converter writes it).
    fn lfm2_1_2b() -> PartialFacts {
        PartialFacts {
            architecture: Some("lfm2".into()),
            block_count: Some(16),
            embedding_length: Some(2048),
            feed_forward_length: Some(8192),
            head_count: Some(32),
            head_count_kv: Some(8),
            vocab_size: Some(65_536),
            context_length: Some(128_000),
            tied_embeddings: Some(true),
            shortconv_l_cache: Some(3),
            attention_layers: Some(vec![2, 5, 8, 10, 12, 14]),
            ..PartialFacts::default()
        }
    }

    /// A catalog entry of LFM2 gets the zoo's LFM2-1.2B header, tensor for
    /// tensor and key for key (the zoo's is held to llama.cpp's accounting);
    /// without its layer kinds or its convolution it is incomplete.
    #[test]
    fn lfm2_facts_give_the_zoo_s_header() -> Result<(), FactsError> {
        use crate::synth::zoo::{self, Model};
        let f = lfm2_1_2b().complete()?;
        for ftype in [FileType::Q4_K_M, FileType::Q8_0, FileType::BF16] {
            let ours = header(&f, ftype)?;
            let zoo = zoo::build(Model::Lfm2_1_2B, ftype)?;
            assert_eq!(ours.tensors, zoo.tensors, "{}", ftype.name());
            let keys = |h: &Header| -> Vec<(String, Value)> {
                h.metadata
                    .iter()
                    .filter(|(k, _)| k.starts_with("lfm2."))
                    .cloned()
                    .collect()
            };
            assert_eq!(keys(&ours), keys(&zoo));
            assert_eq!(header_direct(&f, ftype, tensors(&f, ftype))?, ours);
        }
        let without = PartialFacts {
            attention_layers: None,
            ..lfm2_1_2b()
        };
        assert!(matches!(
            without.complete(),
            Err(FactsError::Missing(m)) if m == ["attention_layers"]
        ));
        let outside = PartialFacts {
            attention_layers: Some(vec![16]),
            ..lfm2_1_2b()
        };
        assert!(matches!(
            outside.complete(),
            Err(FactsError::Inconsistent(_))
        ));
        Ok(())
    }

    /// Granite-4.0-H-Tiny's facts, as the zoo's builder states them.
    fn granite4_h_tiny() -> PartialFacts {
        PartialFacts {
            architecture: Some("granitehybrid".into()),
            block_count: Some(40),
            embedding_length: Some(1536),
            feed_forward_length: Some(512),
            head_count: Some(12),
            head_count_kv: Some(4),
            vocab_size: Some(100_352),
            context_length: Some(131_072),
            tied_embeddings: Some(true),
            expert_count: Some(64),
            expert_used_count: Some(6),
            expert_feed_forward_length: Some(512),
            expert_shared_feed_forward_length: Some(1024),
            attention_layers: Some(vec![5, 15, 25, 35]),
            ssm_conv_kernel: Some(4),
            ssm_inner_size: Some(3072),
            ssm_state_size: Some(128),
            ssm_time_step_rank: Some(48),
            ssm_group_count: Some(1),
            ..PartialFacts::default()
        }
    }

    /// A catalog entry of Granite 4.0 H gets the zoo's Granite-4.0-H-Tiny
    /// header, tensor for tensor and key for key (the zoo's is held to
    /// llama.cpp's accounting); an inner size llama.cpp does not load is
    /// refused. Without experts every layer has a dense FFN of
    /// `feed_forward_length` and nothing of the router (Granite 4.0 H
    /// Micro: 36 Mamba-2 layers of 13 tensors and 4 attention layers of 9,
    /// the tied embedding and the output norm, 506 tensors).
    #[test]
    fn granitehybrid_facts_give_the_zoo_s_header() -> Result<(), FactsError> {
        use crate::synth::zoo::{self, Model};
        let f = granite4_h_tiny().complete()?;
        for ftype in [FileType::Q4_K_M, FileType::Q8_0, FileType::BF16] {
            let ours = header(&f, ftype)?;
            let zoo = zoo::build(Model::Granite4HTiny, ftype)?;
            assert_eq!(ours.tensors, zoo.tensors, "{}", ftype.name());
            let keys = |h: &Header| -> Vec<(String, Value)> {
                h.metadata
                    .iter()
                    .filter(|(k, _)| k.starts_with("granitehybrid."))
                    .cloned()
                    .collect()
            };
            assert_eq!(keys(&ours), keys(&zoo));
            assert_eq!(header_direct(&f, ftype, tensors(&f, ftype))?, ours);
        }
        for wrong in [PartialFacts {
            ssm_inner_size: Some(1536),
            ..granite4_h_tiny()
        }] {
            assert!(matches!(wrong.complete(), Err(FactsError::Inconsistent(_))));
        }
        let micro = PartialFacts {
            embedding_length: Some(2048),
            feed_forward_length: Some(8192),
            head_count: Some(32),
            head_count_kv: Some(8),
            expert_count: None,
            expert_used_count: None,
            expert_feed_forward_length: None,
            expert_shared_feed_forward_length: None,
            ssm_inner_size: Some(4096),
            ssm_time_step_rank: Some(64),
            ..granite4_h_tiny()
        }
        .complete()?;
        let h = header(&micro, FileType::Q8_0)?;
        assert_eq!(h.tensors.len(), 506);
        let dims = |name: &str| {
            h.tensors
                .iter()
                .find(|t| t.name == name)
                .map(|t| t.dims.clone())
        };
        assert_eq!(dims("blk.0.ffn_up.weight"), Some(vec![2048, 8192]));
        assert_eq!(dims("blk.5.ffn_down.weight"), Some(vec![8192, 2048]));
        assert_eq!(dims("blk.0.ffn_gate_inp.weight"), None);
        assert_eq!(dims("blk.5.attn_k.weight"), Some(vec![2048, 512]));
        Ok(())
    }

    /// Gemma-4-E2B's and Gemma-4-31B's facts as transformers' Gemma 4
    /// converter states them.
    fn gemma4_facts() -> [(PartialFacts, crate::synth::zoo::Model); 3] {
        use crate::synth::zoo::Model;
        let common = PartialFacts {
            architecture: Some("gemma4".into()),
            key_length: Some(512),
            key_length_swa: Some(256),
            vocab_size: Some(262_144),
            ..PartialFacts::default()
        };
        [
            (
                PartialFacts {
                    block_count: Some(35),
                    embedding_length: Some(1536),
                    feed_forward_length: Some(6144),
                    head_count: Some(8),
                    head_count_kv: Some(1),
                    context_length: Some(131_072),
                    sliding_window: Some(512),
                    sliding_window_pattern: Some(5),
                    shared_kv_layers: Some(20),
                    embedding_length_per_layer_input: Some(256),
                    double_wide_mlp: Some(true),
                    ..common.clone()
                },
                Model::Gemma4E2B,
            ),
            (
                PartialFacts {
                    block_count: Some(60),
                    embedding_length: Some(5376),
                    feed_forward_length: Some(21_504),
                    head_count: Some(32),
                    head_count_kv: Some(16),
                    head_count_kv_full: Some(4),
                    attention_k_eq_v: Some(true),
                    context_length: Some(262_144),
                    sliding_window: Some(1024),
                    sliding_window_pattern: Some(6),
                    shared_kv_layers: Some(0),
                    embedding_length_per_layer_input: Some(0),
                    ..common.clone()
                },
                Model::Gemma4_31B,
            ),
            (
                PartialFacts {
                    block_count: Some(30),
                    embedding_length: Some(2816),
                    feed_forward_length: Some(2112),
                    head_count: Some(16),
                    head_count_kv: Some(8),
                    head_count_kv_full: Some(2),
                    attention_k_eq_v: Some(true),
                    context_length: Some(262_144),
                    sliding_window: Some(1024),
                    sliding_window_pattern: Some(6),
                    shared_kv_layers: Some(0),
                    embedding_length_per_layer_input: Some(0),
                    expert_count: Some(128),
                    expert_used_count: Some(8),
                    expert_feed_forward_length: Some(704),
                    ..common
                },
                Model::Gemma4_26BA4B,
            ),
        ]
    }

    /// A catalog entry of Gemma 4 gets the zoo's header (the one held to
    /// llama.cpp's accounting), tensor for tensor, with the same keys.
    #[test]
    fn gemma4_facts_give_the_zoo_s_header() -> Result<(), FactsError> {
        use crate::synth::zoo;
        for (facts, model) in gemma4_facts() {
            let f = facts.complete()?;
            assert!(f.tied_embeddings);
            for ftype in [FileType::Q4_K_M, FileType::Q8_0, FileType::BF16] {
                let ours = header(&f, ftype)?;
                let zoo = zoo::build(model, ftype)?;
                assert_eq!(ours.tensors, zoo.tensors, "{}", ftype.name());
                let keys = |h: &Header| -> Vec<(String, Value)> {
                    h.metadata
                        .iter()
                        .filter(|(k, _)| k.starts_with("gemma4."))
                        .cloned()
                        .collect()
                };
                assert_eq!(keys(&ours), keys(&zoo));
            }
        }
        let [(e2b, _), _, _] = gemma4_facts();
        let no_window = PartialFacts {
            key_length_swa: None,
            ..e2b.clone()
        };
        assert!(
            matches!(no_window.complete(), Err(FactsError::Missing(m)) if m == vec!["key_length_swa"])
        );
        let all_shared = PartialFacts {
            shared_kv_layers: Some(33),
            ..e2b
        };
        assert!(matches!(
            all_shared.complete(),
            Err(FactsError::Inconsistent(_))
        ));
        Ok(())
    }
}
