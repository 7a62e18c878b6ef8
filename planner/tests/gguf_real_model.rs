//! Reads the real test model, when it has been downloaded, to check the
//! reader against a file produced by llama.cpp's own converter.

use std::io::Read;
use std::path::Path;

use headroom_planner::gguf::{GgmlType, parse_header, read_header_from_file};

/// The test model: `HEADROOM_TEST_MODEL` (set by `scripts/test.sh` to the
/// verified demo model), else a copy in the repository's `.models/`.
fn model_path() -> std::path::PathBuf {
    std::env::var_os("HEADROOM_TEST_MODEL").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../.models/gemma-3-270m-q4_k_m.gguf"),
        std::path::PathBuf::from,
    )
}

#[test]
fn gemma3_270m_header() -> Result<(), Box<dyn std::error::Error>> {
    let model = model_path();
    let path = model.as_path();
    if !path.exists() {
        // The planner crate cannot fetch it (no network code here); CI must have it.
        assert!(
            std::env::var_os("CI").is_none(),
            "{} is missing in CI",
            path.display()
        );
        eprintln!(
            "skipped: {} not downloaded (run scripts/test.sh)",
            path.display()
        );
        return Ok(());
    }
    let h = read_header_from_file(path)?;
    assert_eq!(h.architecture(), Some("gemma3"));
    assert_eq!(h.get_u64("gemma3.block_count"), Some(18));
    assert_eq!(h.get_u64("gemma3.embedding_length"), Some(640));
    assert_eq!(h.get_u64("gemma3.attention.sliding_window"), Some(512));
    assert_eq!(h.array_len("tokenizer.ggml.tokens"), Some(262_144));
    assert_eq!(h.tensors.len(), 236);
    let embd = h
        .tensor("token_embd.weight")
        .ok_or("no token_embd.weight")?;
    assert_eq!(
        (embd.dims.as_slice(), embd.ty),
        (&[640, 262_144][..], GgmlType::Q8_0)
    );
    assert_eq!(embd.bytes, 262_144 * 20 * 34);
    // The last tensor ends exactly at the end of the file.
    assert_eq!(h.min_file_len(), Some(std::fs::metadata(path)?.len()));
    // The in-memory parser agrees on the header prefix alone.
    let mut prefix = Vec::new();
    std::fs::File::open(path)?
        .take(h.header_bytes)
        .read_to_end(&mut prefix)?;
    assert_eq!(parse_header(&prefix)?, h);
    Ok(())
}
