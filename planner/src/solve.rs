//! The solver: for a model and a machine, the most GPU layers that fit, the
//! context, MoE expert placement, the verdict, warnings and llama.cpp flags;
//! and, given several quantizations of one model, which one to run.
//!
//! Rules (each tested in `tests/simulated_machines.rs`):
//! - Context: `--ctx-size` when given; else at least 4096 (or the training
//!   context if smaller), grown in powers of two up to min(training, 32768)
//!   only while that costs no GPU layer and still fits.
//! - GPU layers: the most that fit, counting the output layer the way
//!   llama.cpp's `-ngl` does; several GPUs share layers in proportion to their
//!   free memory (llama.cpp's default split, passed explicitly as `-ts`).
//! - MoE: when not every layer fits, keeping the experts of the first N layers
//!   in RAM (`--n-cpu-moe N`) is tried too, and the faster plan wins.
//! - Quantization choice: the highest-quality file that fits fully on the GPU
//!   (or in RAM without a GPU, its mapped weights included); otherwise (some
//!   layers in RAM, or weights paged from disk) the best score, `bits per
//!   weight × min(1, tokens/s ÷ 10)`: quality, discounted once speed drops
//!   below a readable 10 tokens/s.

use crate::hw::{BandwidthSource, GpuVendor, HardwareSnapshot};
use crate::memory::{
    self, Context, Estimate, GpuSpec, MachineSpec, Placement, RepackRules, product, sum,
};
use crate::plan::{
    DeviceKind, FlashAttn, ModelInfo, Plan, RamUse, Resolved, SCHEMA_VERSION, Settings, Verdict,
    Warning, WarningCode,
};
use crate::profile::ModelProfile;
use crate::speed::{
    self, GpuBasis, LinkSource, NetworkBasis, RamBasis, SpeedBasis, SpeedCalibration, Throughput,
};
/// Smallest default context.
pub const MIN_DEFAULT_CTX: u32 = 4096;
/// Largest context the solver grows to on its own.
pub const MAX_AUTO_CTX: u32 = 32768;
/// Offload warning threshold: warn when offload costs more than this share of full-GPU speed.
pub const OFFLOAD_WARN_SHARE: f64 = 0.25;

/// What the planner needs to know about the build that will run the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Build {
    /// The plan may use GPUs: the build has a GPU backend, or the user is
    /// planning for another machine (`--vram`, `--hw`) whose build would.
    pub gpu: bool,
}

/// The machine reduced to budgets and speeds.
struct Machine {
    spec: MachineSpec,
    /// The CPU as the speed model sees it, before calibration.
    cpu: Throughput,
    /// Measured ÷ estimated speeds of earlier runs on this machine.
    calibration: Option<SpeedCalibration>,
    gpus: Vec<Throughput>,
    /// Per GPU: peak bandwidth, where it came from, FP16 throughput.
    gpu_sources: Vec<(f64, BandwidthSource, Option<f64>)>,
    unified: bool,
    gpu_usable: bool,
    /// The link to RPC workers, bytes/s, and whether it was given.
    rpc_link: (f64, LinkSource),
}

fn machine(hw: &HardwareSnapshot, build: Build) -> Machine {
    let ram = &hw.ram;
    let mut resident = ram.available_bytes;
    if let Some(h) = ram
        .cgroup
        .as_ref()
        .and_then(crate::hw::CgroupMemory::headroom_bytes)
    {
        resident = resident.min(h);
    }
    let alloc_limit = [ram.rlimit_as_bytes, ram.rlimit_data_bytes]
        .into_iter()
        .flatten()
        .min();
    let gpu_usable = build.gpu;
    let unified = hw.unified.is_some();
    let mut gpus = Vec::new();
    let mut sources = Vec::new();
    // RPC workers first, as llama.cpp lists them; then the local GPUs.
    let (rpc, local): (Vec<&crate::hw::GpuInfo>, Vec<&crate::hw::GpuInfo>) =
        hw.gpus.iter().partition(|g| g.vendor == GpuVendor::Rpc);
    let mut add = |g: &crate::hw::GpuInfo, kind| {
        gpus.push(GpuSpec {
            name: g.name.clone(),
            kind,
            budget_bytes: g.plan_budget_bytes(),
            split_bytes: g.free_bytes,
            llama: g.llama.clone(),
        });
        let (bandwidth, source) = g.planned_bandwidth();
        sources.push((bandwidth, source, g.fp16_flops_per_s));
    };
    for g in rpc {
        add(g, DeviceKind::Rpc);
    }
    if hw.unified.is_none() {
        for g in &local {
            let kind = if g.vendor == GpuVendor::Apple {
                DeviceKind::Unified
            } else {
                DeviceKind::Gpu
            };
            add(g, kind);
        }
    }
    if let Some(u) = &hw.unified {
        let g = local.first().copied();
        gpus.push(GpuSpec {
            name: g.map_or_else(|| "GPU (unified)".to_string(), |g| g.name.clone()),
            kind: DeviceKind::Unified,
            budget_bytes: u.gpu_limit_bytes.min(resident),
            split_bytes: u.gpu_limit_bytes.min(resident),
            llama: g.and_then(|g| g.llama.clone()),
        });
        // An integrated GPU of unknown model reads the same RAM as the CPU.
        let (bandwidth, source) = g
            .and_then(|g| g.bandwidth_bytes_per_s.map(|b| (b, g.bandwidth_source)))
            .unwrap_or((ram.bandwidth_bytes_per_s, BandwidthSource::Assumed));
        sources.push((bandwidth, source, g.and_then(|g| g.fp16_flops_per_s)));
    }
    let threads = hw.cpu.physical_cores.max(1);
    // An RPC worker computes as a CPU does (the worker program runs
    // llama.cpp's CPU backend unless it was built with a GPU one): assumed
    // like this machine's CPU, as its bandwidth is.
    let thr = sources
        .iter()
        .zip(&gpus)
        .map(|(&(bandwidth, _, fp16), g)| {
            if g.kind == DeviceKind::Rpc {
                speed::cpu_throughput(bandwidth, threads, &hw.cpu.features, false)
            } else if let Some(measured) = g.llama.as_ref().and_then(|l| l.speed) {
                speed::measured_throughput(&measured)
            } else {
                speed::gpu_throughput(bandwidth, fp16)
            }
        })
        .collect();
    Machine {
        spec: MachineSpec {
            gpus: if gpu_usable { gpus } else { Vec::new() },
            repack: RepackRules::for_cpu(&hw.cpu.arch, &hw.cpu.features),
            ram_budget_bytes: resident,
            alloc_limit_bytes: alloc_limit,
            threads,
            runtime_bytes: ram.runtime_bytes.unwrap_or(0),
            runtime_virtual_bytes: ram.runtime_virtual_bytes.unwrap_or(0),
        },
        cpu: speed::cpu_of(hw),
        calibration: speed::calibration_of(hw),
        gpus: if gpu_usable { thr } else { Vec::new() },
        gpu_sources: if gpu_usable { sources } else { Vec::new() },
        unified,
        gpu_usable,
        rpc_link: hw.rpc_link_bytes_per_s.map_or(
            (speed::DEFAULT_RPC_LINK_BYTES_PER_S, LinkSource::Assumed),
            |b| (b, LinkSource::Given),
        ),
    }
}

/// Whether `need` bytes are more than `budget`. The memory model's sizes
/// saturate (`memory::sum`), so `u64::MAX` stands for "past 2^64": more than
/// any budget, one of `u64::MAX` (`--ram 16EiB`) included.
fn exceeds(need: u64, budget: u64) -> bool {
    need == u64::MAX || need > budget
}

/// Resident RAM the estimate needs with its margin.
fn ram_need(e: &Estimate) -> u64 {
    sum([e.anonymous_bytes, e.devices[0].margin_bytes])
}

/// Whether an estimate fits every budget.
fn fits(e: &Estimate, m: &Machine) -> bool {
    // The CPU's own total has no budget of its own (its parts are judged
    // as RAM below), but a total past 2^64 is a size nothing holds.
    if e.devices[0].total_bytes == u64::MAX {
        return false;
    }
    let mut ram_need = ram_need(e);
    for (i, d) in e.devices[1..].iter().enumerate() {
        if exceeds(d.total_bytes, d.budget_bytes) {
            return false;
        }
        let host_memory = m.spec.gpus.get(i).is_some_and(GpuSpec::host_memory);
        if (m.unified && d.kind == DeviceKind::Unified) || host_memory {
            // One pool: the GPU's allocations come out of the same RAM.
            ram_need = sum([ram_need, d.total_bytes]);
        }
    }
    if exceeds(ram_need, m.spec.ram_budget_bytes) {
        return false;
    }
    !exceeds(e.allocated_bytes, alloc_limit(m))
}

/// The process's address-space limit: RLIMIT_AS/RLIMIT_DATA, or none but
/// 2^64 itself, which a saturated allocation still exceeds.
fn alloc_limit(m: &Machine) -> u64 {
    m.spec.alloc_limit_bytes.unwrap_or(u64::MAX)
}

fn split_for(m: &Machine) -> Vec<f64> {
    m.spec.gpus.iter().map(|g| g.split_bytes as f64).collect()
}

fn placement(m: &Machine, ngl: u32, n_cpu_moe: u32) -> Placement {
    Placement {
        n_gpu_layers: ngl,
        split: split_for(m),
        n_cpu_moe,
    }
}

fn eval(p: &ModelProfile, s: &Settings, ctx_tokens: u32, pl: &Placement, m: &Machine) -> Estimate {
    memory::estimate(p, s, &Context::resolve(s, ctx_tokens), pl, &m.spec)
}

/// The most GPU layers (llama.cpp `-ngl`) that fit at this context, if any placement does.
fn max_layers(p: &ModelProfile, s: &Settings, ctx: u32, m: &Machine) -> Option<u32> {
    let top = if m.spec.gpus.is_empty() {
        0
    } else {
        p.n_layer + 1
    };
    (0..=top)
        .rev()
        .find(|&ngl| fits(&eval(p, s, ctx, &placement(m, ngl, 0), m), m))
}

/// Bytes each device reads per generated token: active weights plus the KV
/// cache of a conversation's first 1024 tokens (decode speed as
/// llama-bench's tg measures it, near the start; it falls as the context
/// fills).
fn bytes_per_token(e: &Estimate) -> Vec<u64> {
    let filled = (1024.0 / f64::from(e.ctx.n_ctx.max(1))).min(1.0);
    e.active_bytes
        .iter()
        .zip(&e.devices)
        .map(|(&a, d)| sum([a, (d.kv_bytes as f64 * filled) as u64]))
        .collect()
}

/// What the decode estimate of `e` on `m` assumes.
fn speed_basis(hw: &HardwareSnapshot, p: &ModelProfile, e: &Estimate, m: &Machine) -> SpeedBasis {
    let bytes = bytes_per_token(e);
    let cal = m.calibration;
    SpeedBasis {
        ram: RamBasis::of(hw, cal, bytes.first().copied().unwrap_or(0)),
        gpus: e.devices[1..]
            .iter()
            .zip(&m.gpu_sources)
            .zip(bytes.iter().skip(1))
            .zip(&m.spec.gpus)
            .map(|(((d, &(bandwidth, source, fp16)), &b), g)| GpuBasis {
                name: d.name.clone(),
                kind: d.kind,
                bandwidth_bytes_per_s: bandwidth,
                source,
                fp16_flops_per_s: fp16,
                bytes_per_token: b,
                n_layers: d.n_layers,
                measured: g.llama.as_ref().and_then(|l| l.speed),
            })
            .collect(),
        network: network(p, e, m),
    }
}

/// What crosses the link to RPC workers per token of `e` (see
/// [`NetworkBasis`]); `None` when no worker holds a layer.
fn network(p: &ModelProfile, e: &Estimate, m: &Machine) -> Option<NetworkBasis> {
    let remote = |d: usize| {
        d > 0
            && m.spec
                .gpus
                .get(d - 1)
                .is_some_and(|g| g.kind == DeviceKind::Rpc)
    };
    let boundaries = e
        .chain
        .windows(2)
        .filter(|w| remote(w[0]) || remote(w[1]))
        .count();
    if boundaries == 0 {
        return None;
    }
    let boundaries = u32::try_from(boundaries).unwrap_or(u32::MAX);
    let hidden = product([u64::from(boundaries), u64::from(p.n_embd), 4]);
    // The host reads the logits of each generated token.
    let logits = if e.chain.last().is_some_and(|&d| remote(d)) {
        product([p.n_vocab, 4])
    } else {
        0
    };
    let (link, source) = m.rpc_link;
    Some(NetworkBasis {
        link_bytes_per_s: link,
        source,
        boundaries,
        bytes_per_token: sum([hidden, logits]),
        prompt_bytes_per_token: hidden,
    })
}

/// Decode and prompt tokens/s of `e` on `m`, the CPU's side scaled by the
/// machine's calibration (decode and prompt each by its own factor), the
/// network's transfers added.
fn decode_speed(p: &ModelProfile, e: &Estimate, m: &Machine) -> (f64, f64) {
    let (decode, prompt) = device_speed(p, e, m);
    match network(p, e, m) {
        Some(n) => {
            let link = n.link_bytes_per_s.max(1.0);
            (
                speed::with_network(decode, n.bytes_per_token as f64 / link),
                speed::with_network(prompt, n.prompt_bytes_per_token as f64 / link),
            )
        }
        None => (decode, prompt),
    }
}

/// [`decode_speed`] on the devices alone.
fn device_speed(p: &ModelProfile, e: &Estimate, m: &Machine) -> (f64, f64) {
    let (decode_f, prompt_f) = m
        .calibration
        .map_or((1.0, 1.0), |c| (c.decode_factor, c.prompt_factor));
    let mut devs = vec![m.cpu.calibrated(decode_f)];
    devs.extend(m.gpus.iter().copied());
    let mut prompt_devs = devs.clone();
    prompt_devs[0] = m.cpu.calibrated(prompt_f);
    let bytes = bytes_per_token(e);
    let bpw = bits_per_weight(p);
    let params: Vec<u64> = e
        .active_bytes
        .iter()
        .map(|b| (*b as f64 * 8.0 / bpw) as u64)
        .collect();
    // The CPU's parameters in weights it reads unrepacked, counted as `params`.
    let plain = [(e.cpu_active_plain_bytes as f64 * 8.0 / bpw) as u64];
    let layers: Vec<u32> = e.devices.iter().map(|d| d.n_layers).collect();
    (
        speed::decode_tokens_per_s(&bytes, &params, &plain, &layers, &devs, p.n_vocab),
        speed::prompt_tokens_per_s(&params, &prompt_devs, 0),
    )
}

/// Effective bits per weight of a model file (its quality class).
#[must_use]
pub fn bits_per_weight(p: &ModelProfile) -> f64 {
    if p.n_params == 0 {
        0.0
    } else {
        p.weight_bytes as f64 * 8.0 / p.n_params as f64
    }
}

/// The contexts the solver tries, smallest first. With several sequences
/// (`--parallel N`) the context is all of them together, as in llama.cpp
/// (`-c C -np N` gives each C / N cells), so each step is N slots' worth:
/// every slot gets at least the default and grows to the same cap as one.
fn context_steps(p: &ModelProfile, s: &Settings) -> Vec<u32> {
    if let Some(c) = s.n_ctx {
        return vec![c];
    }
    let train = u32::try_from(p.n_ctx_train).unwrap_or(u32::MAX);
    let train = if train == 0 { MAX_AUTO_CTX } else { train };
    let slots = s.n_parallel.max(1);
    let min = MIN_DEFAULT_CTX.min(train).saturating_mul(slots);
    let cap = train.min(MAX_AUTO_CTX).saturating_mul(slots).max(min);
    let mut steps = vec![min];
    let mut c = min;
    while c < cap {
        // Past 2^31 (many slots of a long context) doubling would overflow.
        c = c.saturating_mul(2).min(cap);
        steps.push(c);
    }
    steps
}

/// Plan one model file on one machine.
#[must_use]
pub fn plan(
    p: &ModelProfile,
    path: &str,
    s: &Settings,
    hw: &HardwareSnapshot,
    build: Build,
) -> Plan {
    let m = machine(hw, build);
    let steps = context_steps(p, s);
    let has_gpu = !m.spec.gpus.is_empty();
    let all = p.n_layer + 1;

    // Choose context and layers. `kept_on_cpu`: no layer offloaded because
    // the GPUs are slower, not for lack of memory.
    let mut kept_on_cpu = false;
    let (ctx, ngl, n_cpu_moe) = match s.n_gpu_layers {
        Some(forced) => {
            let forced = if has_gpu { forced.min(all) } else { 0 };
            let mut chosen = steps[0];
            for &c in &steps[1..] {
                if fits(&eval(p, s, c, &placement(&m, forced, 0), &m), &m) {
                    chosen = c;
                } else {
                    break;
                }
            }
            (chosen, forced, 0)
        }
        None => {
            let base = max_layers(p, s, steps[0], &m);
            match base {
                None => (steps[0], if has_gpu { all } else { 0 }, 0),
                Some(l0) => {
                    let mut chosen = steps[0];
                    for &c in &steps[1..] {
                        if max_layers(p, s, c, &m) == Some(l0) {
                            chosen = c;
                        } else {
                            break;
                        }
                    }
                    match moe_alternative(p, s, &steps, l0, &m) {
                        Some((ctx_moe, k)) => (ctx_moe, all, k),
                        None if l0 > 0 && cpu_is_faster(p, s, chosen, l0, &m) => {
                            kept_on_cpu = true;
                            (chosen, 0, 0)
                        }
                        None => (chosen, l0, 0),
                    }
                }
            }
        }
    };
    let pl = placement(&m, ngl, n_cpu_moe);
    let est = eval(p, s, ctx, &pl, &m);
    let ok = fits(&est, &m);
    let (decode, prompt) = decode_speed(p, &est, &m);
    let full_gpu = if has_gpu {
        let e = eval(p, s, ctx, &placement(&m, all, 0), &m);
        Some(decode_speed(p, &e, &m).0)
    } else {
        None
    };
    let gpu_layers: u32 = est.devices[1..].iter().map(|d| d.n_layers).sum();
    let verdict = if !ok {
        Verdict::DoesNotFit
    } else if has_gpu && !kept_on_cpu && (gpu_layers < p.n_layer || n_cpu_moe > 0) {
        Verdict::FitsWithOffload
    } else {
        Verdict::Fits
    };

    let mut warnings = Vec::new();
    if let Some(full) = full_gpu
        && verdict == Verdict::FitsWithOffload
        && decode < full * (1.0 - OFFLOAD_WARN_SHARE)
    {
        let in_ram = if n_cpu_moe > 0 {
            format!("experts of {n_cpu_moe} of {} layers in RAM", p.n_layer)
        } else {
            format!("{} of {} layers in RAM", p.n_layer - gpu_layers, p.n_layer)
        };
        warnings.push(Warning {
            code: WarningCode::OffloadSlow,
            message: format!(
                "offload: {in_ram}, est. {decode:.0} tok/s ({full:.0} tok/s fully on GPU)"
            ),
        });
    }
    if kept_on_cpu && let Some(full) = full_gpu {
        let names: Vec<&str> = m.spec.gpus.iter().map(|g| g.name.as_str()).collect();
        warnings.push(Warning {
            code: WarningCode::GpuSlowerThanCpu,
            message: format!(
                "{} decodes slower than the CPU here (est. {full:.2} tok/s with every layer on it, {decode:.1} on the CPU): no layer offloaded; -ngl N forces it",
                names.join(", ")
            ),
        });
    }
    if !m.gpu_usable && !hw.gpus.is_empty() {
        warnings.push(Warning {
            code: WarningCode::GpuUnusable,
            message: format!(
                "this build of headroom is CPU-only, so {} is not used; build with `--features cuda` (or vulkan/metal) to offload",
                hw.gpus[0].name
            ),
        });
    }
    let ram_budget = m.spec.ram_budget_bytes;
    let working_set = sum([est.anonymous_bytes, est.mapped_working_bytes]);
    if ok && exceeds(working_set, ram_budget) {
        warnings.push(Warning {
            code: WarningCode::PagesFromDisk,
            message: format!(
                "the mapped weights ({}) do not all fit in RAM beside the rest: the model will page from disk and run slowly",
                crate::hw::format_size(est.mapped_working_bytes)
            ),
        });
    }
    if ok
        && s.n_ctx.is_none()
        && ctx < *steps.last().unwrap_or(&ctx)
        && let Some(hint) = kv_quant_hint(p, s, ngl, n_cpu_moe, ctx, &steps, &m)
    {
        warnings.push(hint);
    }
    if !ok {
        warnings.push(Warning {
            code: WarningCode::DoesNotFit,
            message: why_not(&est, &m),
        });
    }
    let verified = crate::arch::is_verified(&p.arch);
    if !verified {
        warnings.push(Warning {
            code: WarningCode::UnverifiedArchitecture,
            message: format!(
                "architecture '{}' is not among those checked against llama.cpp's own accounting: the plan applies the generic rules and may be off (`run` checks with llama.cpp before loading)",
                p.arch
            ),
        });
    }

    let devices = est.devices.clone();
    // A device whose memory is this process's RAM (lavapipe) holds its
    // buffers and overhead in the process's resident set.
    let on_host_devices = est.devices[1..]
        .iter()
        .zip(&m.spec.gpus)
        .filter(|(_, g)| g.kind != DeviceKind::Unified && g.host_memory())
        .fold(0u64, |acc, (d, _)| {
            acc.saturating_add(d.total_bytes.saturating_sub(d.margin_bytes))
        });
    let resolved = Resolved {
        n_batch: est.ctx.n_batch,
        n_ubatch: est.ctx.n_ubatch,
        cache_type_k: s.cache_type_k.name().to_lowercase(),
        cache_type_v: s.cache_type_v.name().to_lowercase(),
        flash_attn: est.ctx.flash_attn,
        swa_full: s.swa_full,
        mmap: s.mmap,
        repack: s.repack,
        tensor_split: pl.layers_per_gpu(p.n_layer),
        logits: crate::plan::Logits::of(s),
    };
    let ngl_effective = if has_gpu { ngl } else { 0 };
    let mut llama_args = llama_args(path, s, &est.ctx, ngl_effective, n_cpu_moe, &resolved);
    // RPC workers: llama.cpp's `--rpc` with their endpoints (`RPC0[HOST:PORT]`).
    let rpc: Vec<&str> = devices
        .iter()
        .filter(|d| d.kind == DeviceKind::Rpc)
        .filter_map(|d| {
            d.name
                .split_once('[')
                .and_then(|(_, e)| e.strip_suffix(']'))
        })
        .collect();
    if !rpc.is_empty() {
        llama_args.extend(["--rpc".to_string(), rpc.join(",")]);
    }
    Plan {
        schema_version: SCHEMA_VERSION,
        headroom_version: env!("CARGO_PKG_VERSION").to_string(),
        llama_cpp: String::new(),
        model: ModelInfo {
            path: path.to_string(),
            architecture: p.arch.clone(),
            name: p.name.clone(),
            n_params: p.n_params,
            file_bytes: p.file_bytes(),
            n_ctx_train: p.n_ctx_train,
            verified,
        },
        verdict,
        quant: p.quant.clone(),
        n_gpu_layers: ngl_effective,
        n_ctx: est.ctx.n_ctx,
        n_parallel: est.ctx.n_seq,
        n_cpu_moe,
        embeddings: s.embeddings.map(|n_ctx| crate::plan::EmbeddingsUse {
            n_ctx,
            bytes: est.embeddings_bytes,
        }),
        settings: resolved,
        kv_rules: memory::kv_rules(p, &est.ctx),
        devices,
        ram: RamUse {
            budget_bytes: ram_budget,
            peak_bytes: sum([est.anonymous_bytes, est.mapped_bytes, on_host_devices]),
            anonymous_bytes: sum([est.anonymous_bytes, on_host_devices]),
            mapped_bytes: est.mapped_bytes,
            allocated_bytes: sum([est.allocated_bytes, on_host_devices]),
        },
        est_decode_tokens_per_s: round2(decode),
        est_prompt_tokens_per_s: round2(prompt),
        est_full_gpu_decode_tokens_per_s: full_gpu.map(round2),
        speed_basis: speed_basis(hw, p, &est, &m),
        warnings,
        llama_args,
        alternatives: Vec::new(),
    }
}

/// Rounded to 2 decimals; a value too large to scale is already whole.
fn round2(x: f64) -> f64 {
    let r = (x * 100.0).round() / 100.0;
    if r.is_finite() { r } else { x }
}

/// Whether a GPU's speed was measured on it (a device the GPU table does
/// not know), `l0` GPU layers (the most that fit) decode slower than none
/// at context `ctx`, and none fits: then the GPUs are slower than the CPU
/// (a software device such as lavapipe), and offloading is no default.
/// The series speed model is linear in the layers moved, so the best
/// placement is one end or the other. Only measured devices are judged so:
/// an assumed figure (an integrated GPU at the RAM's bandwidth) is too
/// rough to turn a GPU down, and RPC workers were asked for by name.
fn cpu_is_faster(p: &ModelProfile, s: &Settings, ctx: u32, l0: u32, m: &Machine) -> bool {
    if !m
        .spec
        .gpus
        .iter()
        .any(|g| g.llama.as_ref().is_some_and(|l| l.speed.is_some()))
    {
        return false;
    }
    let on_cpu = eval(p, s, ctx, &placement(m, 0, 0), m);
    fits(&on_cpu, m)
        && decode_speed(p, &on_cpu, m).0
            > decode_speed(p, &eval(p, s, ctx, &placement(m, l0, 0), m), m).0
}

/// For MoE models that do not fit whole on the GPU: the fewest layers whose
/// experts must stay in RAM for everything else to fit at the first context
/// step, when that decodes faster there than offloading whole layers, and the
/// context grown while those experts in RAM still fit. The context is grown
/// for the placement that was chosen, not for the whole-layer one: growing it
/// first for whole layers could rule out the experts-in-RAM placement that
/// less VRAM would have kept (more VRAM must never give fewer GPU layers).
fn moe_alternative(
    p: &ModelProfile,
    s: &Settings,
    steps: &[u32],
    layers: u32,
    m: &Machine,
) -> Option<(u32, u32)> {
    p.experts?;
    if m.spec.gpus.is_empty() || layers > p.n_layer {
        return None;
    }
    let all = p.n_layer + 1;
    let ctx = steps[0];
    let k = (1..=p.n_layer).find(|&k| fits(&eval(p, s, ctx, &placement(m, all, k), m), m))?;
    let moe = eval(p, s, ctx, &placement(m, all, k), m);
    let whole = eval(p, s, ctx, &placement(m, layers, 0), m);
    if decode_speed(p, &moe, m).0 <= decode_speed(p, &whole, m).0 {
        return None;
    }
    let mut chosen = ctx;
    for &c in &steps[1..] {
        if fits(&eval(p, s, c, &placement(m, all, k), m), m) {
            chosen = c;
        } else {
            break;
        }
    }
    Some((chosen, k))
}

/// When the context is what gives, what `q8_0` KV would allow.
fn kv_quant_hint(
    p: &ModelProfile,
    s: &Settings,
    ngl: u32,
    moe: u32,
    current: u32,
    steps: &[u32],
    m: &Machine,
) -> Option<Warning> {
    if s.cache_type_k != crate::gguf::GgmlType::F16 {
        return None;
    }
    let mut q = s.clone();
    q.cache_type_k = crate::gguf::GgmlType::Q8_0;
    q.cache_type_v = crate::gguf::GgmlType::Q8_0;
    q.flash_attn = FlashAttn::On;
    let best = steps
        .iter()
        .copied()
        .filter(|&c| c > current && fits(&eval(p, &q, c, &placement(m, ngl, moe), m), m))
        .max()?;
    Some(Warning {
        code: WarningCode::ContextLimited,
        message: format!(
            "context limited by memory; --cache-type-k q8_0 --cache-type-v q8_0 would allow -c {best} with the same layers"
        ),
    })
}

fn why_not(e: &Estimate, m: &Machine) -> String {
    for d in &e.devices[1..] {
        if exceeds(d.total_bytes, d.budget_bytes) {
            return format!(
                "{} needs {} but has {}",
                d.name,
                crate::hw::format_size(d.total_bytes),
                crate::hw::format_size(d.budget_bytes)
            );
        }
    }
    if exceeds(e.allocated_bytes, alloc_limit(m)) {
        let allocated = crate::hw::format_size(e.allocated_bytes);
        return match m.spec.alloc_limit_bytes {
            Some(lim) => format!(
                "the process would allocate {allocated} but its limit (RLIMIT_AS/RLIMIT_DATA) is {}",
                crate::hw::format_size(lim)
            ),
            None => {
                format!("the process would allocate {allocated} or more, past any address space")
            }
        };
    }
    let need = ram_need(e);
    format!(
        "RAM: needs {} resident (with margin) but the budget is {}",
        crate::hw::format_size(need),
        crate::hw::format_size(m.spec.ram_budget_bytes)
    )
}

fn llama_args(
    path: &str,
    s: &Settings,
    ctx: &Context,
    ngl: u32,
    n_cpu_moe: u32,
    r: &Resolved,
) -> Vec<String> {
    let mut a = vec![
        "-m".to_string(),
        path.to_string(),
        "-c".into(),
        ctx.n_ctx.to_string(),
    ];
    a.extend([
        "-b".into(),
        ctx.n_batch.to_string(),
        "-ub".into(),
        ctx.n_ubatch.to_string(),
    ]);
    if ctx.n_seq > 1 {
        a.extend(["-np".into(), ctx.n_seq.to_string()]);
    }
    a.extend(["-ngl".into(), ngl.to_string()]);
    if r.tensor_split.len() > 1 {
        a.extend([
            "-ts".into(),
            r.tensor_split
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
        ]);
    }
    if n_cpu_moe > 0 {
        a.extend(["--n-cpu-moe".into(), n_cpu_moe.to_string()]);
    }
    a.extend(["-fa".into(), if r.flash_attn { "on" } else { "off" }.into()]);
    if s.cache_type_k != crate::gguf::GgmlType::F16 {
        a.extend(["-ctk".into(), r.cache_type_k.clone()]);
    }
    if s.cache_type_v != crate::gguf::GgmlType::F16 {
        a.extend(["-ctv".into(), r.cache_type_v.clone()]);
    }
    if s.swa_full {
        a.push("--swa-full".into());
    }
    if !s.mmap {
        a.push("--no-mmap".into());
    }
    if !s.repack {
        a.push("--no-repack".into());
    }
    a
}

/// Choose among several files of one model: the highest-quality one that fits
/// fully; else the best score (see the module docs). The others become
/// `alternatives`, best first.
#[must_use]
pub fn choose(mut plans: Vec<Plan>, profiles_bpw: &[f64]) -> Option<Plan> {
    if plans.is_empty() {
        return None;
    }
    let mut order: Vec<usize> = (0..plans.len()).collect();
    let score = |i: usize, p: &Plan| -> (u8, f64) {
        let bpw = profiles_bpw.get(i).copied().unwrap_or(0.0);
        let discounted = bpw * (p.est_decode_tokens_per_s / 10.0).min(1.0);
        // Weights that page from disk "fit" but crawl: ranked like offload.
        let pages = p
            .warnings
            .iter()
            .any(|w| w.code == WarningCode::PagesFromDisk);
        match p.verdict {
            Verdict::Fits if !pages => (2, bpw),
            Verdict::Fits | Verdict::FitsWithOffload => (1, discounted),
            Verdict::DoesNotFit => (0, -(p.ram.anonymous_bytes as f64)),
        }
    };
    order.sort_by(|&a, &b| {
        let (ca, sa) = score(a, &plans[a]);
        let (cb, sb) = score(b, &plans[b]);
        cb.cmp(&ca).then(sb.total_cmp(&sa))
    });
    let mut taken: Vec<Option<Plan>> = plans.drain(..).map(Some).collect();
    let mut best = taken[order[0]].take()?;
    best.alternatives = order[1..].iter().filter_map(|&i| taken[i].take()).collect();
    Some(best)
}

#[cfg(test)]
pub(crate) mod tests;
