//! What llama.cpp keeps for each layer's attention, read from the keys its
//! loader reads: a full KV cache, a window of one (sliding or chunked), one
//! latent row (MLA), a recurrent state, or nothing (an MTP block it skips,
//! a layer that reuses another's cache, a layer without attention).
//!
//! Why here: the KV cache of a hybrid, windowed or latent-attention model is
//! wrong by up to 300% when every layer is taken for a full-attention layer
//! (issue #13); the rules are per architecture ([`crate::arch`]), the facts
//! per file, and the result, one [`LayerKind`] per block, is what the memory
//! model and the plan's JSON use.

use serde::Serialize;

use super::{ProfileError, SlidingWindow, key, opt_u32, per_layer};
use crate::arch::{self, RecurrentRule, WindowLayers, WindowRule, WindowSize};
use crate::gguf::Header;

/// How llama.cpp caches one layer's attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerKind {
    /// A KV cell per token of the context (`llama_kv_cache`).
    Full,
    /// A sliding window: at most window + ubatch cells, padded to 256
    /// (`llama_kv_cache_iswa`).
    Sliding,
    /// Chunked attention (Llama 4): at most chunk + ubatch cells, as a window.
    Chunked,
    /// Multi-head latent attention: one compressed K row per token and no V
    /// (`llama_hparams::is_mla`).
    Mla,
    /// A recurrent state per sequence, independent of the context
    /// (`llama_memory_recurrent`, f32 r and s rows).
    Recurrent,
    /// Both a full KV cache and a recurrent state (falcon-h1).
    Parallel,
    /// A multi-token-prediction block: llama.cpp's default context gives it
    /// no cache (and, for most architectures, skips its weights).
    Mtp,
    /// Reuses an earlier layer's cache (gemma3n, gemma4).
    Shared,
    /// No attention at all (nemotron_h's FFN-only layers).
    NoAttention,
}

impl LayerKind {
    /// The name `plan --json` uses (`full`, `sliding`, `no_attention`, …).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            LayerKind::Full => "full",
            LayerKind::Sliding => "sliding",
            LayerKind::Chunked => "chunked",
            LayerKind::Mla => "mla",
            LayerKind::Recurrent => "recurrent",
            LayerKind::Parallel => "parallel",
            LayerKind::Mtp => "mtp",
            LayerKind::Shared => "shared",
            LayerKind::NoAttention => "no_attention",
        }
    }

    /// Whether the layer has its own KV cache.
    #[must_use]
    pub fn has_kv(self) -> bool {
        matches!(
            self,
            LayerKind::Full
                | LayerKind::Sliding
                | LayerKind::Chunked
                | LayerKind::Mla
                | LayerKind::Parallel
        )
    }

    /// Whether the layer keeps a recurrent state.
    #[must_use]
    pub fn has_state(self) -> bool {
        matches!(self, LayerKind::Recurrent | LayerKind::Parallel)
    }

    /// Whether its cache is a window (sliding or chunked).
    #[must_use]
    pub fn is_windowed(self) -> bool {
        matches!(self, LayerKind::Sliding | LayerKind::Chunked)
    }
}

/// The per-layer facts the profile derives from the header.
pub(super) struct LayerFacts {
    /// One per block.
    pub kinds: Vec<LayerKind>,
    /// The window, if any layer uses one.
    pub swa: Option<SlidingWindow>,
    /// Whether the cache is latent (K only).
    pub mla: bool,
}

/// Read every layer's kind. `n_trunk` is `block_count - nextn_predict_layers`.
pub(super) fn read(
    h: &Header,
    a: &str,
    n_layer: u32,
    n_trunk: u32,
    n_head_kv: &[u32],
) -> Result<LayerFacts, ProfileError> {
    let recurrent = recurrent_layers(h, a, n_layer, n_trunk, n_head_kv)?;
    let swa = sliding_window(h, a, n_layer, n_trunk, &recurrent)?;
    let mla = arch::READS_MLA_KEYS.contains(&a)
        && opt_u32(h, &key(a, "attention.key_length_mla"))?.is_some_and(|v| v > 0)
        && opt_u32(h, &key(a, "attention.value_length_mla"))?.is_some_and(|v| v > 0);
    let shared_kv = opt_u32(h, &key(a, "attention.shared_kv_layers"))?;
    let shared_from = arch::kv_shared_from(a, n_layer, shared_kv);
    let kinds = (0..n_layer)
        .map(|il| {
            let i = il as usize;
            if il >= n_trunk {
                return LayerKind::Mtp;
            }
            if let Some(k) = recurrent[i] {
                return k;
            }
            if shared_from.is_some_and(|s| il >= s) {
                return LayerKind::Shared;
            }
            match &swa {
                Some(w) if w.layers.get(i).copied().unwrap_or(false) => match w.kind {
                    arch::WindowKind::Sliding => LayerKind::Sliding,
                    arch::WindowKind::Chunked => LayerKind::Chunked,
                },
                _ if mla => LayerKind::Mla,
                _ => LayerKind::Full,
            }
        })
        .collect();
    Ok(LayerFacts { kinds, swa, mla })
}

/// Per layer: `Some(kind)` for a layer whose kind the recurrent rule fixes
/// (recurrent, parallel, no attention), `None` for an attention layer.
fn recurrent_layers(
    h: &Header,
    a: &str,
    n_layer: u32,
    n_trunk: u32,
    n_head_kv: &[u32],
) -> Result<Vec<Option<LayerKind>>, ProfileError> {
    let n = n_layer as usize;
    let Some(rule) = arch::recurrent_rule(a) else {
        return Ok(vec![None; n]);
    };
    let kv = |il: usize| n_head_kv.get(il).copied().unwrap_or(0);
    let recurrent = Some(LayerKind::Recurrent);
    Ok(match rule {
        RecurrentRule::All => vec![recurrent; n],
        RecurrentRule::NoKvHeads => (0..n)
            .map(|il| if kv(il) == 0 { recurrent } else { None })
            .collect(),
        RecurrentRule::NoKvHeadsNoFfn => {
            let ff = per_layer(h, &key(a, "feed_forward_length"), n_layer)?
                .unwrap_or_else(|| vec![0; n]);
            (0..n)
                .map(|il| match (kv(il), ff[il]) {
                    (_, f) if f > 0 => Some(LayerKind::NoAttention),
                    (0, _) => recurrent,
                    _ => None,
                })
                .collect()
        }
        RecurrentRule::Interval => {
            let k = key(a, "attention.recurrent_layers");
            let listed = match (h.get_bool_array(&k), h.get_u64_array(&k)) {
                (Some(b), _) => Some(b),
                (None, Some(v)) => Some(v.into_iter().map(|x| x != 0).collect()),
                _ => None,
            };
            let flags: Vec<bool> = match listed {
                Some(v) if v.len() == n => v,
                Some(v) => {
                    return Err(ProfileError::Invalid {
                        key: k,
                        why: format!("{} entries for {n_layer} layers", v.len()),
                    });
                }
                None => {
                    let every = opt_u32(h, &key(a, "full_attention_interval"))?
                        .unwrap_or(4)
                        .max(1);
                    (0..n_layer)
                        .map(|il| il < n_trunk && (il + 1) % every != 0)
                        .collect()
                }
            };
            flags
                .into_iter()
                .map(|r| if r { recurrent } else { None })
                .collect()
        }
        RecurrentRule::Parallel => vec![Some(LayerKind::Parallel); n],
    })
}

/// The window and the layers that use it, as the architecture's
/// `load_arch_hparams` sets `n_swa`, `swa_type` and `is_swa_impl`.
fn sliding_window(
    h: &Header,
    a: &str,
    n_layer: u32,
    n_trunk: u32,
    recurrent: &[Option<LayerKind>],
) -> Result<Option<SlidingWindow>, ProfileError> {
    let Some(WindowRule { kind, size, layers }) = arch::window_rule(a, n_trunk) else {
        return Ok(None);
    };
    let key_window = opt_u32(h, &key(a, "attention.sliding_window"))?;
    let window = match (size, key_window) {
        (WindowSize::Key | WindowSize::KeyIfPositive, Some(w)) if w > 0 => w,
        (WindowSize::KeyOr(default), w) => w.unwrap_or(default),
        (WindowSize::FixedIfKey(fixed), Some(w)) if w > 0 => fixed,
        (WindowSize::FixedUnlessZero(_), Some(0)) => return Ok(None),
        (WindowSize::FixedUnlessZero(fixed), _) => fixed,
        _ => return Ok(None),
    };
    if window == 0 {
        return Ok(None);
    }
    let k_pattern = key(a, "attention.sliding_window_pattern");
    let array = match (h.get_bool_array(&k_pattern), h.get_u64_array(&k_pattern)) {
        (Some(b), _) => Some(b),
        (None, Some(v)) => Some(v.into_iter().map(|x| x != 0).collect::<Vec<_>>()),
        _ => None,
    };
    if let Some(arr) = &array
        && arr.len() != n_layer as usize
    {
        return Err(ProfileError::Invalid {
            key: k_pattern,
            why: format!("{} entries for {n_layer} layers", arr.len()),
        });
    }
    let flags = match (layers, array) {
        (WindowLayers::Pattern { .. } | WindowLayers::Array, Some(arr)) => arr,
        (WindowLayers::Pattern { n, dense_first }, None) => {
            let n = opt_u32(h, &k_pattern)?.unwrap_or(n);
            let mut v = arch::swa_layers(n_trunk, n, dense_first);
            v.resize(n_layer as usize, false);
            v
        }
        (WindowLayers::Array, None) => return Ok(None),
        (WindowLayers::AllAttention, _) => (0..n_layer as usize)
            .map(|il| (il as u32) < n_trunk && recurrent.get(il).copied().flatten().is_none())
            .collect(),
    };
    if !flags.iter().any(|&f| f) {
        return Ok(None);
    }
    Ok(Some(SlidingWindow {
        window,
        kind,
        layers: flags,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::writer::HeaderBuilder;
    use crate::gguf::{GgmlType, Value};
    use crate::profile::{ModelProfile, profile};
    use crate::synth::zoo::{self, Model};

    fn zoo_profile(m: Model) -> ModelProfile {
        profile(&zoo::build(m, m.file_type()).expect("header")).expect("profile")
    }

    fn counts(p: &ModelProfile) -> Vec<(&'static str, u32)> {
        p.layer_kind_counts()
            .into_iter()
            .map(|(k, n)| (k.name(), n))
            .collect()
    }

    #[test]
    fn names_are_the_json_names() {
        for k in [
            LayerKind::Full,
            LayerKind::Sliding,
            LayerKind::Chunked,
            LayerKind::Mla,
            LayerKind::Recurrent,
            LayerKind::Parallel,
            LayerKind::Mtp,
            LayerKind::Shared,
            LayerKind::NoAttention,
        ] {
            assert_eq!(serde_json::to_value(k).expect("serializes"), k.name());
        }
    }

    /// llama.cpp caches the latent row only with the `*_mla` keys
    /// (`hparams.is_mla()`); 2024's DeepSeek files get full K and V.
    #[test]
    fn latent_attention_only_with_the_mla_keys() {
        let old = zoo_profile(Model::DeepSeekV2Lite2024);
        assert_eq!(counts(&old), [("full", 27)]);
        assert_eq!(old.mla, None);
        let split = zoo_profile(Model::DeepSeekV2Lite);
        assert_eq!(counts(&split), [("mla", 27)]);
        let mla = split.mla.expect("latent");
        assert_eq!(
            (mla.kv_lora_rank, mla.n_rot, mla.v_head_dim),
            (512, 64, 128)
        );
    }

    /// Llama 4: chunks of 8192 on 3 of every 4 layers unless the header sets
    /// the window to 0 (`src/models/llama4.cpp`).
    #[test]
    fn llama4_chunks_three_layers_in_four() {
        let p = zoo_profile(Model::Llama4Scout);
        assert_eq!(
            counts(&p),
            [("chunked", 3), ("full", 1)].map(|(k, n)| (k, n * 12))
        );
        let w = p.swa.as_ref().expect("chunked");
        assert_eq!((w.window, w.kind), (8192, arch::WindowKind::Chunked));
        assert_eq!(p.layer_kind(3), LayerKind::Full);
        let mut h = zoo::build(Model::Llama4Scout, Model::Llama4Scout.file_type()).expect("header");
        h.metadata
            .push(("llama4.attention.sliding_window".into(), Value::U32(0)));
        let off = profile(&h).expect("profile");
        assert_eq!(counts(&off), [("full", 48)]);
    }

    /// Qwen3-Next: every 4th layer attends, the others are delta-nets, and
    /// the MTP block has no cache and no loaded weights.
    #[test]
    fn qwen3next_is_hybrid_with_a_skipped_mtp_block() {
        let p = zoo_profile(Model::Qwen3Next80B);
        assert_eq!(counts(&p), [("recurrent", 36), ("full", 12), ("mtp", 1)]);
        assert_eq!(p.layer_kind(3), LayerKind::Full);
        assert!(p.layers[48].tensors.is_empty(), "MTP weights are skipped");
        assert!(
            p.skipped
                .iter()
                .any(|t| t.name == "blk.48.nextn.eh_proj.weight")
        );
        let r = p.recurrent.expect("state keys");
        assert_eq!(
            (r.d_conv, r.d_inner, r.d_state, r.n_group),
            (4, 4096, 128, 16)
        );
    }

    #[test]
    fn granite_hybrid_recurrent_layers_have_no_kv_heads() {
        let p = zoo_profile(Model::Granite4HTiny);
        assert_eq!(counts(&p), [("recurrent", 36), ("full", 4)]);
        let attention: Vec<usize> = (0..40).filter(|&il| p.is_attention_layer(il)).collect();
        assert_eq!(attention, [5, 15, 25, 35]);
    }

    /// LFM2: the convolution layers (0 KV heads) keep the last two inputs
    /// of a 2048-wide convolution (`n_embd_r`), and no SSM state.
    #[test]
    fn lfm2_convolution_layers_keep_a_short_state() {
        let p = zoo_profile(Model::Lfm2_1_2B);
        assert_eq!(counts(&p), [("recurrent", 10), ("full", 6)]);
        let attention: Vec<usize> = (0..16).filter(|&il| p.is_attention_layer(il)).collect();
        assert_eq!(attention, [2, 5, 8, 10, 12, 14]);
        let r = p.recurrent.expect("shortconv.l_cache");
        assert_eq!((r.d_conv, r.d_inner, r.d_state), (3, 2048, 0));
    }

    /// Gemma 3n: the first 20 layers cache (a full layer every fifth, from
    /// the `sliding_window_pattern` flags), the last 10 reuse theirs.
    #[test]
    fn gemma3n_shares_the_cache_of_its_first_twenty_layers() {
        let p = zoo_profile(Model::Gemma3nE2B);
        assert_eq!(counts(&p), [("sliding", 16), ("full", 4), ("shared", 10)]);
        let full: Vec<usize> = (0..30)
            .filter(|&il| p.is_attention_layer(il) && !p.is_swa_layer(il))
            .collect();
        assert_eq!(full, [4, 9, 14, 19]);
    }

    /// Gemma 4 E2B: the first 15 layers cache (a full layer every fifth),
    /// the last 20 reuse theirs.
    #[test]
    fn gemma4_e2b_shares_the_cache_of_its_first_fifteen_layers() {
        let p = zoo_profile(Model::Gemma4E2B);
        assert_eq!(counts(&p), [("sliding", 12), ("full", 3), ("shared", 20)]);
    }

    #[test]
    fn glm_mtp_block_is_skipped() {
        let p = zoo_profile(Model::Glm45Air);
        assert_eq!(counts(&p), [("full", 46), ("mtp", 1)]);
        assert!(p.layers[46].tensors.is_empty());
        assert!(!p.skipped.is_empty());
    }

    /// A two-layer header of `arch` with `extra` keys.
    fn header(arch: &str, n_layer: u32, extra: &[(&str, Value)]) -> ModelProfile {
        let k = |s: &str| format!("{arch}.{s}");
        let mut b = HeaderBuilder::new()
            .kv("general.architecture", arch)
            .kv(k("block_count"), n_layer)
            .kv(k("embedding_length"), 32u32)
            .kv(k("attention.head_count"), 4u32)
            .kv(k("vocab_size"), 8u32)
            .tensor("token_embd.weight", &[32, 8], GgmlType::F32);
        for (key, v) in extra {
            b = b.kv(k(key), v.clone());
        }
        for il in 0..n_layer {
            b = b.tensor(format!("blk.{il}.attn_q.weight"), &[32, 32], GgmlType::F32);
        }
        profile(&b.build().expect("header")).expect("profile")
    }

    /// Per-architecture window rules of `src/models/*.cpp`.
    #[test]
    fn window_rules_follow_each_loader() {
        let w = |v: u32| ("attention.sliding_window", Value::U32(v));
        // exaone4: only the 64-layer model has windows, 4096 unless the key says.
        assert!(header("exaone4", 30, &[w(4096)]).swa.is_none());
        let big = header("exaone4", 64, &[]);
        assert_eq!(big.swa.as_ref().map(|s| s.window), Some(4096));
        assert_eq!(counts(&big), [("sliding", 48), ("full", 16)]);
        // smallthinker: any window means 4096, the dense layer first.
        let st = header("smallthinker", 8, &[w(100)]);
        assert_eq!(st.swa.as_ref().map(|s| s.window), Some(4096));
        assert_eq!(st.layer_kind(0), LayerKind::Full);
        assert_eq!(st.layer_kind(1), LayerKind::Sliding);
        // gemma2 defaults to 4096; phi3 ignores its window.
        assert_eq!(header("gemma2", 4, &[]).swa.map(|s| s.window), Some(4096));
        assert!(header("phi3", 4, &[w(2047)]).swa.is_none());
        // Array-only architectures without the array have no window.
        assert!(header("step35", 4, &[w(512)]).swa.is_none());
    }
}
