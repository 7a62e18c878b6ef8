//! What the cli and run test binaries both check in headroom's output:
//! values of its `--json` output by JSON pointer (failing the test with the
//! whole document when one is missing or of another type), and the one-line
//! failure contract.

#![allow(dead_code)] // Each test binary uses a different part of it.

use serde_json::Value;

/// The unsigned integer at a JSON pointer (`/ram/budget_bytes`).
pub fn u64_at(v: &Value, ptr: &str) -> u64 {
    v.pointer(ptr)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{ptr} is not an unsigned integer in {v:#}"))
}

/// The number at a JSON pointer.
pub fn f64_at(v: &Value, ptr: &str) -> f64 {
    v.pointer(ptr)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{ptr} is not a number in {v:#}"))
}

/// The string at a JSON pointer.
pub fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{ptr} is not a string in {v:#}"))
}

/// The array at a JSON pointer.
pub fn arr_at<'a>(v: &'a Value, ptr: &str) -> &'a [Value] {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_else(|| panic!("{ptr} is not an array in {v:#}"))
}

/// The failure contract: exit `code`, nothing on stdout, no panic, and
/// stderr exactly one line starting with `prefix` that contains each of
/// `needles` (case-insensitive). `out` is (exit code, stdout, stderr).
pub fn assert_one_line(
    out: (Option<i32>, &str, &str),
    code: i32,
    prefix: &str,
    needles: &[&str],
    what: &str,
) {
    let (exit, stdout, stderr) = out;
    assert_eq!(exit, Some(code), "{what}: exit code; stderr: {stderr:?}");
    assert!(
        !stderr.contains("panicked") && !stdout.contains("panicked"),
        "{what}: panicked: {stderr}"
    );
    assert!(stdout.is_empty(), "{what}: printed to stdout: {stdout:?}");
    assert!(
        stderr.starts_with(prefix) && stderr.ends_with('\n'),
        "{what}: stderr is not a line starting {prefix:?}: {stderr:?}"
    );
    assert_eq!(
        stderr.matches('\n').count(),
        1,
        "{what}: stderr is not one line: {stderr:?}"
    );
    let lower = stderr.to_lowercase();
    for n in needles {
        assert!(
            lower.contains(&n.to_lowercase()),
            "{what}: stderr does not mention {n:?}: {stderr:?}"
        );
    }
}
