//! llama.cpp's spelling of flags: its multi-letter single-dash flags
//! (`-ngl`, `-ctk`, `-fa`) rewritten to the long forms before clap sees them,
//! since clap would read `-fa` as `-f a`.

use std::ffi::OsString;

/// llama.cpp's multi-letter single-dash flags, and the long forms clap knows.
const LLAMA_SHORT_FLAGS: &[(&str, &str)] = &[
    ("-ngl", "--n-gpu-layers"),
    ("-ctk", "--cache-type-k"),
    ("-ctv", "--cache-type-v"),
    ("-fa", "--flash-attn"),
    ("-ub", "--ubatch-size"),
    ("-np", "--parallel"),
];

/// Rewrite llama.cpp's multi-letter short flags (`-ngl 20`, `-fa=on`) to their
/// long forms, because clap would read `-fa` as `-f a`. Stops at `--`.
pub fn rewrite_llama_flags(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut passthrough = false;
    for arg in args {
        if passthrough {
            out.push(arg);
            continue;
        }
        let Some(s) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        if s == "--" {
            passthrough = true;
            out.push(arg);
            continue;
        }
        let rewritten = LLAMA_SHORT_FLAGS.iter().find_map(|(short, long)| {
            if s == *short {
                Some(OsString::from(*long))
            } else {
                s.strip_prefix(short)
                    .and_then(|rest| rest.strip_prefix('='))
                    .map(|v| OsString::from(format!("{long}={v}")))
            }
        });
        out.push(rewritten.unwrap_or(arg));
    }
    out
}
