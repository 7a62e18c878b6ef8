//! The planner on machines it does not run on: verdicts, layers and context
//! for simulated hardware, each plan checked to be tight (one more GPU layer
//! or the next context step would break a budget), and monotone in memory.

use std::path::{Path, PathBuf};

use headroom_planner::hw::{self, HardwareSnapshot, Overrides};
use headroom_planner::plan::{Plan, Settings, Verdict, WarningCode};
use headroom_planner::profile::{self, ModelProfile};
use headroom_planner::solve::{self, Build};
use headroom_planner::synth::{self, Mix, Shape};

const GIB: u64 = 1 << 30;
const GPU_BUILD: Build = Build { gpu: true };

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hw")
        .join(name)
}

fn machine(profile_file: &str, ram: Option<u64>, vram: Option<Vec<u64>>) -> HardwareSnapshot {
    let base = hw::load_profile(&fixture(profile_file)).expect("fixture profile loads");
    hw::apply_overrides(
        base,
        &Overrides {
            ram_bytes: ram,
            vram_bytes: vram,
            profile: None,
        },
    )
    .expect("overrides apply")
}

/// A fixture's profile as it stands.
fn profile_of(profile_file: &str) -> HardwareSnapshot {
    hw::load_profile(&fixture(profile_file)).expect("profile")
}

fn model(shape: Shape, mix: Mix) -> ModelProfile {
    let header = synth::build(shape, mix).expect("synthetic header builds");
    profile::profile(&header).expect("synthetic header profiles")
}

fn plan_for(p: &ModelProfile, s: &Settings, hw: &HardwareSnapshot) -> Plan {
    solve::plan(p, "model.gguf", s, hw, GPU_BUILD)
}

/// Llama-3-8B in Q4_K_M, Q8_0 and F16, and their bits per weight.
fn llama_8b_files() -> ([ModelProfile; 3], Vec<f64>) {
    let files = [
        model(Shape::Llama8B, Mix::Q4KM),
        model(Shape::Llama8B, Mix::Q8_0),
        model(Shape::Llama8B, Mix::F16),
    ];
    let bpw = files.iter().map(solve::bits_per_weight).collect();
    (files, bpw)
}

/// `plan` warns with `code` (`what`: why it must).
fn assert_warns(plan: &Plan, code: WarningCode, what: &str) {
    assert!(
        plan.warnings.iter().any(|w| w.code == code),
        "{what}: {:?}",
        plan.warnings
    );
}

fn with(s: &Settings, n_ctx: u32, ngl: u32) -> Settings {
    let mut t = s.clone();
    t.n_ctx = Some(n_ctx);
    t.n_gpu_layers = Some(ngl);
    t
}

/// The contexts the solver may step through for this model.
fn steps(p: &ModelProfile) -> Vec<u32> {
    let train = u32::try_from(p.n_ctx_train).unwrap_or(u32::MAX);
    let cap = train.min(solve::MAX_AUTO_CTX);
    let mut v = vec![solve::MIN_DEFAULT_CTX.min(train)];
    while *v.last().unwrap() < cap {
        let next = (v.last().unwrap() * 2).min(cap);
        v.push(next);
    }
    v
}

/// One more GPU layer, or the next context step at the same layers, must
/// break a budget, unless the plan is already at the cap of both.
fn assert_tight(p: &ModelProfile, s: &Settings, hw: &HardwareSnapshot, plan: &Plan) {
    assert!(plan.verdict.fits(), "only fitting plans can be tight");
    let has_gpu = plan.devices.len() > 1;
    let all = p.n_layer + 1;
    if has_gpu && plan.n_gpu_layers < all {
        let more = plan_for(p, &with(s, plan.n_ctx, plan.n_gpu_layers + 1), hw);
        assert_eq!(
            more.verdict,
            Verdict::DoesNotFit,
            "{} layers fit too, but the plan chose {} at context {}",
            plan.n_gpu_layers + 1,
            plan.n_gpu_layers,
            plan.n_ctx
        );
    }
    let steps = steps(p);
    if let Some(next) = steps.iter().copied().find(|&c| c > plan.n_ctx) {
        let bigger = plan_for(p, &with(s, next, plan.n_gpu_layers), hw);
        let free = plan_for(
            p,
            &{
                let mut t = s.clone();
                t.n_ctx = Some(next);
                t
            },
            hw,
        );
        assert!(
            bigger.verdict == Verdict::DoesNotFit || free.n_gpu_layers < plan.n_gpu_layers,
            "context {next} fits with the same {} layers, but the plan stopped at {}",
            plan.n_gpu_layers,
            plan.n_ctx
        );
    }
}

#[test]
fn two_gib_no_gpu() {
    let hw = machine("gpu-8g-ram-16g.toml", Some(2 * GIB), Some(vec![]));
    let s = Settings::default();
    let small = model(Shape::Gemma3_1B, Mix::Q4KM);
    let plan = plan_for(&small, &s, &hw);
    assert_eq!(plan.verdict, Verdict::Fits, "{:?}", plan.warnings);
    assert_eq!(plan.devices.len(), 1, "no GPU on this machine");
    assert_eq!(plan.n_gpu_layers, 0);
    assert!(plan.n_ctx >= 4096);
    assert!(plan.ram.anonymous_bytes + plan.devices[0].margin_bytes <= 2 * GIB);
    assert_tight(&small, &s, &hw, &plan);

    let big = model(Shape::Llama8B, Mix::Q4KM);
    let plan = plan_for(&big, &s, &hw);
    assert_eq!(plan.verdict, Verdict::DoesNotFit);
    assert!(
        plan.warnings
            .iter()
            .any(|w| w.code == WarningCode::DoesNotFit && w.message.contains("RAM"))
    );
}

#[test]
fn container_limit_beats_host_ram() {
    // 512 MiB cgroup on a 64 GiB host: the host would take a 1B model easily.
    let hw = profile_of("container-512m.toml");
    let s = Settings::default();
    let p = model(Shape::Llama1B, Mix::Q4KM);
    let plan = plan_for(&p, &s, &hw);
    assert_eq!(plan.verdict, Verdict::DoesNotFit);
    assert!(
        plan.ram.budget_bytes < 512 << 20,
        "budget {} must be the cgroup's headroom",
        plan.ram.budget_bytes
    );

    let host = machine("container-512m.toml", Some(60 * GIB), None);
    assert_eq!(plan_for(&p, &s, &host).verdict, Verdict::Fits);
}

#[test]
fn unified_laptop_32g() {
    let hw = profile_of("laptop-unified-32g.toml");
    let s = Settings::default();
    let p = model(Shape::Llama8B, Mix::Q8_0);
    let plan = plan_for(&p, &s, &hw);
    assert_eq!(plan.verdict, Verdict::Fits);
    assert_eq!(
        plan.n_gpu_layers,
        p.n_layer + 1,
        "everything on the unified GPU"
    );
    assert_eq!(
        plan.devices[1].kind,
        headroom_planner::plan::DeviceKind::Unified
    );
    assert_tight(&p, &s, &hw, &plan);

    // A 61 GB MoE: GPU and CPU draw on the same 24 GiB. With mmap the layers left
    // on the CPU page from disk (allowed, with a warning); read into memory they
    // cannot fit at all.
    let f16 = model(Shape::Qwen3Moe30BA3B, Mix::F16);
    let plan = plan_for(&f16, &s, &hw);
    assert_eq!(plan.verdict, Verdict::FitsWithOffload);
    assert_warns(
        &plan,
        WarningCode::PagesFromDisk,
        "mapped layers on the CPU",
    );
    let no_mmap = Settings {
        mmap: false,
        ..s.clone()
    };
    assert_eq!(plan_for(&f16, &no_mmap, &hw).verdict, Verdict::DoesNotFit);
}

#[test]
fn gpu_8g_ram_16g() {
    let hw = profile_of("gpu-8g-ram-16g.toml");
    let s = Settings::default();
    let q4 = model(Shape::Llama8B, Mix::Q4KM);
    let plan = plan_for(&q4, &s, &hw);
    assert_eq!(plan.verdict, Verdict::Fits, "{:?}", plan.warnings);
    assert_eq!(plan.n_gpu_layers, q4.n_layer + 1);
    assert_tight(&q4, &s, &hw, &plan);

    let f16 = model(Shape::Llama8B, Mix::F16);
    let plan = plan_for(&f16, &s, &hw);
    assert_eq!(plan.verdict, Verdict::FitsWithOffload);
    assert!(plan.n_gpu_layers > 0 && plan.n_gpu_layers < f16.n_layer);
    assert_warns(&plan, WarningCode::OffloadSlow, "part offloaded");
    assert_tight(&f16, &s, &hw, &plan);
}

#[test]
fn two_24g_gpus() {
    let hw = profile_of("two-24g-gpus.toml");
    let s = Settings::default();
    let moe = model(Shape::Qwen3Moe30BA3B, Mix::Q4KM);
    let plan = plan_for(&moe, &s, &hw);
    assert_eq!(plan.verdict, Verdict::Fits, "{:?}", plan.warnings);
    assert_eq!(plan.devices.len(), 3);
    assert!(
        plan.devices[1].n_layers > 0 && plan.devices[2].n_layers > 0,
        "layers on both GPUs"
    );
    assert!(plan.llama_args.iter().any(|a| a == "-ts"));
    assert_tight(&moe, &s, &hw, &plan);

    let f16 = model(Shape::Qwen3Moe30BA3B, Mix::F16);
    let plan = plan_for(&f16, &s, &hw);
    assert_eq!(
        plan.verdict,
        Verdict::FitsWithOffload,
        "{:?}",
        plan.warnings
    );
    assert_tight(&f16, &s, &hw, &plan);
}

#[test]
fn a100_80g_70b_context_gives() {
    let hw = profile_of("a100-80g.toml");
    let s = Settings::default();
    let p = model(Shape::Llama70B, Mix::Q4KM);
    let plan = plan_for(&p, &s, &hw);
    assert_eq!(plan.verdict, Verdict::Fits, "{:?}", plan.warnings);
    assert_eq!(
        plan.n_gpu_layers,
        p.n_layer + 1,
        "all layers stay on the GPU"
    );
    let train = u32::try_from(p.n_ctx_train).unwrap();
    assert!(
        plan.n_ctx < train,
        "the context gives: {} of {train}",
        plan.n_ctx
    );
    // At the training context every layer no longer fits on the GPU.
    let full = plan_for(&p, &with(&s, train, p.n_layer + 1), &hw);
    assert_eq!(full.verdict, Verdict::DoesNotFit);
    assert_tight(&p, &s, &hw, &plan);
}

/// Plan `b` (more memory) must not be worse than plan `a` for the same file.
fn assert_not_worse(a: &Plan, b: &Plan, what: &str) {
    if !a.verdict.fits() {
        return;
    }
    assert!(b.verdict.fits(), "{what}: more memory lost the fit");
    assert!(
        b.n_gpu_layers >= a.n_gpu_layers,
        "{what}: fewer GPU layers ({} < {})",
        b.n_gpu_layers,
        a.n_gpu_layers
    );
    assert!(
        b.n_ctx >= a.n_ctx || b.n_gpu_layers > a.n_gpu_layers,
        "{what}: smaller context ({} < {}) for the same layers",
        b.n_ctx,
        a.n_ctx
    );
}

#[test]
fn more_memory_never_gives_a_worse_plan() {
    let s = Settings::default();
    let (files, bpw) = llama_8b_files();
    let vrams = [0u64, 4, 6, 8, 12, 16, 24, 48];
    let rams = [4u64, 8, 16, 32];
    // grid[v][r] = (plans per file, chosen (bpw, tok/s) if it fits)
    type Cell = (Vec<Plan>, Option<(f64, f64)>);
    let mut grid: Vec<Vec<Cell>> = Vec::new();
    for &vram in &vrams {
        let mut row = Vec::new();
        for &ram in &rams {
            let v = if vram == 0 { vec![] } else { vec![vram * GIB] };
            let hw = machine("gpu-8g-ram-16g.toml", Some(ram * GIB), Some(v));
            let plans: Vec<Plan> = files.iter().map(|p| plan_for(p, &s, &hw)).collect();
            let chosen = solve::choose(plans.clone(), &bpw).expect("a choice");
            let q = files
                .iter()
                .position(|f| f.quant == chosen.quant)
                .expect("known quant");
            let pick = chosen
                .verdict
                .fits()
                .then_some((bpw[q], chosen.est_decode_tokens_per_s));
            row.push((plans, pick));
        }
        grid.push(row);
    }
    for v in 0..vrams.len() {
        for r in 0..rams.len() {
            let mut neighbours = Vec::new();
            if v > 0 {
                neighbours.push((v - 1, r));
            }
            if r > 0 {
                neighbours.push((v, r - 1));
            }
            for (pv, pr) in neighbours {
                let what = format!(
                    "{}→{} GiB VRAM, {}→{} GiB RAM",
                    vrams[pv], vrams[v], rams[pr], rams[r]
                );
                for (i, f) in files.iter().enumerate() {
                    // Adding VRAM to a machine with none changes which memory holds the weights.
                    if vrams[pv] == 0 && vrams[v] > 0 {
                        continue;
                    }
                    assert_not_worse(
                        &grid[pv][pr].0[i],
                        &grid[v][r].0[i],
                        &format!("{} {what}", f.quant),
                    );
                }
                if let (Some(a), Some(b)) = (grid[pv][pr].1, grid[v][r].1) {
                    assert!(
                        b.0 >= a.0 || b.1 >= a.1 * 0.999,
                        "{what}: choice got lower in quality and slower: {a:?} -> {b:?}"
                    );
                } else {
                    assert!(
                        grid[pv][pr].1.is_none() || grid[v][r].1.is_some(),
                        "{what}: nothing fits any more"
                    );
                }
            }
        }
    }
}

/// A file whose mapped weights do not fit in RAM "fits" (the kernel pages
/// them from disk) but crawls; the choice must prefer a smaller file that is
/// resident, not the highest quality.
#[test]
fn a_file_that_would_page_from_disk_is_not_chosen_over_one_that_fits() {
    let s = Settings::default();
    let (files, bpw) = llama_8b_files();
    let hw = machine("gpu-8g-ram-16g.toml", Some(12 * GIB), Some(vec![]));
    let plans: Vec<Plan> = files.iter().map(|p| plan_for(p, &s, &hw)).collect();
    let f16 = &plans[2];
    assert_warns(
        f16,
        WarningCode::PagesFromDisk,
        "the 16 GB F16 file cannot stay resident in 12 GiB",
    );
    let chosen = solve::choose(plans.clone(), &bpw).expect("a choice");
    assert_ne!(
        chosen.quant, f16.quant,
        "chose the file that pages from disk"
    );
    assert!(
        chosen
            .warnings
            .iter()
            .all(|w| w.code != WarningCode::PagesFromDisk)
    );
    assert_eq!(
        chosen.quant, plans[1].quant,
        "Q8_0 (8.5 GB) is resident in 12 GiB"
    );
}
