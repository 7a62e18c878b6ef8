//! Inputs the fuzzers (`fuzz/`, scripts/fuzz.sh) found to crash the planner,
//! kept as plain tests so the normal suite guards the fixes.

use headroom_planner::gguf::writer::HeaderBuilder;
use headroom_planner::gguf::{GgmlType, Header};
use headroom_planner::profile::{self, MAX_LAYERS, ProfileError};

/// A one-layer llama whose `block_count` claims `n_layer` layers.
fn llama_claiming(n_layer: u32) -> Header {
    HeaderBuilder::new()
        .kv("general.architecture", "llama")
        .kv("llama.block_count", n_layer)
        .kv("llama.embedding_length", 32u32)
        .kv("llama.attention.head_count", 4u32)
        .kv("llama.vocab_size", 8u32)
        .tensor("token_embd.weight", &[32, 8], GgmlType::F32)
        .tensor("blk.0.attn_q.weight", &[32, 32], GgmlType::F32)
        .build()
        .expect("the header itself is valid")
}

/// gguf_header: a 2,000-byte file with `block_count = 2^31` made the profile
/// allocate per-layer vectors of 2^31 entries (8 GiB, then 100 GiB) before
/// noticing the layers have no tensors. llama.cpp asserts at 512 layers.
#[test]
fn block_count_past_llama_cpp_limit_is_refused_before_allocating() {
    for n in [MAX_LAYERS + 1, 1 << 31, u32::MAX] {
        match profile::profile(&llama_claiming(n)) {
            Err(ProfileError::Invalid { key, why }) => {
                assert_eq!(key, "llama.block_count");
                assert!(why.contains("512"), "{why}");
            }
            other => panic!("{n} layers gave {other:?}"),
        }
    }
    // At the limit the count is accepted, and the missing layers are the error.
    assert!(matches!(
        profile::profile(&llama_claiming(MAX_LAYERS)),
        Err(ProfileError::Inconsistent(_))
    ));
}
