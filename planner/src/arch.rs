//! What the planner knows about llama.cpp's architectures beyond the GGUF
//! header: which names llama.cpp accepts, the window each architecture
//! applies to which layers, which of its layers are recurrent, whether it
//! skips its multi-token-prediction blocks, and which architectures the
//! planner has been held to llama.cpp's accounting on.
//!
//! Every table mirrors the vendored llama.cpp (llama-cpp-sys-2 0.1.160):
//! `src/llama-arch.cpp` (`LLM_ARCH_NAMES`, `llm_arch_is_recurrent`,
//! `llm_arch_is_hybrid`) and the `load_arch_hparams` / `load_arch_tensors`
//! of `src/models/*.cpp`.

/// Architecture names the vendored llama.cpp can load (`LLM_ARCH_NAMES`,
/// without "clip", which is a projector, not a language model).
pub const KNOWN_ARCHITECTURES: &[&str] = &[
    "llama",
    "llama4",
    "deci",
    "falcon",
    "grok",
    "gpt2",
    "gptj",
    "gptneox",
    "mpt",
    "baichuan",
    "starcoder",
    "refact",
    "bert",
    "modern-bert",
    "nomic-bert",
    "nomic-bert-moe",
    "neo-bert",
    "jina-bert-v2",
    "jina-bert-v3",
    "eurobert",
    "bloom",
    "stablelm",
    "qwen",
    "qwen2",
    "qwen2moe",
    "qwen2vl",
    "qwen3",
    "qwen3moe",
    "qwen3next",
    "qwen3vl",
    "qwen3vlmoe",
    "qwen35",
    "qwen35moe",
    "clef",
    "qwen4exp",
    "phi2",
    "phi3",
    "phimoe",
    "plamo",
    "plamo2",
    "plamo3",
    "codeshell",
    "orion",
    "internlm2",
    "minicpm",
    "minicpm3",
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3n",
    "gemma4",
    "gemma4-assistant",
    "gemma-embedding",
    "starcoder2",
    "mamba",
    "mamba2",
    "maple",
    "jamba",
    "falcon-h1",
    "xverse",
    "command-r",
    "cohere2",
    "cohere2moe",
    "dbrx",
    "olmo",
    "olmo2",
    "olmoe",
    "muse-glimmer",
    "openelm",
    "arctic",
    "deepseek",
    "deepseek2",
    "deepseek2-ocr",
    "deepseek32",
    "deepseek4",
    "chatglm",
    "glm4",
    "glm4moe",
    "glm-dsa",
    "bitnet",
    "t5",
    "t5encoder",
    "jais",
    "jais2",
    "nemotron",
    "nemotron_h",
    "nemotron_h_moe",
    "exaone",
    "exaone4",
    "exaone-moe",
    "rwkv6",
    "rwkv6qwen2",
    "rwkv7",
    "arwkv7",
    "granite",
    "granitemoe",
    "granitehybrid",
    "graniteswitch",
    "granite_swa",
    "chameleon",
    "wavtokenizer-dec",
    "plm",
    "bailingmoe",
    "bailingmoe2",
    "bailingmoe3",
    "dots1",
    "dots3note",
    "arcee",
    "afmoe",
    "laguna",
    "ernie4_5",
    "ernie4_5-moe",
    "hunyuan-moe",
    "hunyuan-dense",
    "hunyuan_vl",
    "hy_v3",
    "hy_v4",
    "smollm3",
    "gpt-oss",
    "lfm2",
    "lfm2moe",
    "dream",
    "smallthinker",
    "llada",
    "llada-moe",
    "seed_oss",
    "grovemoe",
    "apertus",
    "minimax-01",
    "hrm_text",
    "minimax-m2",
    "minimax-m3",
    "cogvlm",
    "rnd1",
    "pangu-embedded",
    "mistral3",
    "eagle3",
    "dflash",
    "mistral4",
    "paddleocr",
    "mimo2",
    "step35",
    "spark2_5",
    "llama-embed",
    "maincoder",
    "kimi-linear",
    "kimi-k3",
    "glm5-next",
    "talkie",
    "mellum",
    "nanbeige",
    "qwen3tts",
    "pockettts",
];

/// Whether llama.cpp knows this architecture name.
#[must_use]
pub fn is_known(arch: &str) -> bool {
    KNOWN_ARCHITECTURES.contains(&arch)
}

/// How a windowed layer masks the cache (`enum llama_swa_type`). Both keep
/// the same number of cells (`llama-kv-cache-iswa.cpp`: the window plus a
/// ubatch, padded to 256); the kind says why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowKind {
    /// Each token sees the last `window` tokens (`LLAMA_SWA_TYPE_STANDARD`).
    Sliding,
    /// Each token sees its own chunk of `window` tokens (`LLAMA_SWA_TYPE_CHUNKED`, Llama 4).
    Chunked,
}

/// Where the window size comes from, as each architecture's `load_arch_hparams` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSize {
    /// `{arch}.attention.sliding_window`, required (llama.cpp refuses a file without it).
    Key,
    /// The key when present, else this size (gemma2's 4096).
    KeyOr(u32),
    /// Only when the key is present and above 0; no window otherwise.
    KeyIfPositive,
    /// This size whenever the key is present and above 0, whatever it says
    /// (smallthinker's 4096).
    FixedIfKey(u32),
    /// This size unless the key is present and 0 (Llama 4's chunks of 8192).
    FixedUnlessZero(u32),
}

/// Which layers use the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowLayers {
    /// `load_swa_pattern(ml, n, dense_first)`: the per-layer array or the
    /// pattern key if the header has one, else every `n`-th layer is full
    /// (the first of each group when `dense_first`, else the last).
    Pattern {
        /// Layers per group.
        n: u32,
        /// The full-attention layer opens each group.
        dense_first: bool,
    },
    /// Only the per-layer array `sliding_window_pattern` (required).
    Array,
    /// Every attention layer of a hybrid (lfm2: the others are recurrent).
    AllAttention,
}

/// An architecture's sliding-window (or chunked) rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowRule {
    /// How the window masks.
    pub kind: WindowKind,
    /// Where its size comes from.
    pub size: WindowSize,
    /// Which layers use it.
    pub layers: WindowLayers,
}

/// The window rule of an architecture with `n_trunk` layers (the blocks
/// before any MTP block), if it has one: the `swa_type` settings of
/// `src/models/<arch>.cpp` in the vendored llama.cpp. Architectures llama.cpp
/// runs without a KV cache (embedding models) and those with their own cache
/// types (deepseek4, dflash, gemma4-assistant) are left out.
#[must_use]
pub fn window_rule(arch: &str, n_trunk: u32) -> Option<WindowRule> {
    use WindowLayers::{AllAttention, Array, Pattern};
    use WindowSize::{FixedIfKey, FixedUnlessZero, Key, KeyIfPositive, KeyOr};
    let every = |n, dense_first| Pattern { n, dense_first };
    let (kind, size, layers) = match arch {
        "gemma2" => (WindowKind::Sliding, KeyOr(4096), every(2, false)),
        "gemma3" => (WindowKind::Sliding, KeyIfPositive, every(6, false)),
        "gemma3n" => (WindowKind::Sliding, Key, every(5, false)),
        "gpt-oss" => (WindowKind::Sliding, Key, every(2, false)),
        "cohere2" | "exaone-moe" | "muse-glimmer" => (WindowKind::Sliding, Key, every(4, false)),
        "cohere2moe" => (WindowKind::Sliding, Key, every(4, true)),
        "afmoe" | "mellum" | "olmo2" => (WindowKind::Sliding, KeyIfPositive, every(4, false)),
        // Only the 32B (64 layers) has windows; its size defaults to 4096.
        "exaone4" if n_trunk == 64 => (WindowKind::Sliding, KeyOr(4096), every(4, false)),
        "laguna" => (WindowKind::Sliding, KeyIfPositive, every(4, true)),
        "smallthinker" => (WindowKind::Sliding, FixedIfKey(4096), every(4, true)),
        "plamo3" => (WindowKind::Sliding, KeyIfPositive, every(8, false)),
        "llama4" => (WindowKind::Chunked, FixedUnlessZero(8192), every(4, false)),
        "gemma4" | "granite_swa" | "maple" | "mimo2" | "spark2_5" | "step35" | "dots3note" => {
            (WindowKind::Sliding, Key, Array)
        }
        "lfm2" => (WindowKind::Sliding, KeyIfPositive, AllAttention),
        _ => return None,
    };
    Some(WindowRule { kind, size, layers })
}

/// The window rule an architecture can have, whatever its size (exaone4's
/// applies to its 64-layer model only: see [`window_rule`]).
#[must_use]
pub fn swa_default(arch: &str) -> Option<WindowRule> {
    window_rule(arch, 64)
}

/// Which layers of an architecture keep a recurrent state instead of (or,
/// for falcon-h1, besides) a KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecurrentRule {
    /// Every layer (`llm_arch_is_recurrent`: Mamba, Mamba-2, RWKV).
    All,
    /// Layers with 0 KV heads (granitehybrid, jamba, lfm2, plamo2, kimi-linear, …).
    NoKvHeads,
    /// nemotron_h: 0 KV heads and no FFN; a layer with an FFN has neither
    /// cache nor state (`filter_attn`/`filter_recr` in `create_memory`).
    NoKvHeadsNoFfn,
    /// `attention.recurrent_layers` per layer, else all but every
    /// `full_attention_interval`-th layer (4 when absent): Qwen3-Next,
    /// Qwen3.5, MiniMax-01.
    Interval,
    /// Every layer has both a KV cache and a state (falcon-h1).
    Parallel,
}

/// The recurrent-layer rule of an architecture, if it has recurrent layers
/// (`llm_arch_is_recurrent`, `llm_arch_is_hybrid` and each hybrid's
/// `load_arch_hparams`).
#[must_use]
pub fn recurrent_rule(arch: &str) -> Option<RecurrentRule> {
    Some(match arch {
        "mamba" | "mamba2" | "rwkv6" | "rwkv6qwen2" | "rwkv7" | "arwkv7" => RecurrentRule::All,
        "jamba" | "plamo2" | "granitehybrid" | "lfm2" | "lfm2moe" | "kimi-linear" | "kimi-k3"
        | "glm5-next" | "bailingmoe3" => RecurrentRule::NoKvHeads,
        "nemotron_h" | "nemotron_h_moe" => RecurrentRule::NoKvHeadsNoFfn,
        "qwen3next" | "qwen35" | "qwen35moe" | "qwen4exp" | "minimax-01" => RecurrentRule::Interval,
        "falcon-h1" => RecurrentRule::Parallel,
        _ => return None,
    })
}

/// Architectures whose loader skips the multi-token-prediction blocks
/// (`nextn_predict_layers`, the last blocks): always (`TENSOR_SKIP`: no MTP
/// graph yet) or unless asked to load them (`TENSOR_SKIP` when
/// `!ml.load_mtp`, llama.cpp's default). Their weights are never allocated.
pub const SKIPS_MTP_WEIGHTS: &[&str] = &[
    "bailingmoe2",
    "dots3note",
    "exaone-moe",
    "exaone4",
    "glm4",
    "bailingmoe3",
    "cohere2moe",
    "deepseek2",
    "mistral4",
    "deepseek32",
    "deepseek4",
    "glm-dsa",
    "glm4moe",
    "glm5-next",
    "hy_v3",
    "mimo2",
    "nemotron_h",
    "nemotron_h_moe",
    "qwen35",
    "qwen35moe",
    "qwen3next",
    "qwen4exp",
    "step35",
];

/// Architectures that read `attention.key_length_mla` and
/// `attention.value_length_mla`: with both in the header
/// (`llama_hparams::is_mla`) their cache holds one latent K row per token
/// and no V; without them (files written before llama.cpp split
/// `attn_kv_b`) it holds full K and V per head.
pub const READS_MLA_KEYS: &[&str] = &[
    "bailingmoe3",
    "deepseek2",
    "mistral4",
    "deepseek32",
    "dots3note",
    "glm-dsa",
    "glm5-next",
    "hy_v4",
    "kimi-k3",
    "kimi-linear",
];

/// The first layer without its own KV cache: later layers reuse an earlier
/// layer's (`n_layer_kv_from_start`: gemma3n's 20, gemma4's
/// `block_count - attention.shared_kv_layers`).
#[must_use]
pub fn kv_shared_from(arch: &str, n_layer: u32, shared_kv_layers: Option<u32>) -> Option<u32> {
    match arch {
        "gemma3n" => Some(20.min(n_layer)),
        "gemma4" => Some(n_layer.saturating_sub(shared_kv_layers.unwrap_or(0))),
        _ => None,
    }
}

/// Architectures whose loader creates a tied output (`token_embd.weight`
/// with `TENSOR_DUPLICATED`) before the token embedding itself: on the CPU
/// the output finds no tensor to share and is allocated a second time
/// (`llama_model_loader::create_tensor`): gemma3n and gemma4 (both measured:
/// the CPU weights exceed the file's tensors by exactly the embedding).
pub const TIED_OUTPUT_CREATED_FIRST: &[&str] = &["gemma3n", "gemma4"];

/// Architectures the planner is held to llama.cpp's own accounting on: a
/// synthetic file of each (`synth::Shape`, `synth::zoo`) is compared with a
/// `no_alloc` load, weights, KV cache (recurrent state included) and
/// compute buffer, at several contexts, sequence counts and flash-attention
/// settings (`memory/tests.rs`, `app/tests/cli/planner_vs_llama.rs`). Plans
/// of any other architecture say they are unverified.
pub const VERIFIED: &[&str] = &[
    "llama",
    "gemma3",
    "qwen3moe",
    "deepseek2",
    "llama4",
    "qwen3next",
    "glm4moe",
    "granitehybrid",
    "gpt-oss",
    "phi3",
    "qwen2",
    "qwen3",
    "gemma2",
    "glm4",
    "gemma3n",
    "qwen35",
    "qwen35moe",
    "lfm2",
    "gemma4",
    "mistral3",
    "olmo2",
    "smollm3",
];

/// Whether the planner's figures for this architecture were checked
/// against llama.cpp's (see [`VERIFIED`]).
#[must_use]
pub fn is_verified(arch: &str) -> bool {
    VERIFIED.contains(&arch)
}

/// Which layers use the sliding window, as llama.cpp's
/// `llama_hparams::set_swa_pattern` lays them out.
#[must_use]
pub fn swa_layers(n_layer: u32, n_pattern: u32, dense_first: bool) -> Vec<bool> {
    (0..n_layer)
        .map(|il| {
            if n_pattern == 0 {
                true
            } else if dense_first {
                il % n_pattern != 0
            } else {
                il % n_pattern < n_pattern - 1
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemma3_has_one_global_layer_in_six() {
        let layers = swa_layers(18, 6, false);
        let global: Vec<usize> = layers
            .iter()
            .enumerate()
            .filter(|(_, s)| !**s)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(global, vec![5, 11, 17]);
    }

    #[test]
    fn dense_first_puts_the_global_layer_first() {
        let layers = swa_layers(8, 4, true);
        assert_eq!(
            layers,
            vec![false, true, true, true, false, true, true, true]
        );
    }

    #[test]
    fn unknown_and_known_names() {
        assert!(is_known("llama"));
        assert!(is_known("qwen3moe"));
        assert!(!is_known("clip"));
        assert!(!is_known("totally-new-arch"));
    }
}
