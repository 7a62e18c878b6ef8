//! The real test model (the demo model), shared by the test binaries.

#![allow(dead_code)] // Each test binary uses a different part of it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `HEADROOM_TEST_MODEL` when set, else the base demo model (Gemma 3 270M)
/// as `headroom demo-model demo-base` prints it (fetching and verifying it
/// first); asked once per test binary.
pub fn demo_model() -> PathBuf {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            if let Some(p) = std::env::var_os("HEADROOM_TEST_MODEL") {
                return PathBuf::from(p);
            }
            demo_model_named("demo-base")
        })
        .clone()
}

/// The instruct demo model (SmolLM2-135M-Instruct, with its chat template),
/// as `headroom demo-model demo` prints it; asked once per test binary.
pub fn instruct_model() -> &'static Path {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    MODEL.get_or_init(|| demo_model_named("demo"))
}

/// What `headroom demo-model NAME` prints.
fn demo_model_named(name: &str) -> PathBuf {
    let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["demo-model", name])
        .output()
        .expect("run headroom demo-model");
    assert!(
        out.status.success(),
        "headroom demo-model {name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// `model` with `template` as its `tokenizer.chat_template`, written to
/// `path`: its header rewritten with every key kept (the template added or
/// replaced), then its tensor data, whose offsets are relative to the data
/// section and so unchanged. For tests of hostile templates on a real model.
pub fn with_chat_template(model: &Path, path: &Path, template: &str) {
    use headroom_planner::gguf::writer::to_bytes;
    use headroom_planner::gguf::{ParseLimits, Value, read_header_with};
    use std::io::{Seek, SeekFrom, Write};

    let open = || std::fs::File::open(model).expect("open the model");
    let mut header = read_header_with(open(), &ParseLimits::keep_all()).expect("model header");
    header
        .metadata
        .retain(|(key, _)| key != "tokenizer.chat_template");
    header
        .metadata
        .push(("tokenizer.chat_template".into(), Value::from(template)));
    let mut out = std::fs::File::create(path).expect("create model");
    out.write_all(&to_bytes(&header).expect("header bytes"))
        .expect("write header");
    let mut data = open();
    data.seek(SeekFrom::Start(header.data_offset))
        .expect("seek to the data");
    std::io::copy(&mut data, &mut out).expect("copy the tensor data");
}
