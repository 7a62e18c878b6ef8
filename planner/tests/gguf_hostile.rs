//! Hostile and malformed GGUF headers: each must give the right error fast,
//! never a panic, a hang or an allocation the input cannot back.
//!
//! Broken files are forged either byte by byte (`Raw`) or by serializing a
//! deliberately inconsistent `Header` with `writer::to_bytes`.

use std::io::{self, Read};
use std::time::{Duration, Instant};

use headroom_planner::gguf::writer::{HeaderBuilder, create_sparse_file, to_bytes};
use headroom_planner::gguf::{
    Array, ArrayItems, GgmlType, GgufError, Header, ValueType, parse_header, read_header,
    read_header_from_file,
};

/// Builds raw header bytes field by field.
struct Raw(Vec<u8>);

impl Raw {
    fn new(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        Raw(b"GGUF".to_vec()).u32(version).u64(n_tensors).u64(n_kv)
    }
    fn u32(mut self, v: u32) -> Raw {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Raw {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(mut self, b: &[u8]) -> Raw {
        self.0.extend_from_slice(b);
        self
    }
    fn str(self, s: &str) -> Raw {
        self.u64(s.len() as u64).bytes(s.as_bytes())
    }
    /// A key followed by an array head of `elem` x `len`.
    fn array_head(self, key: &str, elem: u32, len: u64) -> Raw {
        self.str(key).u32(9).u32(elem).u64(len)
    }
}

/// A realistic small header.
fn valid() -> Header {
    HeaderBuilder::new()
        .kv("general.architecture", "llama")
        .kv("general.name", "tiny")
        .kv("llama.block_count", 2u32)
        .kv("llama.context_length", 4096u64)
        .kv("llama.rope.freq_base", 10000.0f32)
        .kv("llama.attention.layer_norm_rms_epsilon", 1e-5f64)
        .kv("llama.use_parallel_residual", false)
        .kv(
            "llama.attention.head_count_kv",
            Array::new(ArrayItems::I32(vec![8, 4])),
        )
        .kv(
            "tokenizer.ggml.tokens",
            Array::new(ArrayItems::String(vec!["<s>".into(), "é".into()])),
        )
        .kv(
            "tokenizer.ggml.scores",
            Array::new(ArrayItems::F32(vec![0.0, -1.5])),
        )
        .tensor("token_embd.weight", &[256, 2], GgmlType::Q4_K)
        .tensor("blk.0.attn_q.weight", &[64, 64], GgmlType::Q8_0)
        .tensor("output_norm.weight", &[256], GgmlType::F32)
        .build()
        .expect("the sample header is valid")
}

fn parse_raw(raw: Raw) -> Result<Header, GgufError> {
    parse_header(&raw.0)
}

#[test]
fn every_truncation_is_truncated_and_needed_makes_progress() {
    let full = to_bytes(&valid()).expect("valid header serializes");
    let header_bytes = valid().header_bytes as usize;
    for len in 0..header_bytes {
        match parse_header(&full[..len]) {
            Err(GgufError::Truncated { needed, have }) => {
                assert_eq!(have, len as u64);
                assert!(
                    needed > have && needed <= header_bytes as u64,
                    "len {len}: needed {needed}"
                );
            }
            other => panic!("prefix of {len} bytes gave {other:?}"),
        }
        // The streaming reader must agree on the shortfall.
        assert!(matches!(
            read_header(&full[..len]),
            Err(GgufError::Truncated { .. })
        ));
    }
    assert_eq!(parse_header(&full[..header_bytes]).ok(), Some(valid()));
}

#[test]
fn fetching_needed_bytes_converges_like_an_http_reader() {
    let full = to_bytes(&valid()).expect("valid header serializes");
    let (mut have, mut rounds) = (0usize, 0);
    let header = loop {
        rounds += 1;
        match parse_header(&full[..have]) {
            Ok(h) => break h,
            Err(GgufError::Truncated { needed, .. }) => have = needed as usize,
            Err(e) => panic!("unexpected {e}"),
        }
        assert!(rounds < 1000);
    };
    assert_eq!(header, valid());
    assert_eq!(have as u64, header.header_bytes);
}

#[test]
fn bad_magic_and_versions() {
    let r = parse_header(b"GGML\x03\0\0\0");
    assert!(matches!(r, Err(GgufError::BadMagic { found }) if &found == b"GGML"));
    for version in [0, 1, 4, 0xFFFF] {
        let r = parse_raw(Raw::new(version, 0, 0));
        assert!(matches!(r, Err(GgufError::UnsupportedVersion { version: v }) if v == version));
    }
    let r = parse_raw(Raw::new(0x0300_0000, 0, 0));
    assert!(matches!(r, Err(GgufError::BigEndian { .. })));
    let h = parse_raw(Raw::new(2, 0, 0)).expect("an empty v2 header is valid");
    assert_eq!((h.version, h.header_bytes, h.data_offset), (2, 24, 24));
}

#[test]
fn absurd_counts_fail_fast() {
    let start = Instant::now();
    let r = parse_raw(Raw::new(3, 1 << 63, 0));
    assert!(matches!(r, Err(GgufError::TooLarge { len, .. }) if len == 1 << 63));
    let r = parse_raw(Raw::new(3, 0, u64::MAX));
    assert!(matches!(r, Err(GgufError::TooLarge { .. })));
    // Large but representable counts run into the end of the input.
    assert!(matches!(
        parse_raw(Raw::new(3, 1 << 62, 0)),
        Err(GgufError::Truncated { .. })
    ));
    assert!(matches!(
        parse_raw(Raw::new(3, 0, i64::MAX as u64)),
        Err(GgufError::Truncated { .. })
    ));
    // A 2^40-element array is above gguf.cpp's 2^30 limit.
    let r = parse_raw(Raw::new(3, 0, 1).array_head("k", 10, 1 << 40));
    assert!(
        matches!(r, Err(GgufError::TooLarge { len, cap, .. }) if len == 1 << 40 && cap == 1 << 30)
    );
    // 2^30 u64s are skipped arithmetically: the shortfall is exact.
    let raw = Raw::new(3, 0, 1).array_head("k", 10, 1 << 30);
    let at = raw.0.len() as u64;
    let r = parse_raw(raw);
    assert!(matches!(r, Err(GgufError::Truncated { needed, .. }) if needed == at + (8 << 30)));
    // 2^30 strings, 2^30 nested arrays: bounded by the input.
    assert!(matches!(
        parse_raw(Raw::new(3, 0, 1).array_head("k", 8, 1 << 30)),
        Err(GgufError::Truncated { .. })
    ));
    let raw = Raw::new(3, 0, 1)
        .array_head("k", 9, 1 << 30)
        .u32(0)
        .u64(0)
        .u32(0)
        .u64(0);
    assert!(matches!(parse_raw(raw), Err(GgufError::Truncated { .. })));
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn absurd_lengths_and_strings() {
    let r = parse_raw(Raw::new(3, 0, 1).u64(1 << 63));
    assert!(matches!(r, Err(GgufError::TooLarge { .. })));
    let r = parse_raw(Raw::new(3, 0, 1).str("k").u32(8).u64(1 << 40));
    assert!(matches!(r, Err(GgufError::TooLarge { len, .. }) if len == 1 << 40));
    // A string running past the end of the input.
    let raw = Raw::new(3, 0, 1).str("k").u32(8).u64(1000).bytes(b"short");
    let at = raw.0.len() as u64 - 5;
    assert!(
        matches!(parse_raw(raw), Err(GgufError::Truncated { needed, .. }) if needed == at + 1000)
    );
    assert!(matches!(
        parse_raw(Raw::new(3, 0, 1).str("")),
        Err(GgufError::EmptyKey { index: 0 })
    ));
    let r = parse_raw(
        Raw::new(3, 0, 1)
            .u64(2)
            .bytes(&[0xff, 0xfe])
            .u32(0)
            .bytes(&[0]),
    );
    assert!(matches!(r, Err(GgufError::InvalidUtf8 { offset: 24, .. })));
    // Invalid UTF-8 in a value is replaced, as llama.cpp loads such files.
    let h = parse_raw(
        Raw::new(3, 0, 1)
            .str("k")
            .u32(8)
            .u64(2)
            .bytes(&[b'a', 0xff]),
    )
    .expect("lossy");
    assert_eq!(h.get_str("k"), Some("a\u{fffd}"));
}

#[test]
fn deep_nesting_is_iterative() {
    const DEPTH: u64 = 100_000;
    let mut raw = Raw::new(3, 0, 2).str("deep").u32(9);
    for _ in 0..DEPTH {
        raw = raw.u32(9).u64(1);
    }
    raw = raw.u32(4).u64(1).u32(7).str("after").u32(0).bytes(&[42]);
    let full = raw.0.clone();
    let h = parse_raw(raw).expect("deep nesting is legal GGUF");
    assert_eq!(h.get_u64("after"), Some(42));
    assert_eq!(h.nested_array_key(), Some("deep"));
    assert_eq!(
        read_header(&full[..]).ok().and_then(|h| h.get_u64("after")),
        Some(42)
    );
    // Levels beyond the keep depth are only counted.
    let mut level = h.get_array("deep").expect("array");
    let mut kept = 0;
    while let ArrayItems::Array(inner) = level.items() {
        level = &inner[0];
        kept += 1;
    }
    assert!(
        level.is_skipped() && level.len() == 1 && kept == 8,
        "kept {kept}"
    );
    assert!(matches!(
        parse_header(&full[..full.len() / 2]),
        Err(GgufError::Truncated { .. })
    ));
}

#[test]
fn unknown_types() {
    let r = parse_raw(Raw::new(3, 0, 1).str("k").u32(13));
    assert!(matches!(r, Err(GgufError::UnknownValueType { id: 13, .. })));
    let r = parse_raw(Raw::new(3, 0, 1).array_head("k", 99, 1));
    assert!(matches!(r, Err(GgufError::UnknownValueType { id: 99, .. })));
    for id in [4, 31, 36, 43, u32::MAX] {
        let r = parse_raw(Raw::new(3, 1, 0).str("t").u32(1).u64(32).u32(id).u64(0));
        assert!(
            matches!(r, Err(GgufError::UnknownTensorType { id: i, .. }) if i == id),
            "id {id}"
        );
    }
}

#[test]
fn duplicates_and_alignment() {
    let r = parse_raw(
        Raw::new(3, 0, 2)
            .str("k")
            .u32(0)
            .bytes(&[1])
            .str("k")
            .u32(0)
            .bytes(&[2]),
    );
    assert!(matches!(r, Err(GgufError::DuplicateKey { key }) if key == "k"));
    let r = HeaderBuilder::new()
        .tensor("t", &[4], GgmlType::F32)
        .tensor("t", &[4], GgmlType::F32)
        .build();
    assert!(matches!(r, Err(GgufError::DuplicateTensor { name }) if name == "t"));
    for value in [0u32, 3, 96] {
        let r = HeaderBuilder::new().kv("general.alignment", value).build();
        assert!(matches!(r, Err(GgufError::BadAlignment { value: v }) if v == u64::from(value)));
    }
    let r = HeaderBuilder::new().kv("general.alignment", 32u64).build();
    assert!(matches!(
        r,
        Err(GgufError::AlignmentType {
            found: ValueType::U64
        })
    ));
}

#[test]
fn tensor_offsets_must_be_packed_in_order() {
    let good = valid();
    let forge = |i: usize, offset: u64| {
        let mut h = good.clone();
        h.tensors[i].offset = offset;
        parse_header(&to_bytes(&h).expect("serializes"))
    };
    let r = forge(1, good.tensors[1].offset + 1);
    assert!(matches!(
        r,
        Err(GgufError::MisalignedTensor { alignment: 32, .. })
    ));
    let r = forge(1, 0);
    assert!(
        matches!(r, Err(GgufError::OverlappingTensors { a, b }) if a == "token_embd.weight" && b == "blk.0.attn_q.weight")
    );
    let r = forge(2, good.tensors[2].offset + 32);
    assert!(matches!(r, Err(GgufError::UnexpectedTensorOffset { .. })));
    let r = forge(0, 32);
    assert!(matches!(
        r,
        Err(GgufError::UnexpectedTensorOffset { expected: 0, .. })
    ));
}

#[test]
fn tensor_shapes() {
    let tensor = |name: &str, dims: &[u64], ty: u32| {
        let mut raw = Raw::new(3, 1, 0).str(name).u32(dims.len() as u32);
        for &d in dims {
            raw = raw.u64(d);
        }
        parse_raw(raw.u32(ty).u64(0))
    };
    assert!(matches!(
        tensor("t", &[1; 5], 0),
        Err(GgufError::BadDims { .. })
    ));
    assert!(matches!(
        tensor("t", &[1 << 63], 0),
        Err(GgufError::BadDims { .. })
    ));
    assert!(matches!(
        tensor("t", &[1 << 62, 2], 0),
        Err(GgufError::BadDims { .. })
    ));
    assert!(matches!(
        tensor("t", &[1 << 62], 0),
        Err(GgufError::Overflow { .. })
    ));
    assert!(matches!(
        tensor("t", &[100], 12),
        Err(GgufError::PartialBlock {
            ne0: 100,
            block: 256,
            ..
        })
    ));
    assert!(matches!(
        tensor("t", &[], 2),
        Err(GgufError::PartialBlock { ne0: 1, .. })
    ));
    // gguf.cpp's quirk: a zero dimension stops the overflow check.
    let h = tensor("t", &[0, 1 << 62, 1 << 62], 0).expect("zero-element tensor");
    assert_eq!(h.tensors[0].bytes, 0);
    let h = tensor("scalar", &[], 0).expect("0-dim tensor is a scalar");
    assert_eq!((h.tensors[0].bytes, h.data_offset % 32), (4, 0));
    let long = "x".repeat(64);
    assert!(matches!(
        tensor(&long, &[1], 0),
        Err(GgufError::TooLarge {
            len: 64,
            cap: 63,
            ..
        })
    ));
    assert!(tensor(&long[..63], &[1], 0).is_ok());
}

#[test]
fn file_checks_tensor_bounds() -> Result<(), GgufError> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("m.gguf");
    let h = valid();
    create_sparse_file(&path, &h)?;
    assert_eq!(read_header_from_file(&path)?, h);
    let last = &h.tensors[2];
    let end = h.data_offset + last.offset + last.bytes;
    std::fs::File::options()
        .write(true)
        .open(&path)?
        .set_len(end - 1)?;
    let r = read_header_from_file(&path);
    assert!(
        matches!(r, Err(GgufError::TensorOutsideFile { name, end: e, file_len }) if name == last.name && e == end && file_len == end - 1)
    );
    std::fs::File::options()
        .write(true)
        .open(&path)?
        .set_len(10)?;
    assert!(matches!(
        read_header_from_file(&path),
        Err(GgufError::Truncated { have: 10, .. })
    ));
    // A huge tensor in a small file: parsed, then refused by the bounds check.
    let big = HeaderBuilder::new()
        .tensor("t", &[1 << 61], GgmlType::F32)
        .build()?;
    std::fs::write(&path, to_bytes(&big)?)?;
    assert!(matches!(
        read_header_from_file(&path),
        Err(GgufError::TensorOutsideFile { .. })
    ));
    Ok(())
}

/// Counts the bytes a reader hands out.
struct Counting<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

#[test]
fn stream_stops_at_the_header_and_skips_big_arrays() -> Result<(), GgufError> {
    let vocab: Vec<String> = (0..100_000).map(|i| format!("tok{i}")).collect();
    let h = HeaderBuilder::new()
        .kv(
            "tokenizer.ggml.tokens",
            Array::new(ArrayItems::String(vocab)),
        )
        .kv(
            "tokenizer.ggml.token_type",
            Array::new(ArrayItems::I32(vec![1; 100_000])),
        )
        .tensor("w", &[1024, 1024], GgmlType::F16)
        .build()?;
    let bytes = to_bytes(&h)?;
    let data = io::repeat(0).take(256 << 20);
    let mut counting = Counting {
        inner: bytes.as_slice().chain(data),
        read: 0,
    };
    let parsed = read_header(&mut counting)?;
    assert!(
        counting.read <= h.data_offset + (256 << 10),
        "read {} bytes",
        counting.read
    );
    assert_eq!(parsed.array_len("tokenizer.ggml.tokens"), Some(100_000));
    assert!(
        parsed
            .get_array("tokenizer.ggml.tokens")
            .is_some_and(Array::is_skipped)
    );
    assert!(
        parsed
            .get_array("tokenizer.ggml.token_type")
            .is_some_and(Array::is_skipped)
    );
    assert_eq!(
        (parsed.header_bytes, parsed.tensors.clone()),
        (h.header_bytes, h.tensors.clone())
    );
    Ok(())
}
