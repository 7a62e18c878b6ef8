//! The hostile GGUF corpus: a tiny but valid llama-shaped model, and that
//! model (or a raw header) broken one way per case, each with the words its
//! error message must contain. Generated rather than kept as binary fixtures
//! so each case says in code what is wrong with it.

use std::path::{Path, PathBuf};

use headroom_planner::gguf::writer::{HeaderBuilder, to_bytes};
use headroom_planner::gguf::{Array, ArrayItems, GgmlType, Header, Value};

/// A tiny llama-shaped model, valid unless a field says otherwise.
#[derive(Clone)]
pub struct Tiny {
    arch: &'static str,
    /// `llama.block_count`.
    block_count: u32,
    /// Layers that actually have tensors.
    layers: u32,
    n_head: u32,
    n_tokens: usize,
    /// Rows of `token_embd.weight` (and `output.weight`).
    embd_rows: u64,
}

impl Default for Tiny {
    fn default() -> Self {
        Tiny {
            arch: "llama",
            block_count: 2,
            layers: 2,
            n_head: 4,
            n_tokens: 64,
            embd_rows: 64,
        }
    }
}

const N_EMBD: u64 = 256;
const N_FF: u64 = 512;

impl Tiny {
    fn builder(&self) -> HeaderBuilder {
        let k = |s: &str| format!("{}.{s}", self.arch);
        let tokens: Vec<String> = (0..self.n_tokens).map(|i| format!("t{i}")).collect();
        let mut b = HeaderBuilder::new()
            .kv("general.architecture", self.arch)
            .kv("general.name", "hostile tiny")
            .kv(k("context_length"), 2048u32)
            .kv(k("embedding_length"), N_EMBD as u32)
            .kv(k("block_count"), self.block_count)
            .kv(k("feed_forward_length"), N_FF as u32)
            .kv(k("attention.head_count"), self.n_head)
            .kv(k("attention.head_count_kv"), 4u32)
            .kv(k("attention.layer_norm_rms_epsilon"), 1e-5f32)
            .kv(k("rope.freq_base"), 10000.0f32)
            .kv("tokenizer.ggml.model", "llama")
            .kv(
                "tokenizer.ggml.tokens",
                Array::new(ArrayItems::String(tokens)),
            )
            .tensor(
                "token_embd.weight",
                &[N_EMBD, self.embd_rows],
                GgmlType::F16,
            );
        for il in 0..self.layers {
            let t = |n: &str| format!("blk.{il}.{n}.weight");
            b = b
                .tensor(t("attn_norm"), &[N_EMBD], GgmlType::F32)
                .tensor(t("attn_q"), &[N_EMBD, N_EMBD], GgmlType::F16)
                .tensor(t("attn_k"), &[N_EMBD, N_EMBD], GgmlType::F16)
                .tensor(t("attn_v"), &[N_EMBD, N_EMBD], GgmlType::F16)
                .tensor(t("attn_output"), &[N_EMBD, N_EMBD], GgmlType::F16)
                .tensor(t("ffn_norm"), &[N_EMBD], GgmlType::F32)
                .tensor(t("ffn_gate"), &[N_EMBD, N_FF], GgmlType::F16)
                .tensor(t("ffn_up"), &[N_EMBD, N_FF], GgmlType::F16)
                .tensor(t("ffn_down"), &[N_FF, N_EMBD], GgmlType::F16);
        }
        b.tensor("output_norm.weight", &[N_EMBD], GgmlType::F32)
            .tensor("output.weight", &[N_EMBD, self.embd_rows], GgmlType::F16)
    }

    pub fn header(&self) -> Header {
        self.builder()
            .build()
            .unwrap_or_else(|e| panic!("the tiny model does not build: {e}"))
    }
}

/// A file to write: header bytes, then (sparse) zeros up to `len`.
pub struct File {
    bytes: Vec<u8>,
    len: u64,
}

/// The header serialized, with a data section as long as its tensors.
pub fn whole(h: &Header) -> File {
    let bytes = to_bytes(h).unwrap_or_else(|e| panic!("to_bytes: {e}"));
    let data = h
        .data_size()
        .unwrap_or_else(|| panic!("data size overflows"));
    let len = (bytes.len() as u64).max(h.data_offset + data);
    File { bytes, len }
}

/// Just these bytes.
fn raw(bytes: Vec<u8>) -> File {
    let len = bytes.len() as u64;
    File { bytes, len }
}

fn prefix(version: u32, n_tensors: u64, n_kv: u64) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&version.to_le_bytes());
    b.extend_from_slice(&n_tensors.to_le_bytes());
    b.extend_from_slice(&n_kv.to_le_bytes());
    b
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as u64).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

/// Overwrites the ggml type id of tensor `name` in serialized header bytes.
fn patch_tensor_type(bytes: &mut [u8], name: &str, id: u32) {
    let mut needle = (name.len() as u64).to_le_bytes().to_vec();
    needle.extend_from_slice(name.as_bytes());
    // Tensor infos follow the metadata, so the last occurrence is the tensor's.
    let at = bytes
        .windows(needle.len())
        .rposition(|w| w == needle.as_slice())
        .unwrap_or_else(|| panic!("{name} not in header"));
    let dims_at = at + needle.len();
    let n_dims =
        u32::from_le_bytes(bytes[dims_at..dims_at + 4].try_into().expect("4 bytes")) as usize;
    let ty_at = dims_at + 4 + 8 * n_dims;
    bytes[ty_at..ty_at + 4].copy_from_slice(&id.to_le_bytes());
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| (*s).to_string()).collect()
}

/// Every hostile case: file name, contents, words the error must contain.
pub fn corpus() -> Vec<(String, File, Vec<String>)> {
    let tiny = Tiny::default().header();
    let good = to_bytes(&tiny).expect("bytes");
    let mut out: Vec<(String, File, Vec<String>)> = Vec::new();

    let header_bytes = usize::try_from(tiny.header_bytes).expect("small");
    let mut cuts = vec![
        0,
        3,
        4,
        7,
        8,
        15,
        16,
        23,
        24,
        30,
        100,
        header_bytes / 2,
        header_bytes - 1,
    ];
    if tiny.data_offset > tiny.header_bytes {
        // Inside the padding before the data section.
        cuts.push(usize::try_from(tiny.data_offset).expect("small") - 1);
    }
    for cut in cuts {
        out.push((
            format!("truncated-at-{cut}"),
            raw(good[..cut].to_vec()),
            words(&["truncated"]),
        ));
    }

    let mut b = good.clone();
    b[..4].copy_from_slice(b"GGML");
    out.push(("bad-magic".into(), raw(b), words(&["not a GGUF file"])));
    out.push((
        "text-file".into(),
        raw(b"#!/bin/sh\necho not a model\n".to_vec()),
        words(&["not a GGUF file"]),
    ));
    for (version, needle) in [
        (1u32, "version 1"),
        (0, "version 0"),
        (4, "version 4"),
        (0x0300_0000, "big-endian"),
    ] {
        let mut b = good.clone();
        b[4..8].copy_from_slice(&version.to_le_bytes());
        out.push((format!("version-{version:#x}"), raw(b), words(&[needle])));
    }

    // An array claiming 2^40 elements in a file of 50 bytes.
    let mut b = prefix(3, 0, 1);
    put_str(&mut b, "a");
    b.extend_from_slice(&9u32.to_le_bytes()); // array
    b.extend_from_slice(&0u32.to_le_bytes()); // of u8
    b.extend_from_slice(&(1u64 << 40).to_le_bytes());
    out.push((
        "array-2e40".into(),
        raw(b),
        words(&["array length", "1099511627776"]),
    ));
    // At the limit (2^30 u64 elements = 8 GiB), but the file ends: no reservation.
    let mut b = prefix(3, 0, 1);
    put_str(&mut b, "a");
    b.extend_from_slice(&9u32.to_le_bytes());
    b.extend_from_slice(&10u32.to_le_bytes()); // of u64
    b.extend_from_slice(&(1u64 << 30).to_le_bytes());
    b.extend_from_slice(&[7; 64]);
    out.push(("array-2e30-u64-short".into(), raw(b), words(&["truncated"])));
    // String values of 16 MiB (the reader's limit) and 1 GiB in tiny files.
    for (len, needles) in [
        (1u64 << 24, &["truncated"][..]),
        (1 << 30, &["string length", "1073741824"]),
    ] {
        let mut b = prefix(3, 0, 1);
        put_str(&mut b, "a");
        b.extend_from_slice(&8u32.to_le_bytes()); // string
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(b"abc");
        out.push((format!("string-{len}-short"), raw(b), words(needles)));
    }
    // A metadata key 2^62 bytes long.
    let mut b = prefix(3, 0, 1);
    b.extend_from_slice(&(1u64 << 62).to_le_bytes());
    out.push(("key-2e62".into(), raw(b), words(&["key length"])));

    out.push((
        "tensor-count-2e63".into(),
        raw(prefix(3, 1 << 63, 0)),
        words(&["tensor count", "9223372036854775808"]),
    ));
    out.push((
        "tensor-count-2e63-1".into(),
        raw(prefix(3, (1 << 63) - 1, 0)),
        words(&["truncated"]),
    ));
    out.push((
        "kv-count-2e64-1".into(),
        raw(prefix(3, 0, u64::MAX)),
        words(&["metadata entry count"]),
    ));

    // Nested arrays (llama.cpp cannot load them), shallow and 10k deep.
    let inner = |v: Vec<u32>| Array::new(ArrayItems::U32(v));
    let nested = Array::new(ArrayItems::Array(vec![inner(vec![1, 2]), inner(vec![3])]));
    let h = Tiny::default()
        .builder()
        .kv("custom.nested", nested)
        .build()
        .expect("builds");
    out.push((
        "nested-array".into(),
        whole(&h),
        words(&["custom.nested", "nested arrays"]),
    ));
    let depth = 100_000;
    let mut b = prefix(3, 0, 1);
    put_str(&mut b, "deep");
    b.extend_from_slice(&9u32.to_le_bytes());
    for _ in 0..depth {
        b.extend_from_slice(&9u32.to_le_bytes());
        b.extend_from_slice(&1u64.to_le_bytes());
    }
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    out.push((
        "nested-array-100k-deep".into(),
        raw(b),
        words(&["deep", "nested arrays"]),
    ));

    let mut h = tiny.clone();
    let dup = h.metadata[4].clone();
    h.metadata.push(dup);
    out.push((
        "duplicate-key".into(),
        whole(&h),
        words(&["duplicate metadata key", "llama.block_count"]),
    ));

    let mut h = tiny.clone();
    let mut t = h.tensors[2].clone();
    let last = h.tensors.last().expect("tensors");
    t.offset = (last.offset + last.bytes).div_ceil(h.alignment) * h.alignment;
    h.tensors.push(t);
    out.push((
        "duplicate-tensor".into(),
        whole(&h),
        words(&["duplicate tensor name", "blk.0.attn_q.weight"]),
    ));

    let mut h = tiny.clone();
    h.tensors[2].offset += 1;
    out.push((
        "misaligned-offset".into(),
        whole(&h),
        words(&["alignment", &h.tensors[2].name]),
    ));
    let mut h = tiny.clone();
    h.tensors[2].offset += h.alignment;
    out.push((
        "gap-between-tensors".into(),
        whole(&h),
        words(&["data offset", "expects"]),
    ));
    let mut h = tiny.clone();
    h.metadata
        .push(("general.alignment".into(), Value::U32(48)));
    out.push((
        "alignment-48".into(),
        whole(&h),
        words(&["general.alignment", "power of two"]),
    ));

    for id in [4u32, 1000] {
        let mut f = whole(&tiny);
        patch_tensor_type(&mut f.bytes, "output_norm.weight", id);
        out.push((
            format!("tensor-type-{id}"),
            f,
            words(&["output_norm.weight", "type id"]),
        ));
    }

    let h = Tiny {
        arch: "totally-new",
        ..Tiny::default()
    }
    .header();
    out.push((
        "unknown-architecture".into(),
        whole(&h),
        words(&["totally-new", "architecture"]),
    ));
    let h = Tiny {
        n_head: 0,
        ..Tiny::default()
    }
    .header();
    out.push((
        "zero-heads".into(),
        whole(&h),
        words(&["head_count", "zero"]),
    ));
    let h = Tiny {
        embd_rows: 65,
        ..Tiny::default()
    }
    .header();
    out.push((
        "vocab-vs-embedding".into(),
        whole(&h),
        words(&["vocabulary", "64", "65"]),
    ));
    let h = Tiny {
        block_count: 4,
        ..Tiny::default()
    }
    .header();
    out.push((
        "fewer-layers-than-block-count".into(),
        whole(&h),
        words(&["layer 2 of 4"]),
    ));
    let h = Tiny {
        block_count: 1,
        ..Tiny::default()
    }
    .header();
    out.push((
        "more-layers-than-block-count".into(),
        whole(&h),
        words(&["blk.1", "1 layers"]),
    ));

    out.extend(llama_cpp_aborts());

    // The header is whole but the tensor data is missing.
    out.push((
        "data-past-end".into(),
        raw(good.clone()),
        words(&["ends at byte", "file has only"]),
    ));
    let mut f = whole(&tiny);
    f.len -= 1;
    out.push((
        "data-one-byte-short".into(),
        f,
        words(&["output.weight", "file has only"]),
    ));
    out
}

/// The tiny model with hyper-parameters that llama.cpp checks with
/// `GGML_ASSERT` (or divides by) in `load_hparams`: given to llama.cpp, each
/// of these aborts the whole process instead of failing the load.
pub fn llama_cpp_aborts() -> Vec<(String, File, Vec<String>)> {
    let u32s = |v: &[u32]| Value::Array(Array::new(ArrayItems::U32(v.to_vec())));
    let moe = |count: u32, used: Value| {
        vec![
            ("expert_count", Value::U32(count)),
            ("expert_used_count", used),
        ]
    };
    let grouped = |groups: u32, used: u32| {
        let mut kv = moe(16, Value::U32(4));
        kv.push(("expert_group_count", Value::U32(groups)));
        kv.push(("expert_group_used_count", Value::U32(used)));
        kv
    };
    // Name, `llama.*` keys to add, words of the error.
    type Case = (
        &'static str,
        Vec<(&'static str, Value)>,
        &'static [&'static str],
    );
    let cases: Vec<Case> = vec![
        (
            "nextn-past-block-count",
            vec![("nextn_predict_layers", Value::U32(3))],
            &[
                "llama.nextn_predict_layers",
                "3 prediction layers",
                "block_count is 2",
            ],
        ),
        (
            "experts-2000",
            moe(2000, Value::U32(8)),
            &["llama.expert_count", "2000 experts", "1024"],
        ),
        (
            "experts-used-past-count",
            moe(8, Value::U32(9)),
            &["llama.expert_used_count", "9 used of 8 experts"],
        ),
        (
            "experts-used-zero",
            moe(8, Value::U32(0)),
            &["llama.expert_used_count", "0 used of 8 experts"],
        ),
        (
            "experts-used-per-layer-past-count",
            moe(8, u32s(&[2, 9])),
            &["llama.expert_used_count", "9 used of 8 experts"],
        ),
        (
            "experts-used-without-experts",
            vec![("expert_used_count", Value::U32(2))],
            &[
                "llama.expert_used_count",
                "llama.expert_count is 0 or absent",
            ],
        ),
        (
            "expert-groups-without-experts",
            vec![("expert_group_count", Value::U32(2))],
            &[
                "llama.expert_group_count",
                "llama.expert_count is 0 or absent",
            ],
        ),
        (
            "expert-groups-as-many-as-experts",
            grouped(16, 1),
            &["llama.expert_group_count", "16 groups for 16 experts"],
        ),
        (
            "expert-groups-not-dividing",
            grouped(3, 1),
            &[
                "llama.expert_group_count",
                "16 experts do not split into 3 groups",
            ],
        ),
        (
            "expert-groups-none-used",
            grouped(4, 0),
            &["llama.expert_group_used_count", "0 used of 4 expert groups"],
        ),
        (
            "expert-groups-all-used",
            grouped(4, 4),
            &["llama.expert_group_used_count", "4 used of 4 expert groups"],
        ),
        (
            "rope-scaling-unknown",
            vec![("rope.scaling.type", Value::from("su"))],
            &[
                "llama.rope.scaling.type",
                "'su'",
                "none, linear, yarn, longrope",
            ],
        ),
    ];
    let mut out = Vec::new();
    for (name, kvs, needles) in cases {
        let mut b = Tiny::default().builder();
        for (k, v) in kvs {
            b = b.kv(format!("llama.{k}"), v);
        }
        let h = b.build().unwrap_or_else(|e| panic!("{name}: {e}"));
        out.push((name.to_string(), whole(&h), words(needles)));
    }
    // Qwen3-Next with every key its loader requires, and a layer pattern
    // of "every 0th layer is full attention": a division by zero.
    let tiny = Tiny {
        arch: "qwen3next",
        ..Tiny::default()
    };
    let mut b = tiny.builder();
    for (k, v) in [
        ("ssm.conv_kernel", 4u32),
        ("ssm.inner_size", 512),
        ("ssm.state_size", 16),
        ("ssm.time_step_rank", 8),
        ("ssm.group_count", 2),
        ("full_attention_interval", 0),
    ] {
        b = b.kv(format!("qwen3next.{k}"), v);
    }
    let h = b.build().expect("qwen3next builds");
    out.push((
        "full-attention-interval-zero".into(),
        whole(&h),
        words(&["qwen3next.full_attention_interval", "zero"]),
    ));
    out
}

/// Writes `f` as `DIR/NAME.gguf` (sparse past its bytes) and returns the path.
pub fn write(dir: &Path, name: &str, f: &File) -> PathBuf {
    let path = dir.join(format!("{name}.gguf"));
    std::fs::write(&path, &f.bytes).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("reopen");
    file.set_len(f.len).expect("set_len");
    path
}
