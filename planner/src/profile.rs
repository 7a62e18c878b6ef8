//! `ModelProfile`: the architecture facts and weight layout the memory model
//! needs, distilled from a GGUF header.
//!
//! The profile is architecture-generic: it reads the `{arch}.*` keys llama.cpp
//! reads and sorts tensors into layers by their `blk.N.` prefix. Headers that
//! contradict themselves are rejected here, before any plan is made, because
//! llama.cpp would refuse (or crash on) them at load time.

use serde::Serialize;
use thiserror::Error;

use crate::arch;
use crate::gguf::{GgmlType, Header};

mod aborts;
mod layers;

pub use aborts::{MAX_EXPERTS, ROPE_SCALING_TYPES};
pub use layers::LayerKind;

/// Why a header cannot be turned into a model profile.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ProfileError {
    /// `general.architecture` is absent.
    #[error("the header has no general.architecture key")]
    NoArchitecture,
    /// llama.cpp cannot load this architecture.
    #[error("architecture '{0}' is not known to llama.cpp")]
    UnknownArchitecture(String),
    /// A key llama.cpp requires is absent or of the wrong type.
    #[error("missing or invalid key '{0}'")]
    MissingKey(String),
    /// A value is out of range (zero heads, zero layers, ...).
    #[error("invalid value for '{key}': {why}")]
    Invalid {
        /// The offending key.
        key: String,
        /// What is wrong with it.
        why: String,
    },
    /// The tensors do not match what the metadata says.
    #[error("inconsistent header: {0}")]
    Inconsistent(String),
}

/// One weight tensor, as the memory model needs it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tensor {
    /// Tensor name (`blk.3.attn_q.weight`).
    pub name: String,
    /// ggml type.
    pub ty: GgmlType,
    /// Dimensions, innermost first (ggml `ne`).
    pub dims: Vec<u64>,
    /// Bytes in the file.
    pub bytes: u64,
    /// Offset of its data from the start of the data section.
    pub offset: u64,
}

impl Tensor {
    /// Whether this is a stacked mixture-of-experts tensor (`ffn_*_exps`).
    #[must_use]
    pub fn is_expert(&self) -> bool {
        self.name.contains("_exps.")
    }

    /// Elements in the tensor.
    #[must_use]
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().copied().fold(1u64, u64::saturating_mul)
    }
}

/// The weights of one repeating layer (`blk.N.*`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Layer {
    /// All tensors of the layer.
    pub tensors: Vec<Tensor>,
}

impl Layer {
    /// Bytes of all tensors in the layer.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.tensors.iter().map(|t| t.bytes).sum()
    }

    /// Bytes of the stacked expert tensors only.
    #[must_use]
    pub fn expert_bytes(&self) -> u64 {
        self.tensors
            .iter()
            .filter(|t| t.is_expert())
            .map(|t| t.bytes)
            .sum()
    }
}

/// Sliding-window (or chunked) attention facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SlidingWindow {
    /// Window (or chunk) size in tokens.
    pub window: u32,
    /// Sliding or chunked.
    pub kind: arch::WindowKind,
    /// Per layer: whether it uses the window (else full attention).
    pub layers: Vec<bool>,
}

/// Mixture-of-experts facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Experts {
    /// Experts per MoE layer.
    pub count: u32,
    /// Experts used per token.
    pub used: u32,
    /// Shared experts (always active).
    pub shared: u32,
}

/// DeepSeek-2-style multi-head latent attention as llama.cpp runs it: the
/// cache holds a compressed latent vector per token (`key_length`, K only)
/// instead of full keys and values. Only for files with the `*_mla` keys
/// (see [`crate::arch::READS_MLA_KEYS`]); older files are plain attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Mla {
    /// Latent (compressed KV) rank.
    pub kv_lora_rank: u32,
    /// Rotary dimensions kept uncompressed.
    pub n_rot: u32,
    /// Value head size after decompression (`attention.value_length_mla`).
    pub v_head_dim: u32,
}

/// State-space (Mamba-style) recurrent layer facts: a fixed state per
/// sequence instead of a cache that grows with context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Recurrent {
    /// Convolution kernel size (`ssm.conv_kernel`).
    pub d_conv: u32,
    /// Inner size (`ssm.inner_size`).
    pub d_inner: u32,
    /// State size (`ssm.state_size`).
    pub d_state: u32,
    /// Groups (`ssm.group_count`), 0 for Mamba-1.
    pub n_group: u32,
    /// RWKV-style: bytes of state per layer per sequence when the
    /// architecture is RWKV (`wkv.head_size`), else 0.
    pub rwkv_state_floats: u64,
}

/// Everything the planner knows about a model, from its header.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelProfile {
    /// `general.architecture`.
    pub arch: String,
    /// `general.name`, if present.
    pub name: Option<String>,
    /// The quantization label (`Q4_K_M`), from `general.file_type` or the
    /// dominant tensor type.
    pub quant: String,
    /// Parameters (sum of tensor elements).
    pub n_params: u64,
    /// Repeating layers.
    pub n_layer: u32,
    /// Embedding width.
    pub n_embd: u32,
    /// Attention heads per layer.
    pub n_head: Vec<u32>,
    /// KV heads per layer (0 in some hybrids' recurrent layers).
    pub n_head_kv: Vec<u32>,
    /// Key head size.
    pub head_dim_k: u32,
    /// Value head size.
    pub head_dim_v: u32,
    /// Key head size of the sliding-window layers (`key_length_swa`, else `head_dim_k`).
    pub head_dim_k_swa: u32,
    /// Value head size of the sliding-window layers.
    pub head_dim_v_swa: u32,
    /// What llama.cpp caches for each layer, and why (one per block).
    pub layer_kinds: Vec<LayerKind>,
    /// Multi-token-prediction blocks at the end (`nextn_predict_layers`).
    pub nextn: u32,
    /// Feed-forward width of the first dense layer (0 if none).
    pub n_ff: u32,
    /// Vocabulary size.
    pub n_vocab: u64,
    /// Training context.
    pub n_ctx_train: u64,
    /// Sliding-window attention, if the model uses it.
    pub swa: Option<SlidingWindow>,
    /// Mixture of experts, if any.
    pub experts: Option<Experts>,
    /// Latent attention, if any.
    pub mla: Option<Mla>,
    /// Recurrent state, if any.
    pub recurrent: Option<Recurrent>,
    /// Per-layer weights (an MTP block llama.cpp skips has none here).
    pub layers: Vec<Layer>,
    /// Tensors in the file that llama.cpp does not load by default: the MTP
    /// blocks of the architectures in [`crate::arch::SKIPS_MTP_WEIGHTS`].
    pub skipped: Vec<Tensor>,
    /// `token_embd.weight`.
    pub token_embd: Option<Tensor>,
    /// `output.weight` (absent when tied to the embedding).
    pub output: Option<Tensor>,
    /// Other non-layer tensors (`output_norm.weight`, `rope_freqs.weight`, ...).
    pub globals: Vec<Tensor>,
    /// Bytes of all tensor data.
    pub weight_bytes: u64,
    /// Bytes before the tensor data (header and padding).
    pub data_offset: u64,
}

impl ModelProfile {
    /// File size implied by the header: header plus the end of the last tensor.
    #[must_use]
    pub fn file_bytes(&self) -> u64 {
        self.data_offset.saturating_add(self.weight_bytes)
    }

    /// What llama.cpp caches for layer `il` (`NoAttention` past the last).
    #[must_use]
    pub fn layer_kind(&self, il: usize) -> LayerKind {
        self.layer_kinds
            .get(il)
            .copied()
            .unwrap_or(LayerKind::NoAttention)
    }

    /// Layers whose attention has its own KV cache.
    #[must_use]
    pub fn is_attention_layer(&self, il: usize) -> bool {
        self.layer_kind(il).has_kv()
    }

    /// Whether layer `il` uses the sliding (or chunked) window.
    #[must_use]
    pub fn is_swa_layer(&self, il: usize) -> bool {
        self.layer_kind(il).is_windowed()
    }

    /// Key and value head sizes of layer `il` (llama.cpp's
    /// `n_embd_head_k(il)`: the `_swa` sizes on windowed layers).
    #[must_use]
    pub fn head_dims(&self, il: usize) -> (u32, u32) {
        let swa = self
            .swa
            .as_ref()
            .is_some_and(|s| s.layers.get(il).copied().unwrap_or(false));
        if swa {
            (self.head_dim_k_swa, self.head_dim_v_swa)
        } else {
            (self.head_dim_k, self.head_dim_v)
        }
    }

    /// How many layers are of each kind, in the order of first appearance.
    #[must_use]
    pub fn layer_kind_counts(&self) -> Vec<(LayerKind, u32)> {
        let mut out: Vec<(LayerKind, u32)> = Vec::new();
        for &k in &self.layer_kinds {
            match out.iter_mut().find(|(x, _)| *x == k) {
                Some((_, n)) => *n += 1,
                None => out.push((k, 1)),
            }
        }
        out
    }

    /// Bytes of the non-layer tensors.
    #[must_use]
    pub fn global_bytes(&self) -> u64 {
        self.token_embd
            .iter()
            .chain(self.output.iter())
            .chain(self.globals.iter())
            .map(|t| t.bytes)
            .sum()
    }

    /// Weights read per generated token: every dense weight, plus only the
    /// active share of the expert tensors, plus one row of the embedding.
    #[must_use]
    pub fn active_bytes_per_token(&self) -> u64 {
        let mut total = 0u64;
        for layer in &self.layers {
            total += active_layer_bytes(layer, self.experts);
        }
        total += self
            .output
            .as_ref()
            .or(self.token_embd.as_ref())
            .map_or(0, |t| t.bytes);
        total += self.globals.iter().map(|t| t.bytes).sum::<u64>();
        total
    }
}

/// Bytes of a layer read per token (only `used` of `count` experts).
#[must_use]
pub fn active_layer_bytes(layer: &Layer, experts: Option<Experts>) -> u64 {
    let experts_b = layer.expert_bytes();
    let dense = layer.bytes() - experts_b;
    match experts {
        Some(e) if e.count > 0 => {
            dense + experts_b * u64::from(e.used.min(e.count)) / u64::from(e.count)
        }
        _ => dense + experts_b,
    }
}

fn key(arch: &str, suffix: &str) -> String {
    format!("{arch}.{suffix}")
}

fn to_u32(key: &str, v: u64) -> Result<u32, ProfileError> {
    u32::try_from(v).map_err(|_| ProfileError::Invalid {
        key: key.to_string(),
        why: format!("{v} is too large"),
    })
}

/// A per-layer value: a scalar broadcast to every layer, or an array of
/// exactly `n_layer` entries (llama.cpp's `get_key_or_arr`).
fn per_layer(h: &Header, k: &str, n_layer: u32) -> Result<Option<Vec<u32>>, ProfileError> {
    if let Some(arr) = h.get_u64_array(k) {
        if arr.len() != n_layer as usize {
            return Err(ProfileError::Invalid {
                key: k.to_string(),
                why: format!("array has {} entries for {n_layer} layers", arr.len()),
            });
        }
        return arr
            .into_iter()
            .map(|v| to_u32(k, v))
            .collect::<Result<Vec<_>, _>>()
            .map(Some);
    }
    match h.get_u64(k) {
        Some(v) => Ok(Some(vec![to_u32(k, v)?; n_layer as usize])),
        None if h.get(k).is_some() => Err(ProfileError::MissingKey(k.to_string())),
        None => Ok(None),
    }
}

fn req_u32(h: &Header, k: &str) -> Result<u32, ProfileError> {
    let v = h
        .get_u64(k)
        .ok_or_else(|| ProfileError::MissingKey(k.to_string()))?;
    to_u32(k, v)
}

fn opt_u32(h: &Header, k: &str) -> Result<Option<u32>, ProfileError> {
    h.get_u64(k).map(|v| to_u32(k, v)).transpose()
}

/// The llama.cpp `general.file_type` (`llama_ftype`) label.
#[must_use]
pub fn ftype_label(ftype: u64) -> Option<&'static str> {
    Some(match ftype {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        38 => "MXFP4_MOE",
        _ => return None,
    })
}

/// llama.cpp's `LLAMA_MAX_LAYERS`: it refuses a model with more blocks.
pub const MAX_LAYERS: u32 = 512;

/// Build a profile from a parsed header, checking it for consistency.
///
/// # Errors
/// A [`ProfileError`] naming the first contradiction found.
pub fn profile(h: &Header) -> Result<ModelProfile, ProfileError> {
    let arch = h
        .get_str("general.architecture")
        .ok_or(ProfileError::NoArchitecture)?
        .to_string();
    if !arch::is_known(&arch) {
        return Err(ProfileError::UnknownArchitecture(arch));
    }
    let a = arch.as_str();
    let n_layer = req_u32(h, &key(a, "block_count"))?;
    if n_layer == 0 {
        return Err(ProfileError::Invalid {
            key: key(a, "block_count"),
            why: "zero layers".into(),
        });
    }
    // llama.cpp aborts (GGML_ASSERT) past LLAMA_MAX_LAYERS; refusing here
    // also bounds every per-layer vector below, whatever the header claims.
    if n_layer > MAX_LAYERS {
        return Err(ProfileError::Invalid {
            key: key(a, "block_count"),
            why: format!("{n_layer} layers, more than llama.cpp's {MAX_LAYERS}"),
        });
    }
    let nextn = aborts::nextn_layers(h, a, n_layer)?;
    let n_embd = req_u32(h, &key(a, "embedding_length"))?;
    if n_embd == 0 {
        return Err(ProfileError::Invalid {
            key: key(a, "embedding_length"),
            why: "zero width".into(),
        });
    }
    let k_head = key(a, "attention.head_count");
    let n_head =
        per_layer(h, &k_head, n_layer)?.ok_or_else(|| ProfileError::MissingKey(k_head.clone()))?;
    let recurrent = recurrent_facts(h, a)?;
    // Zero heads are a recurrent (or attention-free) layer in architectures
    // that have such layers, and an error in every other.
    let may_skip_attention = recurrent.is_some() || arch::recurrent_rule(a).is_some();
    if !may_skip_attention && n_head.contains(&0) {
        return Err(ProfileError::Invalid {
            key: k_head,
            why: "zero attention heads".into(),
        });
    }
    let k_head_kv = key(a, "attention.head_count_kv");
    let n_head_kv = per_layer(h, &k_head_kv, n_layer)?.unwrap_or_else(|| n_head.clone());
    for (il, (&kv, &q)) in n_head_kv.iter().zip(&n_head).enumerate() {
        if kv > q || (kv > 0 && q % kv != 0) {
            return Err(ProfileError::Invalid {
                key: k_head_kv,
                why: format!("layer {il}: {kv} KV heads do not divide {q} heads"),
            });
        }
        if kv == 0 && !may_skip_attention {
            return Err(ProfileError::Invalid {
                key: k_head_kv,
                why: format!("layer {il}: zero KV heads"),
            });
        }
    }
    let max_head = n_head.iter().copied().max().unwrap_or(0).max(1);
    let head_dim_k = opt_u32(h, &key(a, "attention.key_length"))?.unwrap_or(n_embd / max_head);
    let head_dim_v = opt_u32(h, &key(a, "attention.value_length"))?.unwrap_or(n_embd / max_head);
    let head_dim_k_swa = opt_u32(h, &key(a, "attention.key_length_swa"))?.unwrap_or(head_dim_k);
    let head_dim_v_swa = opt_u32(h, &key(a, "attention.value_length_swa"))?.unwrap_or(head_dim_v);
    if head_dim_k == 0 || head_dim_v == 0 || head_dim_k_swa == 0 || head_dim_v_swa == 0 {
        return Err(ProfileError::Invalid {
            key: key(a, "attention.key_length"),
            why: "zero head size".into(),
        });
    }
    let n_ff = per_layer(h, &key(a, "feed_forward_length"), n_layer)?
        .and_then(|v| v.into_iter().find(|&x| x > 0))
        .unwrap_or(0);
    let n_ctx_train = h.get_u64(&key(a, "context_length")).unwrap_or(0);

    // Tensors.
    let mut layers = vec![Layer::default(); n_layer as usize];
    let mut token_embd = None;
    let mut output = None;
    let mut globals = Vec::new();
    let mut n_params = 0u64;
    let mut weight_bytes = 0u64;
    let mut type_bytes: Vec<(GgmlType, u64)> = Vec::new();
    for t in &h.tensors {
        let tensor = Tensor {
            name: t.name.clone(),
            ty: t.ty,
            dims: t.dims.clone(),
            bytes: t.bytes,
            offset: t.offset,
        };
        n_params = n_params.saturating_add(tensor.n_elements());
        weight_bytes = weight_bytes.saturating_add(t.bytes);
        if t.dims.len() >= 2 {
            match type_bytes.iter_mut().find(|(ty, _)| *ty == t.ty) {
                Some((_, b)) => *b += t.bytes,
                None => type_bytes.push((t.ty, t.bytes)),
            }
        }
        if let Some(rest) = t.name.strip_prefix("blk.") {
            let idx: Option<u32> = rest.split('.').next().and_then(|s| s.parse().ok());
            let Some(il) = idx else {
                return Err(ProfileError::Inconsistent(format!(
                    "tensor '{}' has no layer number",
                    t.name
                )));
            };
            let Some(layer) = layers.get_mut(il as usize) else {
                return Err(ProfileError::Inconsistent(format!(
                    "tensor '{}' is in layer {il} but the model has {n_layer} layers",
                    t.name
                )));
            };
            layer.tensors.push(tensor);
        } else if t.name == "token_embd.weight" {
            token_embd = Some(tensor);
        } else if t.name == "output.weight" {
            output = Some(tensor);
        } else {
            globals.push(tensor);
        }
    }
    // Layers past `n_layer - nextn` may be multi-token-prediction heads that
    // llama.cpp loads but some files omit; every other layer must have weights.
    let n_trunk = n_layer - nextn;
    for (il, layer) in layers.iter().enumerate() {
        if layer.tensors.is_empty() && il < n_trunk as usize {
            return Err(ProfileError::Inconsistent(format!(
                "layer {il} of {n_layer} has no tensors"
            )));
        }
    }
    // Most architectures with MTP blocks skip their weights unless asked
    // (`TENSOR_SKIP` without `load_mtp`): they stay in the file, unloaded.
    let mut skipped = Vec::new();
    if nextn > 0 && arch::SKIPS_MTP_WEIGHTS.contains(&a) {
        for layer in &mut layers[n_trunk as usize..] {
            skipped.append(&mut layer.tensors);
        }
    }

    // Vocabulary: the token list, else the explicit size, must match the
    // embedding's rows.
    let embd_rows = token_embd.as_ref().and_then(|t| t.dims.get(1).copied());
    let listed = h
        .array_len("tokenizer.ggml.tokens")
        .or_else(|| h.get_u64(&key(a, "vocab_size")));
    let n_vocab = match (listed, embd_rows) {
        (Some(v), Some(rows)) if v != rows => {
            return Err(ProfileError::Inconsistent(format!(
                "the vocabulary has {v} tokens but token_embd.weight has {rows} rows"
            )));
        }
        (Some(v), _) => v,
        (None, Some(rows)) => rows,
        (None, None) => return Err(ProfileError::MissingKey("tokenizer.ggml.tokens".into())),
    };
    if let Some(t) = &token_embd
        && t.dims.first().copied() != Some(u64::from(n_embd))
    {
        return Err(ProfileError::Inconsistent(format!(
            "token_embd.weight is {:?} but embedding_length is {n_embd}",
            t.dims
        )));
    }

    let experts = aborts::experts(h, a, n_layer)?;
    aborts::rope_scaling(h, a)?;
    aborts::full_attention_interval(h, a)?;
    let facts = layers::read(h, a, n_layer, n_trunk, &n_head_kv)?;
    let swa = facts.swa;
    let mla = if facts.mla {
        Some(Mla {
            kv_lora_rank: opt_u32(h, &key(a, "attention.kv_lora_rank"))?.unwrap_or(0),
            n_rot: opt_u32(h, &key(a, "rope.dimension_count"))?.unwrap_or(0),
            v_head_dim: opt_u32(h, &key(a, "attention.value_length_mla"))?.unwrap_or(0),
        })
    } else {
        None
    };
    let quant = h
        .get_u64("general.file_type")
        .and_then(ftype_label)
        .map(str::to_string)
        .or_else(|| {
            type_bytes
                .iter()
                .max_by_key(|(_, b)| *b)
                .map(|(ty, _)| ty.name().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string());

    Ok(ModelProfile {
        name: h.get_str("general.name").map(str::to_string),
        arch,
        quant,
        n_params,
        n_layer,
        n_embd,
        n_head,
        n_head_kv,
        head_dim_k,
        head_dim_v,
        head_dim_k_swa,
        head_dim_v_swa,
        layer_kinds: facts.kinds,
        nextn,
        n_ff,
        n_vocab,
        n_ctx_train,
        swa,
        experts,
        mla,
        recurrent,
        layers,
        skipped,
        token_embd,
        output,
        globals,
        weight_bytes,
        data_offset: h.data_offset,
    })
}

fn recurrent_facts(h: &Header, a: &str) -> Result<Option<Recurrent>, ProfileError> {
    if let Some(d_inner) = opt_u32(h, &key(a, "ssm.inner_size"))? {
        return Ok(Some(Recurrent {
            d_conv: opt_u32(h, &key(a, "ssm.conv_kernel"))?.unwrap_or(4),
            d_inner,
            d_state: opt_u32(h, &key(a, "ssm.state_size"))?.unwrap_or(16),
            n_group: opt_u32(h, &key(a, "ssm.group_count"))?.unwrap_or(0),
            rwkv_state_floats: 0,
        }));
    }
    if let Some(l_cache) = opt_u32(h, &key(a, "shortconv.l_cache"))? {
        // LFM2's short convolution keeps only its last `l_cache - 1` inputs,
        // one row of the hidden size each, and no SSM state (`n_embd_r`).
        return Ok(Some(Recurrent {
            d_conv: l_cache,
            d_inner: req_u32(h, &key(a, "embedding_length"))?,
            d_state: 0,
            n_group: 0,
            rwkv_state_floats: 0,
        }));
    }
    if let Some(head) = opt_u32(h, &key(a, "wkv.head_size"))? {
        let n_embd = u64::from(req_u32(h, &key(a, "embedding_length"))?);
        // RWKV: token-shift (2 × n_embd) plus the wkv state (n_embd × head_size).
        let floats = 2 * n_embd + n_embd * u64::from(head);
        return Ok(Some(Recurrent {
            d_conv: 0,
            d_inner: 0,
            d_state: 0,
            n_group: 0,
            rwkv_state_floats: floats,
        }));
    }
    Ok(None)
}
