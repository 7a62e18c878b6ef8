//! The memory model held to llama.cpp's own CUDA accounting, recorded on an
//! NVIDIA H200 by `scripts/gpu-check.sh` (issue #21, item 7) in
//! `fixtures/cuda_accounting.jsonl`: every synthetic shape and every
//! architecture of `synth::zoo`, at `-ngl` all, about half and 0, 4096 and
//! 32768 tokens, flash attention auto and off, one and four sequences; a
//! `no_alloc` load on llama.cpp built with CUDA, so the sizes are what that
//! build allocates on that card (the CUDA device buffers, the pinned
//! `CUDA_Host` buffers, the CPU's) and none is a guess from reading code.
//!
//! Held per device, as the RPC and Vulkan matrices are: weights within 1%,
//! the KV cache within 2% (on every case: both are exact), compute within
//! 15% and their total within 5% on every full offload of a model without
//! experts, per-layer embeddings (Gemma 3n, Gemma 4 E2B) or latent
//! attention (DeepSeek 2). Outside that set compute still misses (partial
//! offloads by up to a third, in both directions; MoE models' full offload
//! by 15-45%; DeepSeek-V2-Lite's 2024 layout by up to 90% under, its
//! attention's CUDA copies): they are printed, and their count may not grow.

use std::sync::OnceLock;

use super::{MIB, overhead};
use crate::hw::{HardwareSnapshot, parse_profile};
use crate::plan::{FlashAttn, Plan, Settings};
use crate::profile::{self, ModelProfile};
use crate::solve::{self, Build};
use crate::synth::zoo::{self, Model};
use crate::synth::{self, Mix, Shape};

const RECORDED: &str = include_str!("fixtures/cuda_accounting.jsonl");

/// The machine the figures were recorded on (`machine.txt` of the run).
const MACHINE: &str = include_str!("fixtures/cuda_h200.toml");

/// One llama.cpp buffer of a recorded case.
struct Row {
    name: String,
    bytes: [u64; 3],
}

struct Case {
    id: String,
    model: String,
    settings: Settings,
    rows: Vec<Row>,
}

fn machine() -> &'static HardwareSnapshot {
    static M: OnceLock<HardwareSnapshot> = OnceLock::new();
    M.get_or_init(|| {
        parse_profile(MACHINE, std::path::Path::new("cuda_h200.toml")).expect("the H200 profile")
    })
}

fn cases() -> Vec<Case> {
    RECORDED
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let c: serde_json::Value = serde_json::from_str(line).expect("a JSON case");
            let id = c["id"].as_str().expect("an id").to_string();
            assert_eq!(c["status"], 0, "{id}: llama.cpp refused it: {}", c["error"]);
            let parts: Vec<String> = id.split(':').map(str::to_string).collect();
            let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
            let [model, ngl, ctx, fa, np] = parts[..] else {
                panic!("{id}: not MODEL:nglN:cN:fa-X:npN");
            };
            let num = |s: &str, prefix: &str| -> u32 {
                s.strip_prefix(prefix)
                    .and_then(|v| v.parse().ok())
                    .expect("a number")
            };
            let settings = Settings {
                n_ctx: Some(num(ctx, "c")),
                n_parallel: num(np, "np"),
                n_gpu_layers: Some(num(ngl, "ngl")),
                flash_attn: match fa {
                    "fa-off" => FlashAttn::Off,
                    "fa-on" => FlashAttn::On,
                    _ => FlashAttn::Auto,
                },
                logits_per_sequence: true,
                ..Settings::default()
            };
            let rows = c["buffers"]
                .as_array()
                .expect("buffers")
                .iter()
                .map(|b| Row {
                    name: b["name"].as_str().expect("a name").to_string(),
                    bytes: ["model_bytes", "context_bytes", "compute_bytes"]
                        .map(|k| b[k].as_u64().expect("bytes")),
                })
                .collect();
            Case {
                id,
                model: model.to_string(),
                settings,
                rows,
            }
        })
        .collect()
}

/// The header of a recorded model: a synthetic shape in Q4_K_M or a zoo
/// architecture in its file type, by the name the recording gave it.
fn profile_of(name: &str) -> Option<ModelProfile> {
    let shapes =
        Shape::ALL
            .into_iter()
            .chain([Shape::SmolLm2_135M, Shape::Gemma3_270M, Shape::Llama70B]);
    let shape = shapes
        .into_iter()
        .find(|s| name.strip_suffix("-Q4_K_M") == Some(s.name()));
    let header = if let Some(shape) = shape {
        synth::build(shape, Mix::Q4KM).ok()?
    } else {
        let m = Model::ALL
            .into_iter()
            .find(|m| format!("{}-{}", m.name(), m.file_type().name()) == name)?;
        zoo::build(m, m.file_type()).ok()?
    };
    profile::profile(&header).ok()
}

fn rel(a: u64, b: u64) -> f64 {
    if b == 0 {
        return if a == 0 { 0.0 } else { 1.0 };
    }
    (a as f64 - b as f64) / b as f64
}

/// Per device: the plan's (weights, KV, compute) against llama.cpp's rows
/// for that device (the GPU's: the buffers the plan names on it; the
/// CPU's: every other row, `CUDA_Host` included), and the failures.
fn compare(c: &Case, plan: &Plan) -> (String, Vec<String>) {
    let mut line = format!("{:<52}", c.id);
    let mut fails = Vec::new();
    let on_gpus: Vec<&str> = plan
        .devices
        .iter()
        .filter(|d| d.name != "CPU")
        .flat_map(|d| d.buffers.iter().map(|b| b.name.as_str()))
        .collect();
    for d in &plan.devices {
        let is_cpu = d.name == "CPU";
        let mine: Vec<&str> = d.buffers.iter().map(|b| b.name.as_str()).collect();
        let theirs = c
            .rows
            .iter()
            .filter(|r| {
                if is_cpu {
                    !on_gpus.contains(&r.name.as_str())
                } else {
                    mine.contains(&r.name.as_str())
                }
            })
            .fold([0u64; 3], |acc, r| {
                [
                    acc[0] + r.bytes[0],
                    acc[1] + r.bytes[1],
                    acc[2] + r.bytes[2],
                ]
            });
        let kv = d
            .buffers
            .iter()
            .map(|b| b.context_bytes)
            .sum::<u64>()
            .max(d.kv_bytes);
        let compute = d.buffers.iter().map(|b| b.compute_bytes).sum::<u64>();
        let ours = [d.weights_bytes, kv, compute];
        let total = |v: [u64; 3]| v[0] + v[1] + v[2];
        let e = [
            rel(ours[0], theirs[0]),
            rel(ours[1], theirs[1]),
            rel(ours[2], theirs[2]),
            rel(total(ours), total(theirs)),
        ];
        for (what, err, tol) in [
            ("weights", e[0], 0.01),
            ("KV", e[1], 0.02),
            ("compute", e[2], 0.15),
            ("total", e[3], 0.05),
        ] {
            if err.abs() > tol {
                let i = ["weights", "KV", "compute"].iter().position(|w| *w == what);
                let (a, b) = i.map_or((total(ours), total(theirs)), |i| (ours[i], theirs[i]));
                fails.push(format!(
                    "{} {} {what}: planned {a}, llama.cpp {b} ({:+.1}%, allowed {:.0}%)",
                    c.id,
                    if is_cpu { "CPU" } else { "CUDA0" },
                    err * 100.0,
                    tol * 100.0
                ));
            }
        }
        line.push_str(&format!(
            "  {} {}L w {:+.1}% kv {:+.1}% c {:.0}/{:.0}M",
            if is_cpu { "CPU" } else { "GPU" },
            d.n_layers,
            e[0] * 100.0,
            e[1] * 100.0,
            ours[2] as f64 / 1048576.0,
            theirs[2] as f64 / 1048576.0,
        ));
    }
    (line, fails)
}

/// Misses of compute or total outside the held set, as recorded with these
/// rules: a ratchet (a change that adds one fails; one that mends some
/// should lower it). 154 before the op-offload buffer was replayed through
/// ggml-alloc (`memory/galloc.rs`), which made the `-ngl 0` and partial
/// cases of llama (with and without Llama 3's `rope_freqs`), gemma3, qwen3
/// and qwen3moe exact and added none.
const KNOWN_MISSES: usize = 128;

/// Weights and KV on every case and device; compute and total within their
/// bounds on every full offload of a model without experts, per-layer
/// embeddings or latent attention; the other misses no more than recorded.
#[test]
fn every_recorded_cuda_case_matches_llama_cpp_per_device() {
    let recorded = cases();
    assert!(recorded.len() >= 250, "{} cases recorded", recorded.len());
    let mut report = Vec::new();
    let mut held_fails = Vec::new();
    let mut known = Vec::new();
    let mut held = 0;
    for c in &recorded {
        let p = profile_of(&c.model).unwrap_or_else(|| panic!("{}: no such model here", c.id));
        let plan = solve::plan(&p, &c.model, &c.settings, machine(), Build { gpu: true });
        let (line, fails) = compare(c, &plan);
        report.push(line);
        let full = c.settings.n_gpu_layers.is_some_and(|n| n > p.n_layer);
        let plain = p.experts.is_none()
            && !p.globals.iter().any(|t| t.name.starts_with("per_layer"))
            && !c.model.starts_with("deepseek2");
        if full && plain {
            held += 1;
        }
        for f in fails {
            // Weights and KV are held everywhere.
            if f.contains(" weights:") || f.contains(" KV:") || (full && plain) {
                held_fails.push(f);
            } else {
                known.push(f);
            }
        }
    }
    println!(
        "plan vs llama.cpp's CUDA accounting (H200):\n{}\n\nknown misses ({}):\n{}",
        report.join("\n"),
        known.len(),
        known.join("\n")
    );
    assert!(held >= 40, "only {held} full offloads held");
    assert!(
        held_fails.is_empty(),
        "{} out of bounds:\n{}",
        held_fails.len(),
        held_fails.join("\n")
    );
    assert!(
        known.len() <= KNOWN_MISSES,
        "{} misses outside the held set, {KNOWN_MISSES} recorded",
        known.len()
    );
}

/// What a CUDA process takes beyond llama.cpp's buffers
/// ([`overhead::CUDA_CONTEXT`], plus [`overhead::CUDA_EXPERT_KERNELS`] for a
/// model with experts) against 14 real loads on the H200
/// (`fixtures/cuda_h200_loads.json`): never below llama.cpp's own
/// "unaccounted" figure, at most 10% above it; and that figure is what
/// nvidia-smi saw beyond the buffers (1-2 MiB more in 13 loads: llama.cpp
/// prints whole MiB).
#[test]
fn the_cuda_context_is_what_real_loads_took_beyond_their_buffers() {
    let doc: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/cuda_h200_loads.json"))
            .expect("fixture is JSON");
    let loads = doc["loads"].as_array().expect("loads");
    assert!(loads.len() >= 10, "{} loads", loads.len());
    for l in loads {
        let mib = |k: &str| l[k].as_u64().unwrap_or_else(|| panic!("{k}"));
        let case = l["case"].as_str().expect("case");
        let planned = if l["experts"].as_bool().expect("experts") {
            overhead::CUDA_CONTEXT + overhead::CUDA_EXPERT_KERNELS
        } else {
            overhead::CUDA_CONTEXT
        } / MIB;
        let unaccounted = mib("unaccounted_mib");
        assert!(
            planned >= unaccounted && planned * 10 <= unaccounted * 11,
            "{case}: planned {planned} MiB, llama.cpp's unaccounted {unaccounted} MiB"
        );
        let buffers = mib("model_mib") + mib("context_mib") + mib("compute_mib");
        let seen = mib("vram_used_mib");
        // nvidia-smi, sampled every 0.1 s, can miss the last of a short
        // run (Gemma 3 270M's: 17 MiB of 1512); it never saw more.
        let total = buffers + unaccounted;
        assert!(
            seen <= total + 4 && seen * 100 >= total * 98,
            "{case}: buffers {buffers} + unaccounted {unaccounted} MiB, nvidia-smi {seen} MiB"
        );
    }
}
