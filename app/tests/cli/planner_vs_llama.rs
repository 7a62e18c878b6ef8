//! The planner held to llama.cpp's own numbers: synthetic real-shaped models
//! (dense GQA, sliding window, MoE) in three type mixes, every architecture
//! of `synth::zoo` (latent attention in both DeepSeek layouts, Llama 4's
//! chunked attention, the Qwen3-Next and Granite 4 hybrids with their
//! recurrent state, MTP blocks, gpt-oss, few- and many-expert MoE, Phi-3,
//! Gemma 3n's shared KV cache and per-layer embeddings),
//! and the real test model, loaded with llama.cpp's `no_alloc` accounting
//! (no weights read) and compared per buffer type with the planner's
//! header-only CPU prediction.
//!
//! Tolerances (issues #2 and #13): weights 1%, KV cache (with the recurrent
//! state) 2%, compute buffer 15%, and weights + KV + compute 5% (margin and
//! overhead are ours, not llama.cpp's).
//!
//! The zoo runs here at four settings per model that between them cover
//! 512, 4096 and 32768 tokens, one and four sequences, flash attention auto
//! and off; every combination (and 131072 tokens) is held to recorded
//! llama.cpp figures by the planner's unit tests
//! (`planner/src/memory/tests_zoo.rs`), without a load each.

use std::path::Path;

use headroom::llama::{self, AccountingParams};
use headroom_planner::hw::{self, Overrides, ProbeOptions};
use headroom_planner::plan::{BufferUse, FlashAttn, Plan, Settings};
use headroom_planner::solve::{self, Build};
use headroom_planner::synth::zoo::{self, Model};

use crate::accounting_cases::contexts;

const GIB: u64 = 1 << 30;

fn cpu_machine() -> hw::HardwareSnapshot {
    // This machine's CPU (its features decide repacking) with room for any model.
    let probed = hw::probe(&ProbeOptions {
        measure_bandwidth: false,
        cache_dir: None,
    });
    hw::apply_overrides(
        probed,
        &Overrides {
            ram_bytes: Some(512 * GIB),
            vram_bytes: Some(vec![]),
            profile: None,
        },
    )
    .expect("overrides")
}

fn settings(n_ctx: u32, fa: FlashAttn) -> Settings {
    settings_np(n_ctx, 1, fa)
}

fn settings_np(n_ctx: u32, n_parallel: u32, fa: FlashAttn) -> Settings {
    Settings {
        n_ctx: Some(n_ctx),
        n_batch: 2048,
        n_ubatch: 512,
        n_parallel,
        flash_attn: fa,
        ..Settings::default()
    }
}

fn llama_params(path: &Path, s: &Settings) -> AccountingParams {
    AccountingParams::from_settings(path, s, s.n_ctx.unwrap_or(4096), 0)
        .expect("f16 caches are valid")
}

#[derive(Default, Debug, Clone, Copy)]
struct Sums {
    model: u64,
    context: u64,
    compute: u64,
}

fn planned(plan: &Plan) -> Vec<BufferUse> {
    plan.devices[0].buffers.clone()
}

fn rel(a: u64, b: u64) -> f64 {
    if b == 0 {
        return if a == 0 { 0.0 } else { 1.0 };
    }
    (a as f64 - b as f64).abs() / b as f64
}

/// Compare one model at one setting; returns a line for the report and the failures.
fn compare(
    label: &str,
    path: &Path,
    s: &Settings,
    hw: &hw::HardwareSnapshot,
) -> (String, Vec<String>) {
    let profile = headroom::source::load_profile(path).expect("planner reads the header");
    let plan = solve::plan(
        &profile,
        &path.display().to_string(),
        s,
        hw,
        Build { gpu: false },
    );
    let ours = planned(&plan);
    let theirs =
        llama::memory_breakdown(&llama_params(path, s)).expect("llama.cpp accounts the model");
    let mut fails = Vec::new();
    let mut tot_ours = Sums::default();
    let mut tot_theirs = Sums::default();
    let mut names: Vec<String> = ours
        .iter()
        .map(|b| b.name.clone())
        .chain(theirs.iter().map(|b| b.name.clone()))
        .collect();
    names.sort();
    names.dedup();
    for name in &names {
        let o = ours.iter().find(|b| &b.name == name);
        let t = theirs.iter().find(|b| &b.name == name);
        let (om, oc, ok) = o.map_or((0, 0, 0), |b| {
            (b.model_bytes, b.context_bytes, b.compute_bytes)
        });
        let (tm, tc, tk) = t.map_or((0, 0, 0), |b| (b.model, b.context, b.compute));
        tot_ours.model += om;
        tot_ours.context += oc;
        tot_ours.compute += ok;
        tot_theirs.model += tm;
        tot_theirs.context += tc;
        tot_theirs.compute += tk;
        for (what, a, b, tol) in [
            ("weights", om, tm, 0.01),
            ("KV", oc, tc, 0.02),
            ("compute", ok, tk, 0.15),
        ] {
            if rel(a, b) > tol {
                fails.push(format!("{label} {name} {what}: planned {a}, llama.cpp {b} ({:.1}% off, allowed {:.0}%)", rel(a, b) * 100.0, tol * 100.0));
            }
        }
    }
    let o_all = tot_ours.model + tot_ours.context + tot_ours.compute;
    let t_all = tot_theirs.model + tot_theirs.context + tot_theirs.compute;
    if rel(o_all, t_all) > 0.05 {
        fails.push(format!(
            "{label} total: planned {o_all}, llama.cpp {t_all} ({:.1}% off)",
            rel(o_all, t_all) * 100.0
        ));
    }
    let line = format!(
        "{label:<40} weights {:>+6.2}%  KV {:>+6.2}%  compute {:>+6.2}%  total {:>+6.2}%",
        signed(tot_ours.model, tot_theirs.model),
        signed(tot_ours.context, tot_theirs.context),
        signed(tot_ours.compute, tot_theirs.compute),
        signed(o_all, t_all)
    );
    (line, fails)
}

fn signed(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        (a as f64 - b as f64) / b as f64 * 100.0
    }
}

#[test]
fn planner_matches_llama_cpp_no_alloc_accounting() {
    let hw = cpu_machine();
    let dir = tempfile::tempdir().expect("temp dir");
    let demo =
        headroom::source::demo::demo_model().expect("the test model is fetched by scripts/test.sh");
    let cases = crate::accounting_cases::cases(dir.path(), demo);

    let mut report = Vec::new();
    let mut failures = Vec::new();
    for case in &cases {
        let (label, path) = (&case.label, &case.path);
        for n_ctx in contexts(case.n_ctx_train) {
            for fa in [FlashAttn::Auto, FlashAttn::Off] {
                let s = settings(n_ctx, fa);
                let tag = format!(
                    "{label} c{n_ctx} fa-{}",
                    if fa == FlashAttn::Auto { "auto" } else { "off" }
                );
                let (line, fails) = compare(&tag, path, &s, &hw);
                report.push(line);
                failures.extend(fails);
            }
        }
    }
    println!(
        "planner vs llama.cpp (planned − llama.cpp, % of llama.cpp):\n{}",
        report.join("\n")
    );
    assert!(
        failures.is_empty(),
        "{} comparisons out of tolerance:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every zoo architecture, from its file, at the settings of `ZOO_SETTINGS`
/// its training context allows.
#[test]
fn every_architecture_matches_llama_cpp_no_alloc_accounting() {
    /// (context, sequences, flash attention): each value of each twice.
    const ZOO_SETTINGS: [(u32, u32, FlashAttn); 4] = [
        (512, 1, FlashAttn::Auto),
        (4096, 4, FlashAttn::Off),
        (32768, 4, FlashAttn::Auto),
        (32768, 1, FlashAttn::Off),
    ];
    let hw = cpu_machine();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for m in Model::ALL {
        let ft = m.file_type();
        let path = dir.path().join(format!("{}-{}.gguf", m.name(), ft.name()));
        zoo::write_sparse(&path, m, ft).expect("sparse synthetic model");
        for (n_ctx, np, fa) in ZOO_SETTINGS {
            if u64::from(n_ctx) > m.n_ctx_train().max(4096) {
                continue;
            }
            let tag = format!(
                "{} c{n_ctx} np{np} fa-{}",
                m.name(),
                if fa == FlashAttn::Auto { "auto" } else { "off" }
            );
            let (line, fails) = compare(&tag, &path, &settings_np(n_ctx, np, fa), &hw);
            report.push(line);
            failures.extend(fails);
        }
    }
    println!(
        "planner vs llama.cpp, every architecture (planned − llama.cpp, % of llama.cpp):\n{}",
        report.join("\n")
    );
    assert!(
        failures.is_empty(),
        "{} comparisons out of tolerance:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
