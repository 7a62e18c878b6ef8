//! Arbitrary text as a chat template (GGUF `tokenizer.chat_template`,
//! `--chat-template FILE`) and a conversation, through the very minijinja
//! module headroom renders with (`app/src/runner/template/jinja.rs`,
//! compiled here as is): parsing, then rendering with the limits it sets.
//! Nothing may panic, overflow, allocate over libFuzzer's limit or run past
//! its timeout, whatever the template does; what renders is within the
//! output limit and used no more fuel than it had.
//!
//! The input is the template, then optionally the messages, each after a
//! 0x01 byte: `system` for one that starts with `system:`, the others
//! alternately `user` and `assistant`. When the last turn is the user's, the
//! assistant's is opened (`add_generation_prompt`).

#![no_main]

use std::collections::BTreeMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)] // The app uses parts of it that this target does not.
#[path = "../../app/src/runner/template/jinja.rs"]
mod jinja;

/// Fuel per render: a hundredth of the app's, so that each of the endless
/// inputs the fuzzer finds at once (a loop in a loop) costs milliseconds.
/// The limit is the same code at any amount.
const FUEL: u64 = jinja::FUEL / 100;

/// A known bug of minijinja 2.24.0, found by this target: slicing with a
/// negative step (`ops::slice` and its `range_step_backwards`, lines 110 to
/// 230 of this file) indexes past the end of an empty string or sequence
/// (`''[::-1]`, `[][::-1]`: a panic in any build) and, with debug
/// assertions, overflows on a stop past the start (`'ab'[0:1:-1]`) or a
/// step of `i64::MIN`. headroom survives it: each render runs on a thread of
/// its own (`jinja::render_in_time`), whose panic is an error. Here such
/// panics are caught so that the fuzzer goes on looking for others; the
/// path names the version, so a new minijinja is judged afresh.
const KNOWN_BUG_FILE: &str = "minijinja-2.24.0/src/value/ops.rs";
const KNOWN_BUG_LINES: std::ops::RangeInclusive<u32> = 110..=230;

fn known_bug(info: &panic::PanicHookInfo<'_>) -> bool {
    info.location()
        .is_some_and(|l| l.file().ends_with(KNOWN_BUG_FILE) && KNOWN_BUG_LINES.contains(&l.line()))
}

/// Lets the known bug's panics unwind to [`catch_unwind`](panic::catch_unwind)
/// quietly; every other panic still goes to libFuzzer's hook, which aborts.
fn allow_known_bug() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let libfuzzer = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !known_bug(info) {
                libfuzzer(info);
            }
        }));
    });
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.split('\u{1}');
    let src = parts.next().unwrap_or_default();
    let mut messages: Vec<BTreeMap<&str, &str>> = Vec::new();
    let mut turns = 0usize;
    for part in parts {
        let (role, content) = match part.strip_prefix("system:") {
            Some(rest) => ("system", rest),
            None => {
                turns += 1;
                (if turns % 2 == 1 { "user" } else { "assistant" }, part)
            }
        };
        messages.push(BTreeMap::from([("role", role), ("content", content)]));
    }
    if messages.is_empty() {
        messages.push(BTreeMap::from([("role", "user"), ("content", "Hello")]));
    }
    let Ok(env) = jinja::environment_with_fuel("tokenizer.chat_template", src, FUEL) else {
        return;
    };
    let add_generation_prompt = turns % 2 == 1;
    // Every other input offers a tool, so the templates' tool branches run too.
    let tools = (turns % 4 < 2).then(|| {
        serde_json::json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])
    });
    allow_known_bug();
    let rendered = panic::catch_unwind(AssertUnwindSafe(|| {
        jinja::render(
            &env,
            "tokenizer.chat_template",
            &messages,
            tools.as_ref(),
            add_generation_prompt,
            "<s>",
            "</s>",
        )
    }));
    // Only the known bug's panics get here: the others abort in the hook.
    let Ok(rendered) = rendered else {
        return;
    };
    match rendered {
        Ok((out, used)) => {
            assert!(out.len() <= jinja::MAX_OUTPUT_BYTES, "{} bytes", out.len());
            assert!(used <= FUEL, "used {used} of {FUEL}");
        }
        // Every refusal reads as one line after "headroom: error: ".
        Err(jinja::JinjaError::Runaway(r)) => assert!(!r.to_string().contains('\n'), "{r}"),
        Err(jinja::JinjaError::Template(_)) => {}
    }
});
