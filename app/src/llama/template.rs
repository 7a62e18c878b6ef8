//! llama.cpp's chat formatter (`llama_chat_apply_template`) through the C++
//! shim (`app/shim/template.cpp`), so that llama.cpp throwing on a template
//! text or a conversation (`std::bad_alloc` on a huge one) is an error, not
//! an abort of the whole process. The template text is untrusted: it comes
//! from the model file or `--chat-template`. llama-cpp-sys-2 exposes the C
//! function with nothing to stop a C++ exception unwinding into Rust.

use std::ffi::{CStr, c_char};

use llama_cpp_sys_2::llama_chat_message;

unsafe extern "C" {
    fn hr_chat_apply_template(
        tmpl: *const c_char,
        chat: *const llama_chat_message,
        n_msg: usize,
        add_ass: bool,
        buf: *mut c_char,
        length: i32,
        result: *mut i32,
        err: *mut c_char,
        err_len: usize,
    ) -> i32;
}

/// What llama.cpp's chat formatter threw.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("llama.cpp's chat formatter failed: {0}")]
pub struct ChatTemplateError(pub String);

/// `llama_chat_apply_template`: `messages` (role, text) formatted with
/// `tmpl` (a built-in name or a template text llama.cpp recognises by its
/// markers), ending with the assistant's turn opened when `add_ass`, written
/// into `buf` as far as it fits.
///
/// Returns llama.cpp's value: the length of the whole text (more than
/// `buf.len()` when it did not fit: call again with that much room), or a
/// negative number when llama.cpp does not recognise `tmpl`.
///
/// # Errors
/// llama.cpp threw.
pub fn chat_apply_template(
    tmpl: &CStr,
    messages: &[(&CStr, &CStr)],
    add_ass: bool,
    buf: &mut [u8],
) -> Result<i32, ChatTemplateError> {
    let raw: Vec<llama_chat_message> = messages
        .iter()
        .map(|(role, content)| llama_chat_message {
            role: role.as_ptr(),
            content: content.as_ptr(),
        })
        .collect();
    // llama.cpp writes at most `length` bytes: a buffer over 2 GiB is
    // simply used in part.
    let length = i32::try_from(buf.len()).unwrap_or(i32::MAX);
    let mut err = [0u8; 512];
    let mut result = 0i32;
    // SAFETY: `tmpl` and every role and content are NUL-terminated strings
    // borrowed for this call; `raw` holds `raw.len()` messages; `buf` has at
    // least `length` writable bytes; `err` is 512 writable bytes.
    let threw = unsafe {
        hr_chat_apply_template(
            tmpl.as_ptr(),
            raw.as_ptr(),
            raw.len(),
            add_ass,
            buf.as_mut_ptr().cast(),
            length,
            &raw mut result,
            err.as_mut_ptr().cast(),
            err.len(),
        )
    };
    if threw != 0 {
        let what = CStr::from_bytes_until_nul(&err)
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_else(|_| String::from_utf8_lossy(&err).into_owned());
        return Err(ChatTemplateError(what));
    }
    Ok(result)
}
