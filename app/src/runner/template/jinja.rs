//! Jinja chat templates through minijinja, set up the way Hugging Face's
//! `apply_chat_template` sets up Jinja2, so GGUF `tokenizer.chat_template`
//! texts and `--chat-template FILE` render as they do in Python.

#[cfg(unix)]
use std::ffi::CString;

use anyhow::anyhow;
use minijinja::{AutoEscape, Environment, Error, ErrorKind, Value};

/// A Jinja environment set up like Hugging Face's `apply_chat_template`
/// (trim_blocks, lstrip_blocks, Python string methods, `raise_exception`,
/// `strftime_now`), holding `src` as template `name`.
///
/// # Errors
/// A syntax error in `src`.
pub(super) fn environment(name: &str, src: &str) -> anyhow::Result<Environment<'static>> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    // minijinja picks escaping by template name; chat text is never HTML.
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", |msg: String| -> Result<Value, Error> {
        Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("the template raised: {msg}"),
        ))
    });
    env.add_function("strftime_now", |fmt: String| strftime_now(&fmt));
    env.add_template_owned(name.to_string(), src.to_string())
        .map_err(error)?;
    Ok(env)
}

/// minijinja's error with its causes on one line.
pub(super) fn error(err: Error) -> anyhow::Error {
    let mut msg = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        msg.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    anyhow!(msg)
}

/// Python's `datetime.now().strftime(fmt)`, which Llama 3.1 and others call
/// for "Today Date".
#[cfg(unix)]
fn strftime_now(fmt: &str) -> Result<String, Error> {
    let bad = |what: &str| Error::new(ErrorKind::InvalidOperation, what.to_string());
    let c_fmt = CString::new(fmt).map_err(|_| bad("strftime_now: format contains a NUL byte"))?;
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let now = libc::time_t::try_from(secs).unwrap_or(0);
    // SAFETY: `tm` is plain integers and one pointer, for which zero (null)
    // is a valid value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to live locals; localtime_r writes only `tm`
    // and returns null on failure.
    if unsafe { libc::localtime_r(&now, &mut tm) }.is_null() {
        return Err(bad("strftime_now: no local time"));
    }
    for size in [256usize, 4096] {
        let mut buf = vec![0u8; size];
        // SAFETY: `buf` has `size` bytes; `c_fmt` is NUL-terminated; `tm` was
        // filled by localtime_r. strftime returns 0 when the result does not fit.
        let n = unsafe { libc::strftime(buf.as_mut_ptr().cast(), size, c_fmt.as_ptr(), &tm) };
        if n > 0 || fmt.is_empty() {
            buf.truncate(n);
            return Ok(String::from_utf8_lossy(&buf).into_owned());
        }
    }
    Err(bad("strftime_now: result too long or empty"))
}

#[cfg(not(unix))]
fn strftime_now(_fmt: &str) -> Result<String, Error> {
    Err(Error::new(
        ErrorKind::InvalidOperation,
        "strftime_now is only available on Unix".to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strftime_now_formats_the_date() {
        let year = strftime_now("%Y").expect("formats");
        assert_eq!(year.len(), 4);
        assert!(year.chars().all(|c| c.is_ascii_digit()), "{year}");
        assert_eq!(strftime_now("").expect("empty"), "");
        assert!(strftime_now("a\0b").is_err());
    }
}
