//! Records `src/memory/fixtures/llama_accounting.json`: llama.cpp's own
//! per-buffer figures for synthetic models, the expected values of the memory
//! model's unit tests (`src/memory/tests.rs`).
//!
//! Why a recorder: the planner never links llama.cpp, so its unit tests cannot
//! ask llama.cpp; the numbers are recorded once, from a build of the app, and
//! kept. Each case writes a synthetic header (`synth::write_sparse`: the exact
//! header of the shape and mix, a hole for the data) and runs
//! `headroom llama-accounting FILE --json` with the case's settings: a
//! `no_alloc` load, so no weights are read and the sizes are what llama.cpp
//! would allocate on this CPU (its features decide `CPU_REPACK`; they are
//! recorded with the cases).
//!
//! Run (after `cargo build --release -p headroom`):
//! `cargo run --release -p headroom-planner --example record_memory_fixtures --
//!  target/release/headroom /tmp/headroom-fixtures > planner/src/memory/fixtures/llama_accounting.json`
//!
//! With `--zoo` after the two arguments it records the architectures of
//! `synth::zoo` instead (with model names after `--zoo`, only those
//! models' rows, for appending a new model's to the fixture) (latent attention in both layouts, chunked
//! attention, hybrid recurrent models, MTP blocks, few and many experts,
//! Gemma 3n's shared KV cache) at
//! every context, sequence count and flash attention setting the planner
//! promises, into `src/memory/fixtures/zoo_accounting.json`.

use std::path::{Path, PathBuf};
use std::process::Command;

use headroom_planner::hw::{self, ProbeOptions};
use headroom_planner::synth::zoo::{self, Model};
use headroom_planner::synth::{self, Mix, Shape};
use serde_json::{Value, json};

/// Which synthetic model a case loads.
#[derive(Clone, Copy)]
enum Source {
    /// A plain shape in a mix (`synth::write_sparse`).
    Shape(Shape, Mix),
    /// An architecture of the zoo, in its file type (`zoo::write_sparse`).
    Zoo(Model),
}

impl Source {
    /// The file name in the scratch directory.
    fn file_name(self) -> String {
        match self {
            Source::Shape(shape, mix) => format!("{}-{}.gguf", shape.name(), mix.name()),
            Source::Zoo(m) => format!("{}-{}.gguf", m.name(), m.file_type().name()),
        }
    }

    fn write(self, file: &Path) -> Result<(), String> {
        match self {
            Source::Shape(shape, mix) => synth::write_sparse(file, shape, mix).map(drop),
            Source::Zoo(m) => zoo::write_sparse(file, m, m.file_type()).map(drop),
        }
        .map_err(|e| e.to_string())
    }

    /// `"shape"` (or `"model"` for the zoo) and `"mix"`, as the fixtures name them.
    fn keys(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Source::Shape(shape, mix) => ("shape", shape.name(), mix.name()),
            Source::Zoo(m) => ("model", m.name(), m.file_type().name()),
        }
    }
}

/// One recorded load: a model and the settings that size its context.
struct Case {
    source: Source,
    n_ctx: u32,
    n_parallel: u32,
    flash_attn: &'static str,
    cache_type_k: &'static str,
    cache_type_v: &'static str,
    swa_full: bool,
    repack: bool,
}

impl Case {
    fn new(shape: Shape, mix: Mix, n_ctx: u32) -> Self {
        Self::of(Source::Shape(shape, mix), n_ctx)
    }

    /// Whether `other` is the same load (same file and settings).
    fn same_as(&self, other: &Case) -> bool {
        self.source.keys() == other.source.keys()
            && (self.n_ctx, self.n_parallel, self.flash_attn)
                == (other.n_ctx, other.n_parallel, other.flash_attn)
            && (self.cache_type_k, self.cache_type_v) == (other.cache_type_k, other.cache_type_v)
            && (self.swa_full, self.repack) == (other.swa_full, other.repack)
    }

    fn of(source: Source, n_ctx: u32) -> Self {
        Self {
            source,
            n_ctx,
            n_parallel: 1,
            flash_attn: "auto",
            cache_type_k: "f16",
            cache_type_v: "f16",
            swa_full: false,
            repack: true,
        }
    }
}

/// Weights in every shape and mix, repacked or not (the context is small:
/// only the weights matter); then contexts, sequences, cache types, flash
/// attention and full sliding-window caches on the Q4_K_M files.
fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for shape in Shape::ALL {
        for mix in Mix::ALL {
            for repack in [true, false] {
                v.push(Case {
                    repack,
                    ..Case::new(shape, mix, 512)
                });
            }
        }
    }
    for shape in Shape::ALL {
        let q = |n_ctx| Case::new(shape, Mix::Q4KM, n_ctx);
        let long = shape.spec().n_ctx_train.min(32768);
        v.push(q(4096));
        v.push(q(long));
        v.push(Case {
            flash_attn: "off",
            ..q(4096)
        });
        v.push(Case {
            n_parallel: 4,
            ..q(4096)
        });
        // Not a multiple of 256 nor of the sequences: llama.cpp's padding.
        v.push(Case {
            n_parallel: 3,
            ..q(1000)
        });
        v.push(Case {
            flash_attn: "on",
            cache_type_k: "q8_0",
            cache_type_v: "q8_0",
            ..q(4096)
        });
        v.push(Case {
            cache_type_k: "q4_0",
            ..q(4096)
        });
        if shape.spec().sliding_window.is_some() {
            v.push(Case {
                swa_full: true,
                ..q(4096)
            });
        }
    }
    // Gemma 3 (sliding window) and Qwen3-MoE have no zoo model of their own:
    // the zoo's whole matrix on their Q4_K_M shapes (issue #13), where the
    // cases above do not already hold a point.
    for shape in [Shape::Gemma3_4B, Shape::Qwen3Moe30BA3B] {
        for n_ctx in [512, 4096, 32768, 131_072] {
            if n_ctx > shape.spec().n_ctx_train.max(4096) {
                continue;
            }
            for n_parallel in [1, 4] {
                for flash_attn in ["auto", "off"] {
                    let c = Case {
                        n_parallel,
                        flash_attn,
                        ..Case::new(shape, Mix::Q4KM, n_ctx)
                    };
                    if !v.iter().any(|o| o.same_as(&c)) {
                        v.push(c);
                    }
                }
            }
        }
    }
    v
}

/// The zoo: each model at 512, 4096, 32768 and (where its training context
/// allows) 131072 tokens, one and four sequences, flash attention auto and
/// off, f16 caches; and a q8_0 cache with flash attention on at 4096.
fn zoo_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for m in Model::ALL {
        for n_ctx in [512, 4096, 32768, 131_072] {
            if u64::from(n_ctx) > m.n_ctx_train().max(4096) {
                continue;
            }
            for n_parallel in [1, 4] {
                for flash_attn in ["auto", "off"] {
                    v.push(Case {
                        n_parallel,
                        flash_attn,
                        ..Case::of(Source::Zoo(m), n_ctx)
                    });
                }
            }
        }
        v.push(Case {
            flash_attn: "on",
            cache_type_k: "q8_0",
            cache_type_v: "q8_0",
            ..Case::of(Source::Zoo(m), 4096)
        });
    }
    v
}

fn record(headroom: &Path, file: &Path, c: &Case) -> Result<Value, String> {
    let mut cmd = Command::new(headroom);
    cmd.arg("llama-accounting")
        .arg(file)
        .args(["--json", "-c", &c.n_ctx.to_string()])
        .args(["--parallel", &c.n_parallel.to_string()])
        .args(["--flash-attn", c.flash_attn])
        .args(["--cache-type-k", c.cache_type_k])
        .args(["--cache-type-v", c.cache_type_v]);
    if c.swa_full {
        cmd.arg("--swa-full");
    }
    if !c.repack {
        cmd.arg("--no-repack");
    }
    let out = cmd.output().map_err(|e| format!("running headroom: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let doc: Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    Ok(doc["buffers"].clone())
}

/// The llama.cpp the binary links, as its plans name it.
fn llama_cpp_version(headroom: &Path, file: &Path) -> Result<Value, String> {
    let out = Command::new(headroom)
        .arg("plan")
        .arg(file)
        .arg("--json")
        .output()
        .map_err(|e| format!("running headroom plan: {e}"))?;
    let plan: Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    Ok(plan["llama_cpp"].clone())
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let (headroom, dir, zoo, only) = match args.as_slice() {
        [_, headroom, dir] => (headroom, dir, false, &[][..]),
        [_, headroom, dir, flag, only @ ..] if flag == "--zoo" => (headroom, dir, true, only),
        _ => {
            return Err(
                "usage: record_memory_fixtures HEADROOM_BINARY SCRATCH_DIR [--zoo [MODEL...]]"
                    .into(),
            );
        }
    };
    if let Some(bad) = only.iter().find(|m| Model::from_name(m).is_none()) {
        return Err(format!("{bad}: not a zoo model"));
    }
    let headroom = PathBuf::from(headroom);
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let version = Command::new(&headroom)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .map_err(|e| e.to_string())?;
    let cpu = hw::probe(&ProbeOptions {
        measure_bandwidth: false,
        cache_dir: None,
    })
    .cpu;
    let mut rows = Vec::new();
    let mut llama_cpp = Value::Null;
    let mut cases = if zoo { zoo_cases() } else { cases() };
    // `--zoo MODEL...`: only those models' rows (to append to the fixture).
    if !only.is_empty() {
        cases.retain(|c| only.iter().any(|m| m == c.source.keys().1));
    }
    for c in cases {
        let file = dir.join(c.source.file_name());
        if !file.exists() {
            c.source.write(&file)?;
        }
        if llama_cpp.is_null() {
            llama_cpp = llama_cpp_version(&headroom, &file)?;
        }
        let (kind, name, mix) = c.source.keys();
        let buffers =
            record(&headroom, &file, &c).map_err(|e| format!("{name} {mix} c{}: {e}", c.n_ctx))?;
        eprintln!(
            "{name} {mix} c{} np{} fa-{}",
            c.n_ctx, c.n_parallel, c.flash_attn
        );
        rows.push(json!({
            kind: name,
            "mix": mix,
            "n_ctx": c.n_ctx,
            "n_parallel": c.n_parallel,
            "flash_attn": c.flash_attn,
            "cache_type_k": c.cache_type_k,
            "cache_type_v": c.cache_type_v,
            "swa_full": c.swa_full,
            "repack": c.repack,
            // `headroom llama-accounting` reserves one logits row per
            // sequence (`n_outputs_max`, as every headroom command loads).
            "logits_per_sequence": true,
            "buffers": buffers,
        }));
    }
    // One case a line: the file stays short and its diffs readable.
    let head = json!({
        "recorded_by": format!(
            "cargo run --release -p headroom-planner --example record_memory_fixtures -- target/release/headroom /tmp/headroom-fixtures{}",
            if zoo { " --zoo" } else { "" }
        ),
        "headroom": version,
        "llama_cpp": llama_cpp,
        "cpu_arch": cpu.arch,
        "cpu_features": cpu.features,
    });
    let head = serde_json::to_string_pretty(&head).map_err(|e| e.to_string())?;
    let rows: Vec<String> = rows.iter().map(Value::to_string).collect();
    println!(
        "{},\n  \"cases\": [\n    {}\n  ]\n}}",
        head.trim_end_matches("\n}"),
        rows.join(",\n    ")
    );
    Ok(())
}
