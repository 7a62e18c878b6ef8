//! The models the accounting tests load (`cli/planner_vs_llama.rs` on the
//! CPU, `run/rpc.rs` across RPC workers): three real shapes in each type
//! mix, written as sparse synthetic files, and the real base demo model;
//! and the contexts each is loaded at.

use std::path::{Path, PathBuf};

use headroom_planner::synth::{self, Mix, Shape};

/// One model file of the accounting tests.
pub struct Case {
    /// "llama-8b Q4_K_M", "gemma-3-270m Q4_K_M (real)".
    pub label: String,
    pub path: PathBuf,
    pub n_ctx_train: u32,
    #[allow(dead_code)] // the CPU-only test does not place layers
    pub n_layer: u32,
}

/// The synthetic shapes in every mix, written into `dir`, then `demo`.
pub fn cases(dir: &Path, demo: PathBuf) -> Vec<Case> {
    let mut cases = Vec::new();
    for shape in [Shape::Llama8B, Shape::Gemma3_4B, Shape::Qwen3Moe30BA3B] {
        for mix in Mix::ALL {
            let path = dir.join(format!("{}-{}.gguf", shape.name(), mix.name()));
            synth::write_sparse(&path, shape, mix).expect("sparse synthetic model");
            let spec = shape.spec();
            cases.push(Case {
                label: format!("{} {}", shape.name(), mix.name()),
                path,
                n_ctx_train: spec.n_ctx_train,
                n_layer: spec.n_layer,
            });
        }
    }
    cases.push(Case {
        label: "gemma-3-270m Q4_K_M (real)".into(),
        path: demo,
        n_ctx_train: 32768,
        n_layer: 18,
    });
    cases
}

/// 512, 4096 and 32768 tokens, as far as the training context allows.
pub fn contexts(n_ctx_train: u32) -> Vec<u32> {
    [512, 4096, 32768]
        .into_iter()
        .filter(|&c| c <= n_ctx_train.max(4096))
        .collect()
}
