//! The solver's rules held directly, on real-shaped models (the synthetic
//! shapes, and dense models the catalog's generic shape builds from a
//! parameter count) and simulated machines:
//! - tightness: the GPU layers chosen fit, and one more does not;
//! - monotonicity: more VRAM never gives fewer GPU layers, more RAM never
//!   turns a fit into a failure;
//! - the context search: the documented steps, grown only while that costs
//!   no GPU layer and still fits.

use std::sync::OnceLock;

use proptest::prelude::*;

use super::*;
use crate::hw::{self, Overrides};
use crate::profile;
use crate::speed::RamBandwidthSource;
use crate::synth::facts::{self, PartialFacts};
use crate::synth::mix::FileType;
use crate::synth::{self, Mix, Shape};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
const GPU: Build = Build { gpu: true };

/// headroom's default hardware profile (8 x86-64 cores with AVX2) with this
/// RAM and these GPUs (none when empty).
pub(crate) fn snapshot(ram: u64, vram: &[u64]) -> HardwareSnapshot {
    let base = hw::parse_profile("", std::path::Path::new("default profile"))
        .expect("the default profile parses");
    hw::apply_overrides(
        base,
        &Overrides {
            ram_bytes: Some(ram),
            vram_bytes: Some(if vram.is_empty() {
                vec![0]
            } else {
                vram.to_vec()
            }),
            profile: None,
        },
    )
    .expect("valid overrides")
}

/// A fixture machine of `tests/fixtures/hw` with its RAM set to `ram`.
fn fixture(name: &str, ram: u64) -> HardwareSnapshot {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hw")
        .join(name);
    let base = hw::load_profile(&path).expect("fixture profile loads");
    hw::apply_overrides(
        base,
        &Overrides {
            ram_bytes: Some(ram),
            vram_bytes: None,
            profile: None,
        },
    )
    .expect("valid overrides")
}

fn shape(shape: Shape, mix: Mix) -> ModelProfile {
    profile::profile(&synth::build(shape, mix).expect("synthetic header builds"))
        .expect("synthetic header profiles")
}

/// A dense model of `n` parameters in the catalog's generic shape.
fn dense(n: u64, ft: FileType) -> ModelProfile {
    let f = facts::estimate(&PartialFacts::default(), n).expect("a generic shape reaches n");
    facts::profile(&f, ft).expect("generic facts profile")
}

/// The models the properties draw from, built once: every synthetic shape
/// (dense, sliding window, tied output, MoE) and generic dense models.
fn models() -> &'static [ModelProfile] {
    static MODELS: OnceLock<Vec<ModelProfile>> = OnceLock::new();
    MODELS.get_or_init(|| {
        let mut v = vec![
            shape(Shape::Llama1B, Mix::Q8_0),
            shape(Shape::Gemma3_1B, Mix::Q4KM),
            shape(Shape::Gemma3_4B, Mix::Q4KM),
            shape(Shape::Llama8B, Mix::Q4KM),
            shape(Shape::Llama8B, Mix::F16),
            shape(Shape::Qwen3Moe30BA3B, Mix::Q4KM),
        ];
        for (n, ft) in [
            (3_000_000_000, FileType::Q4_K_M),
            (14_000_000_000, FileType::Q4_K_M),
            (32_000_000_000, FileType::Q3_K_M),
        ] {
            v.push(dense(n, ft));
        }
        v
    })
}

fn at_ctx(n_ctx: u32) -> Settings {
    Settings {
        n_ctx: Some(n_ctx),
        ..Settings::default()
    }
}

fn fits_at(p: &ModelProfile, s: &Settings, ctx: u32, ngl: u32, m: &Machine) -> bool {
    fits(&eval(p, s, ctx, &placement(m, ngl, 0), m), m)
}

/// Which of the three regimes a machine puts a model in, at one context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Regime {
    /// Every layer and the output on the GPU.
    AllOnGpu,
    /// Some layers in RAM.
    Partial,
    /// No placement fits.
    Nothing,
}

/// The layer count `max_layers` picks fits, and one more does not: across
/// the three regimes, each case's regime chosen by the sizes involved (a
/// 4.9 GB model on a 4 GiB GPU is partly offloaded, on 24 GiB it is not).
#[test]
fn the_chosen_gpu_layers_fit_and_one_more_does_not() {
    let no_mmap = Settings {
        mmap: false,
        ..at_ctx(4096)
    };
    // (what, model, machine, settings, regime)
    let cases = [
        (
            "8B Q4_K_M (4.9 GB) on a 4 GiB GPU",
            shape(Shape::Llama8B, Mix::Q4KM),
            snapshot(32 * GIB, &[4 * GIB]),
            at_ctx(4096),
            Regime::Partial,
        ),
        (
            "8B Q4_K_M on a 24 GiB GPU",
            shape(Shape::Llama8B, Mix::Q4KM),
            snapshot(32 * GIB, &[24 * GIB]),
            at_ctx(8192),
            Regime::AllOnGpu,
        ),
        (
            "8B F16 (16 GB) on an 8 GiB GPU, 32k context",
            shape(Shape::Llama8B, Mix::F16),
            snapshot(64 * GIB, &[8 * GIB]),
            at_ctx(32768),
            Regime::Partial,
        ),
        (
            "30B-A3B MoE Q4_K_M (18.6 GB) on the 8 GiB desktop",
            shape(Shape::Qwen3Moe30BA3B, Mix::Q4KM),
            fixture("gpu-8g-ram-16g.toml", 32 * GIB),
            at_ctx(4096),
            Regime::Partial,
        ),
        (
            "Gemma-3-4B Q4_K_M on the 32 GiB unified laptop",
            shape(Shape::Gemma3_4B, Mix::Q4KM),
            fixture("laptop-unified-32g.toml", 32 * GIB),
            at_ctx(4096),
            Regime::AllOnGpu,
        ),
        (
            "70B Q4_K_M (42 GB) and 10 GiB of KV (32k) on two 24 GiB GPUs",
            shape(Shape::Llama70B, Mix::Q4KM),
            fixture("two-24g-gpus.toml", 128 * GIB),
            at_ctx(32768),
            Regime::Partial,
        ),
        (
            "8B Q4_K_M read into 2 GiB of RAM beside a 2 GiB GPU",
            shape(Shape::Llama8B, Mix::Q4KM),
            snapshot(2 * GIB, &[2 * GIB]),
            no_mmap,
            Regime::Nothing,
        ),
    ];
    for (what, p, hw_now, s, regime) in cases {
        let m = machine(&hw_now, GPU);
        let ctx = s.n_ctx.expect("cases give a context");
        let all = p.n_layer + 1;
        let got = max_layers(&p, &s, ctx, &m);
        let seen = match got {
            None => Regime::Nothing,
            Some(l) if l == all => Regime::AllOnGpu,
            Some(_) => Regime::Partial,
        };
        assert_eq!(seen, regime, "{what}: {got:?} layers");
        match got {
            Some(l) => {
                assert!(fits_at(&p, &s, ctx, l, &m), "{what}: {l} layers must fit");
                if l < all {
                    assert!(
                        !fits_at(&p, &s, ctx, l + 1, &m),
                        "{what}: {} layers fit too, {l} chosen",
                        l + 1
                    );
                }
            }
            None => {
                for ngl in 0..=all {
                    assert!(!fits_at(&p, &s, ctx, ngl, &m), "{what}: -ngl {ngl} fits");
                }
            }
        }
    }
}

/// Contexts tried without `-c`: at least 4096 (the training context if
/// smaller), doubling up to min(training, 32768); with `-c`, only that.
#[test]
fn context_steps_follow_the_documented_rule() {
    let base = shape(Shape::Llama1B, Mix::Q8_0);
    let cases: [(u64, Option<u32>, &[u32]); 7] = [
        (131_072, None, &[4096, 8192, 16384, 32768]),
        (8192, None, &[4096, 8192]),
        (6000, None, &[4096, 6000]),
        (2048, None, &[2048]),
        (4096, None, &[4096]),
        (0, None, &[4096, 8192, 16384, 32768]),
        (131_072, Some(1000), &[1000]),
    ];
    for (train, n_ctx, want) in cases {
        let p = ModelProfile {
            n_ctx_train: train,
            ..base.clone()
        };
        let s = Settings {
            n_ctx,
            ..Settings::default()
        };
        assert_eq!(
            context_steps(&p, &s),
            want,
            "trained for {train}, -c {n_ctx:?}"
        );
    }
}

/// The auto context on CPU-only machines of growing RAM: 1B Q8_0 (trained for
/// 128k tokens) stops where the next step's KV cache would not fit, and
/// reaches the 32k cap with room to spare.
#[test]
fn the_auto_context_grows_until_memory_or_the_cap_stops_it() {
    let p = shape(Shape::Llama1B, Mix::Q8_0);
    let s = Settings::default();
    let mut seen = Vec::new();
    for ram_mib in (256..=4096).step_by(64) {
        let hw_now = snapshot(ram_mib * MIB, &[]);
        let m = machine(&hw_now, GPU);
        let plan = plan(&p, "m.gguf", &s, &hw_now, GPU);
        if !plan.verdict.fits() {
            continue;
        }
        let steps = context_steps(&p, &s);
        assert!(steps.contains(&plan.n_ctx), "{ram_mib} MiB: {}", plan.n_ctx);
        for &c in steps.iter().filter(|&&c| c <= plan.n_ctx) {
            assert!(fits_at(&p, &s, c, 0, &m), "{ram_mib} MiB: {c} fits");
        }
        if let Some(&next) = steps.iter().find(|&&c| c > plan.n_ctx) {
            assert!(
                !fits_at(&p, &s, next, 0, &m),
                "{ram_mib} MiB: {next} fits too, the plan stopped at {}",
                plan.n_ctx
            );
        }
        seen.push(plan.n_ctx);
    }
    // The sweep must reach every regime, or it proves little.
    assert_eq!(seen.first(), Some(&MIN_DEFAULT_CTX), "{seen:?}");
    assert_eq!(seen.last(), Some(&MAX_AUTO_CTX), "{seen:?}");
    assert!(
        seen.iter()
            .any(|&c| c > MIN_DEFAULT_CTX && c < MAX_AUTO_CTX),
        "{seen:?}"
    );
}

/// With a GPU the context never costs a layer: the plan has as many GPU
/// layers as the smallest step allows, and the next step would lower that
/// count (or not fit at all).
#[test]
fn the_auto_context_never_costs_a_gpu_layer() {
    let p = shape(Shape::Gemma3_4B, Mix::Q4KM);
    let s = Settings::default();
    let steps = context_steps(&p, &s);
    let mut partial = 0;
    let mut fitted = false;
    for vram_mib in (1024..=6144).step_by(256) {
        let hw_now = snapshot(32 * GIB, &[vram_mib * MIB]);
        let m = machine(&hw_now, GPU);
        let plan = plan(&p, "m.gguf", &s, &hw_now, GPU);
        let first = max_layers(&p, &s, steps[0], &m);
        if first.is_none() {
            // Too small even for CUDA's offloaded products at -ngl 0 (a
            // compute buffer llama.cpp allocates there with any layer
            // count) beside its runtime: llama.cpp's defaults do not start.
            // (Here: the output product of a full batch of logits, the
            // library default, with its logits: over 1 GiB.) Only sizes
            // below every size that fits.
            assert_eq!(plan.verdict, Verdict::DoesNotFit, "{vram_mib} MiB");
            assert!(
                !fitted,
                "{vram_mib} MiB is too small, a smaller card was not"
            );
            continue;
        }
        fitted = true;
        assert_eq!(Some(plan.n_gpu_layers), first, "{vram_mib} MiB");
        if let Some(&next) = steps.iter().find(|&&c| c > plan.n_ctx) {
            assert_ne!(
                max_layers(&p, &s, next, &m),
                first,
                "{vram_mib} MiB: {next} keeps the layers, the plan stopped at {}",
                plan.n_ctx
            );
        }
        if plan.n_gpu_layers <= p.n_layer {
            partial += 1;
        }
    }
    assert!(partial > 0, "the sweep must include partial offloads");
}

/// What a context the user gives does: kept as given (padded as llama.cpp
/// pads it), even when it does not fit.
#[test]
fn a_given_context_is_kept_even_when_it_does_not_fit() {
    let p = shape(Shape::Llama8B, Mix::Q4KM);
    let hw_now = snapshot(8 * GIB, &[4 * GIB]);
    let fits_here = plan(&p, "m.gguf", &at_ctx(1000), &hw_now, GPU);
    assert_eq!(fits_here.n_ctx, 1024, "padded to 256");
    assert!(fits_here.verdict.fits());
    let too_long = plan(&p, "m.gguf", &at_ctx(1 << 20), &hw_now, GPU);
    assert_eq!(too_long.n_ctx, 1 << 20);
    assert_eq!(too_long.verdict, Verdict::DoesNotFit);
}

fn model_index() -> impl Strategy<Value = usize> {
    0..models().len()
}

fn context() -> impl Strategy<Value = u32> {
    prop::sample::select(vec![512u32, 4096, 16384, 32768])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Tightness on any model, any single GPU and context.
    #[test]
    fn max_layers_is_tight(
        i in model_index(),
        vram in 256 * MIB..40 * GIB,
        ram in 2 * GIB..128 * GIB,
        ctx in context(),
    ) {
        let p = &models()[i];
        let s = at_ctx(ctx);
        let m = machine(&snapshot(ram, &[vram]), GPU);
        if let Some(l) = max_layers(p, &s, ctx, &m) {
            prop_assert!(fits_at(p, &s, ctx, l, &m));
            prop_assert!(l == p.n_layer + 1 || !fits_at(p, &s, ctx, l + 1, &m));
        }
    }

    /// More VRAM never gives fewer GPU layers, at any fixed context.
    #[test]
    fn more_vram_never_gives_fewer_gpu_layers(
        i in model_index(),
        a in 256 * MIB..40 * GIB,
        b in 256 * MIB..40 * GIB,
        ram in 2 * GIB..128 * GIB,
        ctx in context(),
    ) {
        let p = &models()[i];
        let s = at_ctx(ctx);
        let (less, more) = (a.min(b), a.max(b));
        let with_less = max_layers(p, &s, ctx, &machine(&snapshot(ram, &[less]), GPU));
        let with_more = max_layers(p, &s, ctx, &machine(&snapshot(ram, &[more]), GPU));
        // `None` (nothing fits) orders below every layer count.
        prop_assert!(with_less <= with_more, "{with_less:?} with {less}, {with_more:?} with {more}");
    }

    /// The same for whole plans (context chosen by the solver): a plan that
    /// fits with less VRAM fits with more, with at least as many GPU layers.
    #[test]
    fn more_vram_never_gives_a_plan_fewer_gpu_layers(
        i in model_index(),
        a in 256 * MIB..40 * GIB,
        b in 256 * MIB..40 * GIB,
        ram in 2 * GIB..128 * GIB,
    ) {
        let p = &models()[i];
        let s = Settings::default();
        let (less, more) = (a.min(b), a.max(b));
        let with_less = plan(p, "m.gguf", &s, &snapshot(ram, &[less]), GPU);
        let with_more = plan(p, "m.gguf", &s, &snapshot(ram, &[more]), GPU);
        if with_less.verdict.fits() {
            prop_assert!(with_more.verdict.fits());
            let gpu_layers = |p: &Plan| -> u32 { p.devices[1..].iter().map(|d| d.n_layers).sum() };
            prop_assert!(gpu_layers(&with_less) <= gpu_layers(&with_more));
        }
    }

    /// More RAM never turns a fit into a failure: with or without a GPU,
    /// mapped or read weights, and on the unified laptop (one pool).
    #[test]
    fn more_ram_never_turns_a_fit_into_a_failure(
        i in model_index(),
        a in GIB..96 * GIB,
        b in GIB..96 * GIB,
        vram in prop::option::of(256 * MIB..24 * GIB),
        unified: bool,
        mmap: bool,
    ) {
        let p = &models()[i];
        let s = Settings { mmap, ..Settings::default() };
        let (less, more) = (a.min(b), a.max(b));
        let at_ram = |ram| if unified {
            fixture("laptop-unified-32g.toml", ram)
        } else {
            snapshot(ram, vram.as_slice())
        };
        let with_less = plan(p, "m.gguf", &s, &at_ram(less), GPU);
        let with_more = plan(p, "m.gguf", &s, &at_ram(more), GPU);
        prop_assert!(
            !with_less.verdict.fits() || with_more.verdict.fits(),
            "fits with {less} bytes of RAM, not with {more}"
        );
    }
}

/// Every plan says what its speed rests on: each device's bandwidth and
/// where it came from, and the bytes each reads per token.
#[test]
fn speed_basis_names_each_devices_bandwidth_and_bytes() {
    let m = dense(8_000_000_000, FileType::Q4_K_M);
    let s = Settings::default();
    // --vram: an unknown card, assumed at the default.
    let p = plan(&m, "m", &s, &snapshot(64 * GIB, &[4 * GIB]), GPU);
    let b = &p.speed_basis;
    assert_eq!(b.ram.source, RamBandwidthSource::Default);
    assert_eq!(b.gpus.len(), 1);
    assert_eq!(b.gpus[0].source, BandwidthSource::Assumed);
    assert_eq!(
        b.gpus[0].bandwidth_bytes_per_s,
        crate::hw::DEFAULT_GPU_BANDWIDTH_BYTES_PER_S
    );
    assert_eq!(b.gpus[0].n_layers, p.devices[1].n_layers);
    // Offloaded: both sides read weights, the GPU's share in proportion.
    assert!(p.devices[1].n_layers > 0 && p.devices[1].n_layers < m.n_layer);
    assert!(b.ram.bytes_per_token > 0 && b.gpus[0].bytes_per_token > 0);
    let total = b.ram.bytes_per_token + b.gpus[0].bytes_per_token;
    assert!(total >= m.weight_bytes / 2, "{total} of {}", m.weight_bytes);

    // --gpu: the card's own figure, looked up.
    let card = crate::hw::gpus::resolve("rtx4060").expect("known");
    let hw = crate::hw::apply_named_gpus(snapshot(64 * GIB, &[]), &[card], false).expect("valid");
    let p = plan(&m, "m", &s, &hw, GPU);
    let g = &p.speed_basis.gpus[0];
    assert_eq!(g.name, "NVIDIA GeForce RTX 4060");
    assert_eq!(g.source, BandwidthSource::LookedUp);
    assert_eq!(g.bandwidth_bytes_per_s, 272e9);
    assert_eq!(g.fp16_flops_per_s, Some(60.5e12));
    assert_eq!(
        p.speed_basis.ram.bytes_per_token > 0,
        p.devices[1].n_layers < m.n_layer
    );

    // No GPU: only RAM, and it reads everything.
    let p = plan(&m, "m", &s, &snapshot(64 * GIB, &[]), GPU);
    assert!(p.speed_basis.gpus.is_empty());
    assert!(p.speed_basis.ram.bytes_per_token >= m.weight_bytes / 2);
}

/// Two RPC workers holding every layer: the token crosses CPU → worker 0 →
/// worker 1 and the logits come back, which the speed counts at the link's
/// speed (assumed gigabit unless given); a faster link is a faster token.
#[test]
fn rpc_workers_put_the_network_in_the_speed() {
    let m = dense(1_000_000_000, FileType::Q4_K_M);
    let s = Settings {
        n_gpu_layers: Some(m.n_layer + 1),
        ..Settings::default()
    };
    let worker = |i: usize| crate::hw::RpcDevice {
        name: format!("RPC{i}[127.0.0.1:5005{i}]"),
        free_bytes: 16 * GIB,
        total_bytes: 16 * GIB,
        budget_bytes: None,
    };
    let hw = crate::hw::add_rpc_devices(snapshot(64 * GIB, &[]), &[worker(0), worker(1)]);
    let p = plan(&m, "m", &s, &hw, GPU);
    let n = p.speed_basis.network.as_ref().expect("a network basis");
    assert_eq!(n.source, LinkSource::Assumed);
    assert_eq!(n.link_bytes_per_s, speed::DEFAULT_RPC_LINK_BYTES_PER_S);
    assert_eq!(n.boundaries, 2);
    assert_eq!(n.prompt_bytes_per_token, 2 * u64::from(m.n_embd) * 4);
    assert_eq!(n.bytes_per_token, n.prompt_bytes_per_token + m.n_vocab * 4);
    let mut fast = hw.clone();
    fast.rpc_link_bytes_per_s = Some(1.25e9);
    let q = plan(&m, "m", &s, &fast, GPU);
    let nq = q.speed_basis.network.as_ref().expect("a network basis");
    assert_eq!(nq.source, LinkSource::Given);
    assert!(q.est_decode_tokens_per_s > p.est_decode_tokens_per_s);
    assert!(q.est_prompt_tokens_per_s > p.est_prompt_tokens_per_s);
    // The link's time per token is what separates them.
    let t = |tps: f64| 1.0 / tps;
    let expected = n.bytes_per_token as f64 / 125e6 - nq.bytes_per_token as f64 / 1.25e9;
    let got = t(p.est_decode_tokens_per_s) - t(q.est_decode_tokens_per_s);
    assert!(
        (got - expected).abs() < 0.02 * expected,
        "{got} vs {expected}"
    );
    // Local devices only: no network.
    let local = plan(
        &m,
        "m",
        &Settings::default(),
        &snapshot(64 * GIB, &[8 * GIB]),
        GPU,
    );
    assert!(local.speed_basis.network.is_none());
}

/// A calibrated machine: the CPU's side of decode and prompt is scaled by
/// the runs' measured ÷ estimated factors (clamped), the GPU's is not, and
/// the basis says so.
#[test]
fn calibration_scales_the_cpu_side_and_is_named() {
    let m = dense(8_000_000_000, FileType::Q4_K_M);
    let s = Settings::default();
    // Calibration is this machine's only (a profile's never is), so the
    // default profile stands in for this machine here.
    let mut plain = snapshot(64 * GIB, &[]);
    plain.host = hw::Host::ThisMachine;
    let calibrated = |decode_factor, prompt_factor| {
        let mut hw = plain.clone();
        hw.ram.speed_calibration = Some(SpeedCalibration {
            runs: 3,
            decode_factor,
            prompt_factor,
        });
        plan(&m, "m", &s, &hw, GPU)
    };
    let base = plan(&m, "m", &s, &plain, GPU);
    assert_eq!(base.speed_basis.ram.calibration_runs, None);
    let p = calibrated(1.5, 0.5);
    let close = |a: f64, b: f64| (a - b).abs() <= 0.01 * b.max(0.01);
    // CPU only: every second of a token is the CPU's, so the speeds scale exactly.
    assert!(close(
        p.est_decode_tokens_per_s,
        1.5 * base.est_decode_tokens_per_s
    ));
    assert!(close(
        p.est_prompt_tokens_per_s,
        0.5 * base.est_prompt_tokens_per_s
    ));
    let r = &p.speed_basis.ram;
    assert_eq!(r.source, RamBandwidthSource::Calibrated);
    assert_eq!(r.calibration_runs, Some(3));
    assert_eq!(r.calibration_decode_factor, Some(1.5));
    assert_eq!(r.calibration_prompt_factor, Some(0.5));
    // Memory is not speed: the same plan otherwise.
    assert_eq!(p.ram, base.ram);
    assert_eq!(p.n_gpu_layers, base.n_gpu_layers);
    // A wild factor is clamped; a broken one changes nothing.
    let wild = calibrated(100.0, f64::NAN);
    assert!(close(
        wild.est_decode_tokens_per_s,
        crate::speed::CALIBRATION_RANGE.1 * base.est_decode_tokens_per_s
    ));
    assert_eq!(wild.est_prompt_tokens_per_s, base.est_prompt_tokens_per_s);

    // With layers on a GPU only the CPU's share of each token speeds up.
    let mut offload = snapshot(64 * GIB, &[4 * GIB]);
    offload.host = hw::Host::ThisMachine;
    let mut cal_offload = offload.clone();
    cal_offload.ram.speed_calibration = Some(SpeedCalibration {
        runs: 1,
        decode_factor: 2.0,
        prompt_factor: 1.0,
    });
    let a = plan(&m, "m", &s, &offload, GPU);
    let b = plan(&m, "m", &s, &cal_offload, GPU);
    assert!(a.devices[1].n_layers > 0 && a.devices[1].n_layers < m.n_layer);
    assert!(
        b.est_decode_tokens_per_s > a.est_decode_tokens_per_s
            && b.est_decode_tokens_per_s < 2.0 * a.est_decode_tokens_per_s,
        "{} vs {}",
        b.est_decode_tokens_per_s,
        a.est_decode_tokens_per_s
    );
}

/// fuzz/artifacts/plan_sizes (crash-39f5e2d0): with many slots of a long
/// training context the steps pass 2^31 cells, where doubling overflowed.
#[test]
fn context_steps_of_many_long_slots_saturate() {
    let base = shape(Shape::Llama1B, Mix::Q8_0);
    let p = ModelProfile {
        n_ctx_train: u64::from(u32::MAX),
        ..base
    };
    let s = Settings {
        n_parallel: 140_000,
        ..Settings::default()
    };
    let steps = context_steps(&p, &s);
    assert_eq!(steps.last(), Some(&u32::MAX));
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
}

/// The case proptest found: Qwen3-30B-A3B with 2 GiB of RAM. With 3.17 GB of
/// VRAM every layer is on the GPU with some layers' experts in RAM; with
/// 3.28 GB the context was first grown for whole-layer offload (4 layers up
/// to 16k), where the experts-in-RAM placement no longer fit, and the plan
/// fell back to 4 GPU layers. The context is now grown for the placement
/// chosen.
#[test]
fn more_vram_keeps_the_experts_in_ram_placement() {
    let p = &models()[5];
    assert!(p.experts.is_some());
    let s = Settings::default();
    let gpu_layers = |vram: u64| -> u32 {
        let pl = plan(p, "m.gguf", &s, &snapshot(2 * GIB, &[vram]), GPU);
        assert!(pl.verdict.fits());
        pl.devices[1..].iter().map(|d| d.n_layers).sum()
    };
    let less = gpu_layers(3_174_861_824);
    assert_eq!(less, p.n_layer);
    assert!(gpu_layers(3_275_525_120) >= less);
}

/// A device the GPU table does not know, measured on this machine
/// (`hw::use_measured_speeds`): the speed model prices it by the
/// measurement, `speed_basis` says so, and when it decodes slower than the
/// CPU (lavapipe: 0.16 GB/s, 160 µs per graph node on the test VM) the
/// solver keeps every layer in RAM unless `-ngl` forces them; a fast one
/// still takes every layer. Cards without a registry device (`--gpu`,
/// `--vram`, a profile's) are never measured.
#[test]
fn a_measured_device_slower_than_the_cpu_gets_no_layer_by_default() {
    let p = shape(Shape::Llama1B, Mix::Q8_0);
    let all = p.n_layer + 1;
    let with_speed = |speed: hw::MeasuredSpeed| {
        let mut hw = snapshot(32 * GIB, &[8 * GIB]);
        let mut calls = 0;
        let plain = hw::use_measured_speeds(hw.clone(), |_| {
            calls += 1;
            Some(speed)
        });
        assert_eq!(calls, 0, "a --vram card has no registry device to measure");
        assert_eq!(plain.gpus[0].bandwidth_source, hw::BandwidthSource::Assumed);
        hw.gpus[0].llama = Some(hw::LlamaDevice {
            backend: "Vulkan".into(),
            name: "Vulkan0".into(),
            description: "Unknown GPU".into(),
            host_memory: false,
            max_tensor_bytes: None,
            speed: None,
        });
        let hw = hw::use_measured_speeds(hw, |d| (d.name == "Vulkan0").then_some(speed));
        let g = &hw.gpus[0];
        assert_eq!(g.bandwidth_source, hw::BandwidthSource::Measured);
        assert_eq!(
            g.bandwidth_bytes_per_s,
            Some(speed.bandwidth_bytes_per_s as f64)
        );
        hw
    };
    let slow = with_speed(hw::MeasuredSpeed {
        bandwidth_bytes_per_s: 160_000_000,
        per_node_ns: 160_000,
    });
    let auto = plan(&p, "m.gguf", &Settings::default(), &slow, GPU);
    assert_eq!(auto.n_gpu_layers, 0, "{:?}", auto.warnings);
    assert_eq!(auto.verdict, Verdict::Fits);
    assert!(
        auto.warnings
            .iter()
            .any(|w| w.code == WarningCode::GpuSlowerThanCpu),
        "{:?}",
        auto.warnings
    );
    let basis = &auto.speed_basis.gpus[0];
    assert_eq!(basis.source, hw::BandwidthSource::Measured);
    assert_eq!(basis.measured.map(|m| m.per_node_ns), Some(160_000));
    let full = auto
        .est_full_gpu_decode_tokens_per_s
        .expect("a GPU estimate");
    assert!(
        full * 10.0 < auto.est_decode_tokens_per_s,
        "offloading is the slowdown it is: {full} against {}",
        auto.est_decode_tokens_per_s
    );
    // Forced, every layer goes there, at the measured speed: each token
    // reads the weights at 0.16 GB/s and pays 20 nodes per layer (the CPU's
    // sampling on top; the estimate is rounded to 0.01).
    let forced = Settings {
        n_gpu_layers: Some(all),
        ..Settings::default()
    };
    let on_gpu = plan(&p, "m.gguf", &forced, &slow, GPU);
    assert_eq!(on_gpu.n_gpu_layers, all);
    let bytes = on_gpu.speed_basis.gpus[0].bytes_per_token as f64;
    let per_token = bytes / 160e6 + f64::from(p.n_layer) * speed::GPU_NODES_PER_LAYER * 160e-6;
    assert!(
        on_gpu.est_decode_tokens_per_s <= 1.0 / per_token + 0.005,
        "{} tok/s against at most {}",
        on_gpu.est_decode_tokens_per_s,
        1.0 / per_token
    );
    assert!(
        on_gpu
            .warnings
            .iter()
            .all(|w| w.code != WarningCode::GpuSlowerThanCpu)
    );

    let fast = with_speed(hw::MeasuredSpeed {
        bandwidth_bytes_per_s: 400_000_000_000,
        per_node_ns: 5_000,
    });
    let auto = plan(&p, "m.gguf", &Settings::default(), &fast, GPU);
    assert_eq!(auto.n_gpu_layers, all);
    assert_eq!(
        auto.speed_basis.gpus[0].source,
        hw::BandwidthSource::Measured
    );
}

/// `serve --embeddings N`: a second context of N tokens, its KV cache,
/// compute and output buffers (logits and an embedding row for every token)
/// in the device's figures and the RAM peak, and named on its own.
#[test]
fn an_embedding_context_is_planned_beside_the_slots() {
    let p = shape(Shape::Llama1B, Mix::Q4KM);
    let hw_now = snapshot(32 * GIB, &[]);
    let base = at_ctx(4096);
    let with = Settings {
        embeddings: Some(512),
        ..base.clone()
    };
    let a = plan(&p, "m.gguf", &base, &hw_now, GPU);
    let b = plan(&p, "m.gguf", &with, &hw_now, GPU);
    assert!(a.embeddings.is_none());
    let e = b.embeddings.clone().expect("the embedding context");
    assert_eq!(e.n_ctx, 512);
    let output = (p.n_vocab + u64::from(p.n_embd)) * 512 * 4;
    assert!(e.bytes > output, "{} <= {output}", e.bytes);
    assert_eq!(
        b.devices[0].total_bytes - a.devices[0].total_bytes,
        e.bytes,
        "all of it on the CPU"
    );
    assert!(b.ram.peak_bytes >= a.ram.peak_bytes + output);
    assert_eq!(b.n_ctx, a.n_ctx, "the slots' context is unchanged");
}
