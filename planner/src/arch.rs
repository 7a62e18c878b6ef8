//! What the planner knows about llama.cpp's architectures beyond the GGUF
//! header: which names llama.cpp accepts and the sliding-window layer pattern
//! each architecture falls back to when the header does not spell it out.
//!
//! Both tables mirror the vendored llama.cpp (llama-cpp-sys-2 0.1.160):
//! `src/llama-arch.cpp` (`LLM_ARCH_NAMES`) and the `load_swa_pattern`
//! calls in `src/models/*.cpp`.

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

/// How an architecture lays out its sliding-window layers when the header
/// carries only a window size (llama.cpp `load_swa_pattern(ml, n, dense_first)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwaDefault {
    /// Every `n_pattern`-th layer is a full-attention layer.
    pub n_pattern: u32,
    /// The dense layer comes first in each group (else last).
    pub dense_first: bool,
    /// Window used when the header has none (gemma2 hard-codes 4096).
    pub default_window: Option<u32>,
    /// The architecture only uses a sliding window when the header sets one.
    pub needs_window_key: bool,
}

/// The fallback sliding-window pattern of an architecture, if it has one.
#[must_use]
pub fn swa_default(arch: &str) -> Option<SwaDefault> {
    let (n_pattern, dense_first, default_window, needs_window_key) = match arch {
        "gemma2" => (2, false, Some(4096), false),
        "gemma3" => (6, false, None, true),
        "gemma-embedding" => (6, false, None, false),
        "gemma3n" => (5, false, None, false),
        "gpt-oss" => (2, false, None, false),
        "cohere2" | "exaone-moe" | "muse-glimmer" => (4, false, None, false),
        "cohere2moe" => (4, true, None, false),
        "afmoe" | "exaone4" | "mellum" | "olmo2" => (4, false, None, true),
        "laguna" | "smallthinker" => (4, true, None, true),
        "plamo3" => (8, false, None, true),
        _ => return None,
    };
    Some(SwaDefault {
        n_pattern,
        dense_first,
        default_window,
        needs_window_key,
    })
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
