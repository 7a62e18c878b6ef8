//! A minimal tokenizer section for synthetic models: llama.cpp refuses a
//! model without a vocabulary of exactly `n_vocab` tokens.

/// A SentencePiece ("llama") vocabulary llama.cpp accepts: `<unk>`, `<s>`,
/// `</s>`, the 256 byte tokens `<0x00>`..`<0xFF>` (SPM falls back to them, and
/// `<0x0A>` is its newline), then unique fillers `t<id>`. Token texts must be
/// unique (llama-vocab.cpp asserts it).
pub(super) fn vocab(n_vocab: u64) -> (Vec<String>, Vec<f32>, Vec<i32>) {
    // Token types of llama.cpp's `llama_token_type`.
    const NORMAL: i32 = 1;
    const UNKNOWN: i32 = 2;
    const CONTROL: i32 = 3;
    const BYTE: i32 = 6;
    let n = usize::try_from(n_vocab).unwrap_or(0);
    let mut tokens = Vec::with_capacity(n);
    let mut types = Vec::with_capacity(n);
    for (text, ty) in [("<unk>", UNKNOWN), ("<s>", CONTROL), ("</s>", CONTROL)] {
        tokens.push(text.to_string());
        types.push(ty);
    }
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(BYTE);
    }
    for id in tokens.len()..n {
        tokens.push(format!("t{id}"));
        types.push(NORMAL);
    }
    tokens.truncate(n);
    types.truncate(n);
    // Later tokens score lower, as in real SPM vocabularies.
    let scores = (0..tokens.len()).map(|i| -(i as f32)).collect();
    (tokens, scores, types)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn vocabulary_is_unique_with_byte_tokens() {
        let (tokens, scores, types) = vocab(1000);
        assert_eq!(
            (tokens.len(), scores.len(), types.len()),
            (1000, 1000, 1000)
        );
        assert_eq!(tokens.iter().collect::<HashSet<_>>().len(), 1000);
        assert_eq!(tokens[3 + 10], "<0x0A>", "SPM newline");
        assert_eq!(types[3 + 10], 6, "byte token");
    }
}
