//! `llama_decode`'s failures in words, a C++ exception the shim's guard
//! caught among them.
//!
//! Every call the program makes to `llama_decode` (llama-cpp-2 makes them,
//! with its context pointer private) is routed by the linker through
//! `app/shim/decode.cpp` (`-Wl,--wrap=llama_decode`, `app/build.rs`), which
//! catches what the backend throws (Vulkan's lazily allocated buffers, a
//! lost device) and returns [`THREW`] instead of unwinding into Rust.

use std::ffi::CStr;

use llama_cpp_2::DecodeError;

use super::ffi;

/// The code the guard returns for a caught exception (outside
/// `llama_decode`'s own codes).
pub const THREW: i32 = -100;

/// One line for a failed decode: the exception's message when the guard
/// caught one, else llama-cpp-2's words for the code.
#[must_use]
pub fn describe(e: &DecodeError) -> String {
    match e {
        DecodeError::Unknown(THREW) => format!("llama.cpp threw: {}", last_exception()),
        other => other.to_string(),
    }
}

/// The message of the exception this thread's last decode caught.
fn last_exception() -> String {
    // SAFETY: the shim returns its thread-local, NUL-terminated buffer,
    // which lives as long as the thread.
    let text = unsafe { CStr::from_ptr(ffi::hr_decode_error()) };
    let text = text.to_string_lossy();
    let text = text.trim();
    if text.is_empty() {
        "an exception without a message".to_owned()
    } else {
        text.replace('\n', " ")
    }
}

/// How many decodes have gone through the guard in this process.
#[must_use]
pub fn calls() -> u64 {
    // SAFETY: reads an atomic counter.
    unsafe { ffi::hr_decode_calls() }
}

/// Runs the guard with an exception thrown where the backend's would be
/// and returns what a caller would see.
#[must_use]
pub fn self_test() -> (i32, String) {
    // SAFETY: no arguments; the shim catches the exception it throws.
    let code = unsafe { ffi::hr_decode_guard_selftest() };
    let words = match std::num::NonZeroI32::new(code) {
        Some(code) => describe(&DecodeError::from(code)),
        None => String::new(),
    };
    (code, words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thrown_exception_is_a_code_and_its_message() {
        let (code, words) = self_test();
        assert_eq!(code, THREW);
        assert_eq!(
            words,
            "llama.cpp threw: vk::Device::allocateMemory: ErrorOutOfDeviceMemory"
        );
    }

    #[test]
    fn other_codes_keep_llama_cpp_2_s_words() {
        assert_eq!(
            describe(&DecodeError::NoKvCacheSlot),
            DecodeError::NoKvCacheSlot.to_string()
        );
    }
}
