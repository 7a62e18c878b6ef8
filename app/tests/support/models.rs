//! GGUF files for hub tests: tiny real models (a few hundred kB, real
//! bytes, so a download can be hashed), split sets as `gguf-split` writes
//! them, and sparse synthetic models of real size for header-only tests.

#![allow(dead_code)] // Each test binary uses a different part of it.

use std::io::Write;
use std::path::{Path, PathBuf};

use headroom_planner::gguf::writer::{HeaderBuilder, create_sparse_file, to_bytes};
use headroom_planner::gguf::{Array, ArrayItems, GgmlType, Header};
use headroom_planner::synth::{self, Mix, Shape};

/// A two-layer llama with a 256-token vocabulary, every matrix in `ty`
/// (Q8_0 or F16: their blocks divide its 64-wide rows).
pub fn tiny_header(ty: GgmlType) -> Header {
    let (e, ff, v) = (64u64, 128u64, 256u64);
    let ftype: u32 = match ty {
        GgmlType::F16 => 1,
        _ => 7,
    };
    let tokens: Vec<String> = (0..v).map(|i| format!("t{i}")).collect();
    let mut b = HeaderBuilder::new()
        .kv("general.architecture", "llama")
        .kv("general.name", format!("tiny {}", ty.name()))
        .kv("general.file_type", ftype)
        .kv("llama.context_length", 2048u32)
        .kv("llama.embedding_length", 64u32)
        .kv("llama.block_count", 2u32)
        .kv("llama.feed_forward_length", 128u32)
        .kv("llama.attention.head_count", 4u32)
        .kv("llama.attention.head_count_kv", 4u32)
        .kv("llama.attention.layer_norm_rms_epsilon", 1e-5f32)
        .kv("llama.rope.freq_base", 10000f32)
        .kv("llama.rope.dimension_count", 16u32)
        .kv("llama.vocab_size", 256u32)
        .kv("tokenizer.ggml.model", "llama")
        .kv(
            "tokenizer.ggml.tokens",
            Array::new(ArrayItems::String(tokens)),
        )
        .kv(
            "tokenizer.ggml.scores",
            Array::new(ArrayItems::F32(vec![0.0; 256])),
        )
        .kv(
            "tokenizer.ggml.token_type",
            Array::new(ArrayItems::I32(vec![1; 256])),
        )
        .tensor("token_embd.weight", &[e, v], ty)
        .tensor("output_norm.weight", &[e], GgmlType::F32)
        .tensor("output.weight", &[e, v], ty);
    for l in 0..2 {
        let n = |s: &str| format!("blk.{l}.{s}.weight");
        b = b
            .tensor(n("attn_norm"), &[e], GgmlType::F32)
            .tensor(n("attn_q"), &[e, e], ty)
            .tensor(n("attn_k"), &[e, e], ty)
            .tensor(n("attn_v"), &[e, e], ty)
            .tensor(n("attn_output"), &[e, e], ty)
            .tensor(n("ffn_norm"), &[e], GgmlType::F32)
            .tensor(n("ffn_gate"), &[e, ff], ty)
            .tensor(n("ffn_up"), &[e, ff], ty)
            .tensor(n("ffn_down"), &[ff, e], ty);
    }
    b.build().expect("a valid tiny header")
}

/// The bytes of a file with header `h` and pseudo-random tensor data
/// (distinct per `seed`, so files hash differently).
pub fn file_bytes(h: &Header, seed: u64) -> Vec<u8> {
    let mut out = to_bytes(h).expect("serializable header");
    let data = h.data_size().expect("data size");
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    out.reserve(usize::try_from(data).expect("small"));
    for _ in 0..data {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push((x >> 24) as u8);
    }
    out
}

/// Split `whole` into `n` parts as `gguf-split` does: all metadata in the
/// first, `split.no` / `split.count` / `split.tensors.count` in each.
pub fn split_headers(whole: &Header, n: usize) -> Vec<Header> {
    let per = whole.tensors.len().div_ceil(n);
    let total = i32::try_from(whole.tensors.len()).expect("few tensors");
    whole
        .tensors
        .chunks(per)
        .enumerate()
        .map(|(i, chunk)| {
            let mut b = HeaderBuilder::new();
            if i == 0 {
                for (k, v) in &whole.metadata {
                    b = b.kv(k.clone(), v.clone());
                }
            }
            b = b
                .kv("split.no", u16::try_from(i).expect("few parts"))
                .kv("split.count", u16::try_from(n).expect("few parts"))
                .kv("split.tensors.count", total);
            for t in chunk {
                b = b.tensor(t.name.clone(), &t.dims, t.ty);
            }
            b.build().expect("a valid part")
        })
        .collect()
}

/// `base-0000i-of-0000n.gguf`.
pub fn part_name(base: &str, i: usize, n: usize) -> String {
    format!("{base}-{i:05}-of-{n:05}.gguf")
}

/// Write `bytes` to `dir/name`.
pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::File::create(&p)
        .and_then(|mut f| f.write_all(bytes))
        .expect("write model");
    p
}

/// A sparse synthetic model of real size at `dir/name`.
pub fn sparse(dir: &Path, name: &str, shape: Shape, mix: Mix) -> (PathBuf, Header) {
    let p = dir.join(name);
    let h = synth::write_sparse(&p, shape, mix).expect("sparse model");
    (p, h)
}

/// Sparse parts of a split synthetic model: `dir/base-0000i-of-0000n.gguf`.
pub fn sparse_split(dir: &Path, base: &str, shape: Shape, mix: Mix, n: usize) -> Vec<PathBuf> {
    let whole = synth::build(shape, mix).expect("synthetic");
    split_headers(&whole, n)
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let p = dir.join(part_name(base, i + 1, n));
            create_sparse_file(&p, h).expect("sparse part");
            p
        })
        .collect()
}

/// A fake sha256 for sparse files (the test server would otherwise read
/// gigabytes of holes to hash them).
pub fn fake_sha(seed: u8) -> String {
    format!("{seed:02x}").repeat(32)
}
