//! Reading values out of headroom's `--json` output by JSON pointer, failing
//! the test with the whole document when one is missing or of another type.

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
