//! llama.cpp's own chat formats (`llama_chat_apply_template`), wrapped safely.
//!
//! llama.cpp does not run Jinja: given a built-in name or a template text, it
//! recognises the family by markers in the text and formats in C++. It needs
//! no model, so it is usable before one is loaded.

use std::ffi::{CStr, CString, c_char};

use anyhow::{Context, Result, anyhow, bail};

use super::Message;

/// llama.cpp's built-in format names (`llama_chat_builtin_templates`).
pub(super) fn builtin_names() -> Vec<String> {
    // SAFETY: with a length of 0 llama.cpp writes nothing and returns the count.
    let n = unsafe { llama_cpp_sys_2::llama_chat_builtin_templates(std::ptr::null_mut(), 0) };
    let mut ptrs: Vec<*const c_char> = vec![std::ptr::null(); usize::try_from(n).unwrap_or(0)];
    // SAFETY: `ptrs` has room for `ptrs.len()` pointers; llama.cpp fills at
    // most that many with pointers to strings in a static map.
    unsafe { llama_cpp_sys_2::llama_chat_builtin_templates(ptrs.as_mut_ptr(), ptrs.len()) };
    ptrs.iter()
        .filter(|p| !p.is_null())
        // SAFETY: non-null entries point to NUL-terminated static strings.
        .map(|&p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        .collect()
}

/// Which built-in llama.cpp chose for a template text: the one that renders a
/// probe conversation identically (llama.cpp does not say which it detected).
pub(super) fn family(text: &str) -> Option<String> {
    let probe = [
        Message::system(" Be brief. "),
        Message::user(" Hello \n"),
        Message::assistant("\tHi. "),
        Message::user("Again"),
    ];
    let own = apply(text, &probe, true).ok()??;
    builtin_names()
        .into_iter()
        .find(|name| matches!(apply(name, &probe, true), Ok(Some(t)) if t == own))
}

/// `llama_chat_apply_template` made safe: `Ok(None)` when llama.cpp does not
/// recognise `template` (a built-in name or a template text). It goes
/// through the shim, so llama.cpp throwing is an error, not an abort.
pub(super) fn apply(template: &str, messages: &[Message], add_ass: bool) -> Result<Option<String>> {
    let nul = |what: &str| anyhow!("the {what} contains a NUL byte, which llama.cpp cannot take");
    let tmpl = CString::new(template).map_err(|_| nul("chat template"))?;
    let owned = messages
        .iter()
        .map(|m| {
            Ok((
                CString::new(m.role.as_str()).map_err(|_| nul("message role"))?,
                CString::new(m.content.as_str()).map_err(|_| nul("message text"))?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let raw: Vec<(&CStr, &CStr)> = owned
        .iter()
        .map(|(role, content)| (role.as_c_str(), content.as_c_str()))
        .collect();
    let text_len: usize = messages
        .iter()
        .map(|m| m.role.len() + m.content.len())
        .sum();
    // llama.cpp returns the length it needs; one retry with that much suffices.
    let mut len = text_len.saturating_mul(2).saturating_add(256);
    for _ in 0..2 {
        if i32::try_from(len).is_err() {
            bail!("chat too long for llama.cpp (over 2 GiB)");
        }
        let mut buf = vec![0u8; len];
        let n = crate::llama::template::chat_apply_template(&tmpl, &raw, add_ass, &mut buf)?;
        let Ok(n) = usize::try_from(n) else {
            return Ok(None);
        };
        if n <= len {
            buf.truncate(n);
            return String::from_utf8(buf)
                .map(Some)
                .context("llama.cpp's chat template wrote invalid UTF-8");
        }
        len = n;
    }
    bail!("llama.cpp's chat template length kept changing")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_grows_its_buffer_and_refuses_nul() {
        // Empty turns: the markup is far longer than the first guess of
        // twice the text, so the call must retry with what llama.cpp asks for.
        let empty = vec![Message::user(""); 1000];
        let text = apply("chatml", &empty, false)
            .expect("renders")
            .expect("chatml is built in");
        assert_eq!(text, "<|im_start|>user\n<|im_end|>\n".repeat(1000));
        assert_eq!(
            apply("no such", &[Message::user("a")], true).ok(),
            Some(None)
        );
        let err = apply("chatml", &[Message::user("a\0b")], true).unwrap_err();
        assert!(err.to_string().contains("NUL"), "{err}");
    }
}
