//! The models the accounting tests load (`cli/planner_vs_llama.rs` on the
//! CPU, `run/rpc.rs` across RPC workers, `run/vulkan.rs` on a Vulkan
//! device): three real shapes in each type mix, written as sparse synthetic
//! files, and the real base demo model; the contexts each is loaded at; and
//! the per-device comparison of a plan with llama.cpp's breakdown.

use std::path::{Path, PathBuf};

use headroom::llama::{self, AccountingParams};
use headroom_planner::hw::HardwareSnapshot;
use headroom_planner::plan::{FlashAttn, Plan, Settings};
use headroom_planner::solve::{self, Build};
use headroom_planner::synth::{self, Mix, Shape};

/// One model file of the accounting tests.
pub struct Case {
    /// "llama-8b Q4_K_M", "gemma-3-270m Q4_K_M (real)".
    pub label: String,
    pub path: PathBuf,
    pub n_ctx_train: u32,
    #[allow(dead_code)] // the CPU-only test does not place layers
    pub n_layer: u32,
}

/// The synthetic shapes in every mix, written into `dir`, then `demo`.
pub fn cases(dir: &Path, demo: PathBuf) -> Vec<Case> {
    let mut cases = Vec::new();
    for shape in [Shape::Llama8B, Shape::Gemma3_4B, Shape::Qwen3Moe30BA3B] {
        for mix in Mix::ALL {
            let path = dir.join(format!("{}-{}.gguf", shape.name(), mix.name()));
            synth::write_sparse(&path, shape, mix).expect("sparse synthetic model");
            let spec = shape.spec();
            cases.push(Case {
                label: format!("{} {}", shape.name(), mix.name()),
                path,
                n_ctx_train: spec.n_ctx_train,
                n_layer: spec.n_layer,
            });
        }
    }
    cases.push(Case {
        label: "gemma-3-270m Q4_K_M (real)".into(),
        path: demo,
        n_ctx_train: 32768,
        n_layer: 18,
    });
    cases
}

/// 512, 4096 and 32768 tokens, as far as the training context allows.
pub fn contexts(n_ctx_train: u32) -> Vec<u32> {
    [512, 4096, 32768]
        .into_iter()
        .filter(|&c| c <= n_ctx_train.max(4096))
        .collect()
}

#[allow(dead_code)] // the CPU-only test compares whole processes
pub fn rel(a: u64, b: u64) -> f64 {
    if b == 0 {
        return if a == 0 { 0.0 } else { 1.0 };
    }
    (a as f64 - b as f64).abs() / b as f64
}

/// Per device (the CPU, each worker, each GPU): weights, KV, compute of
/// the plan against llama.cpp's breakdown; returns the report line and the
/// failures. A device's rows are the ones its planned buffers name; the
/// CPU's are every other row (in RAM: `CPU`, `CPU_REPACK`, the pinned
/// `Vulkan_Host`).
#[allow(dead_code)] // the CPU-only test compares whole processes
pub fn compare(label: &str, plan: &Plan, theirs: &[llama::BufferUse]) -> (String, Vec<String>) {
    let mut fails = Vec::new();
    let mut line = format!("{label:<44}");
    let on_devices: Vec<&str> = plan
        .devices
        .iter()
        .filter(|d| d.name != "CPU")
        .flat_map(|d| d.buffers.iter().map(|b| b.name.as_str()))
        .collect();
    for d in &plan.devices {
        let mine: Vec<&str> = d.buffers.iter().map(|b| b.name.as_str()).collect();
        let is_cpu = d.name == "CPU";
        let rows: Vec<&llama::BufferUse> = theirs
            .iter()
            .filter(|b| {
                if is_cpu {
                    !on_devices.contains(&b.name.as_str())
                } else {
                    mine.contains(&b.name.as_str())
                }
            })
            .collect();
        let (tm, tc, tk) = rows.iter().fold((0, 0, 0), |(m, c, k), b| {
            (m + b.model, c + b.context, k + b.compute)
        });
        let (om, oc) = (d.weights_bytes, d.kv_bytes);
        // The plan's compute row holds llama.cpp's compute buffers and, on
        // the CPU, the output buffer, which llama.cpp counts as context.
        let ok = d.buffers.iter().map(|b| b.compute_bytes).sum::<u64>();
        let oc_all = d.buffers.iter().map(|b| b.context_bytes).sum::<u64>();
        // Held per device: weights (the split rule, the output layer's
        // device), KV, compute (the scheduler's buffers, pipeline
        // parallelism's input copies included) and their total, the
        // margin and our own runtime left out (llama.cpp counts neither).
        let total = d.weights_bytes + d.kv_bytes + d.compute_bytes;
        for (what, a, b, tol) in [
            ("weights", om, tm, 0.01),
            ("KV", oc_all.max(oc), tc, 0.02),
            ("compute", ok, tk, 0.15),
            ("total", total, tm + tc + tk, 0.05),
        ] {
            if rel(a, b) > tol {
                fails.push(format!(
                    "{label} {} {what}: planned {a}, llama.cpp {b} ({:.1}% off, allowed {:.0}%)",
                    d.name,
                    rel(a, b) * 100.0,
                    tol * 100.0
                ));
            }
        }
        line.push_str(&format!(
            "  {}: {}L w {:.0}M kv {:.1}M c {:.1}M/{:.1}M",
            if is_cpu {
                "CPU"
            } else {
                d.buffers
                    .first()
                    .map_or("?", |b| &b.name[..b.name.len().min(7)])
            },
            d.n_layers,
            om as f64 / 1048576.0,
            oc_all.max(oc) as f64 / 1048576.0,
            ok as f64 / 1048576.0,
            tk as f64 / 1048576.0,
        ));
    }
    (line, fails)
}

/// The per-device matrix of the RPC and Vulkan tests: every case at its
/// contexts, flash attention auto and off, `-ngl` 0, about half (an odd
/// count, so two equal devices never tie on a layer) and all; each planned
/// on `machine()` (read again per load: an RPC worker's free memory moves)
/// and compared with llama.cpp's `no_alloc` breakdown in this process.
/// Returns the report lines and every failure of [`compare`].
#[allow(dead_code)] // the CPU-only test compares whole processes
pub fn per_device_matrix(
    cases: &[Case],
    mut machine: impl FnMut() -> HardwareSnapshot,
) -> (Vec<String>, Vec<String>) {
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for case in cases {
        let (label, path, n_layer) = (&case.label, &case.path, case.n_layer);
        let profile = headroom::source::load_profile(path).expect("header");
        let half = (n_layer / 2) | 1;
        for n_ctx in contexts(case.n_ctx_train) {
            for fa in [FlashAttn::Auto, FlashAttn::Off] {
                for ngl in [0, half, n_layer + 1] {
                    let s = Settings {
                        n_ctx: Some(n_ctx),
                        n_batch: 2048,
                        n_ubatch: 512,
                        flash_attn: fa,
                        n_gpu_layers: Some(ngl),
                        ..Settings::default()
                    };
                    let plan = solve::plan(
                        &profile,
                        &path.display().to_string(),
                        &s,
                        &machine(),
                        Build { gpu: true },
                    );
                    let p = AccountingParams::from_settings(
                        path,
                        &s,
                        n_ctx,
                        i32::try_from(ngl).expect("fits"),
                    )
                    .expect("params");
                    let theirs = llama::memory_breakdown(&p).expect("llama.cpp accounts it");
                    let tag = format!(
                        "{label} c{n_ctx} fa-{} ngl{ngl}",
                        if fa == FlashAttn::Auto { "auto" } else { "off" }
                    );
                    let (line, fails) = compare(&tag, &plan, &theirs);
                    report.push(line);
                    failures.extend(fails);
                }
            }
        }
    }
    (report, failures)
}
