//! Tokenizing and detokenizing through the C++ shim (`app/shim/vocab.cpp`),
//! so that a tokenizer that throws (a malformed vocabulary: a byte with no
//! token) is an error, not an abort of the whole process. llama-cpp-2's own
//! `LlamaVocab::tokenize` and `token_to_piece` call the same C functions with
//! nothing to stop a C++ exception unwinding into Rust.

use std::ffi::{CStr, c_char};

use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::vocab::LlamaVocab;
use llama_cpp_sys_2::{llama_token, llama_vocab};

unsafe extern "C" {
    fn hr_tokenize(
        vocab: *const llama_vocab,
        text: *const c_char,
        text_len: i32,
        tokens: *mut llama_token,
        n_tokens_max: i32,
        add_special: bool,
        parse_special: bool,
        result: *mut i32,
        err: *mut c_char,
        err_len: usize,
    ) -> i32;

    fn hr_token_to_piece(
        vocab: *const llama_vocab,
        token: llama_token,
        buf: *mut c_char,
        length: i32,
        lstrip: i32,
        special: bool,
        result: *mut i32,
        err: *mut c_char,
        err_len: usize,
    ) -> i32;
}

/// What llama.cpp's tokenizer threw.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("llama.cpp's tokenizer failed on this model's vocabulary: {0}")]
pub struct TokenizerError(pub String);

// `LlamaVocab` is `#[repr(transparent)]` over llama-cpp-2's `Ptr`, itself
// `#[repr(transparent)]` over `NonNull<llama_vocab>` (llama-cpp-2 0.1.160,
// pinned with `=` in the workspace): the same layout as a pointer. Checked
// at compile time, as far as sizes go.
const _: () = assert!(size_of::<LlamaVocab<'static>>() == size_of::<*const llama_vocab>());

/// The raw `llama_vocab` pointer behind llama-cpp-2's handle, which keeps it private.
fn raw(vocab: &LlamaVocab<'_>) -> *const llama_vocab {
    // SAFETY: see the layout note above; reading the one pointer-sized field
    // of a live, borrowed `LlamaVocab` (valid as long as its model is).
    unsafe { *std::ptr::from_ref(vocab).cast::<*const llama_vocab>() }
}

fn message(err: &[u8]) -> String {
    CStr::from_bytes_until_nul(err)
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|_| String::from_utf8_lossy(err).into_owned())
}

/// `text` as tokens, as llama-cpp-2's `LlamaVocab::tokenize` does it.
///
/// # Errors
/// llama.cpp threw (the vocabulary cannot encode the text), or the text is
/// over 2 GiB.
pub fn tokenize(
    vocab: &LlamaVocab<'_>,
    text: &[u8],
    add_special: bool,
    parse_special: bool,
) -> Result<Vec<LlamaToken>, TokenizerError> {
    let len = i32::try_from(text.len())
        .map_err(|_| TokenizerError(format!("a text of {} bytes is over 2 GiB", text.len())))?;
    let mut cap = (text.len() / 2).max(8) + usize::from(add_special);
    for _ in 0..2 {
        let mut out: Vec<llama_token> = vec![0; cap];
        let mut err = [0u8; 512];
        let mut result = 0i32;
        // SAFETY: `out` has `cap` writable slots and `cap` fits i32 (at most
        // len + 8 or a count llama.cpp gave); `err` is 512 writable bytes;
        // `text` is `len` readable bytes; the vocab pointer is live for `vocab`'s borrow.
        let threw = unsafe {
            hr_tokenize(
                raw(vocab),
                text.as_ptr().cast(),
                len,
                out.as_mut_ptr(),
                i32::try_from(cap).unwrap_or(i32::MAX),
                add_special,
                parse_special,
                &raw mut result,
                err.as_mut_ptr().cast(),
                err.len(),
            )
        };
        if threw != 0 {
            return Err(TokenizerError(message(&err)));
        }
        match result {
            i32::MIN => break,
            n if n < 0 => cap = n.unsigned_abs() as usize,
            n => {
                out.truncate(n as usize);
                return Ok(out.into_iter().map(LlamaToken::new).collect());
            }
        }
    }
    Err(TokenizerError(
        "llama.cpp could not size the token list".into(),
    ))
}

/// The bytes of one token, as llama-cpp-2's `LlamaVocab::token_to_piece`
/// gives them (`special`: render special tokens as their text).
///
/// # Errors
/// llama.cpp threw (a token its vocabulary cannot render).
pub fn token_to_piece(
    vocab: &LlamaVocab<'_>,
    token: LlamaToken,
    special: bool,
) -> Result<Vec<u8>, TokenizerError> {
    let mut cap = 32usize;
    for _ in 0..2 {
        let mut buf = vec![0u8; cap];
        let mut err = [0u8; 512];
        let mut result = 0i32;
        // SAFETY: `buf` has `cap` writable bytes (cap fits i32: 32 or a
        // length llama.cpp asked for); `err` is 512 writable bytes.
        let threw = unsafe {
            hr_token_to_piece(
                raw(vocab),
                token.0,
                buf.as_mut_ptr().cast(),
                i32::try_from(cap).unwrap_or(i32::MAX),
                0,
                special,
                &raw mut result,
                err.as_mut_ptr().cast(),
                err.len(),
            )
        };
        if threw != 0 {
            return Err(TokenizerError(message(&err)));
        }
        if result < 0 {
            cap = result.unsigned_abs() as usize;
            continue;
        }
        buf.truncate(result as usize);
        return Ok(buf);
    }
    Err(TokenizerError(format!(
        "llama.cpp could not size the text of token {}",
        token.0
    )))
}
