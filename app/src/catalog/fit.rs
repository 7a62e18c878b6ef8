//! `headroom fit`: which catalog models run on a machine, best first.
//!
//! For each model, the quantization is the one `headroom plan` would choose
//! among its files ([`solve::choose`]: the highest-quality file that fits
//! fully, else the best offload), except that a plan whose weights would
//! page from disk counts as not fitting. Models are then sorted by:
//!
//! 1. **fit class**: runs fully (every layer on the GPUs, or in RAM on a
//!    machine without GPU) > runs with layers or experts in RAM > does not
//!    fit;
//! 2. architectures the planner was checked on against llama.cpp's own
//!    accounting before the others ([`headroom_planner::rank::trust_class`]);
//! 3. **quality class**, in half-octave steps of model size
//!    ([`headroom_planner::rank`] has the rule): larger, more bits and faster
//!    than 10 tok/s rank higher; an MoE model counts as √(total × active);
//! 4. models whose architecture is estimated from the parameter count after
//!    those whose facts are known;
//! 5. **speed**: estimated decode tokens per second; then the id.
//!
//! More memory never moves a model to a lower fit class, nor to a
//! lower-quality quantization within the fit class "runs fully".

use std::collections::HashMap;
use std::sync::Mutex;

use anyhow::{Context, Result};
use headroom_planner::hw::{self, HardwareSnapshot, Overrides};
use headroom_planner::plan::{Plan, Settings, Verdict};
// The ranking's pure decisions live (and are property-tested) in the planner;
// re-exported because they are part of this module's public face.
pub use headroom_planner::rank::{fit_class, quality_class, trust_class};
use headroom_planner::solve::{self, Build};
use headroom_planner::speed::SpeedBasis;
use headroom_planner::synth::facts::ArchFacts;
use headroom_planner::synth::mix::FileType;
use serde::Serialize;

use super::plan::{ArchBasis, QuantPlan, ResolvedArch, plan_quant, resolve_arch};
use super::{Catalog, Entry};

/// What to rank, and with which settings.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Planner settings (`-c`, cache types, …) for every model.
    pub settings: Settings,
    /// `--min-ctx`: plan every model at this context, and leave out models
    /// trained for less (or for an unknown context).
    pub min_ctx: Option<u32>,
    /// `--use`: keep models with all of these tags.
    pub uses: Vec<String>,
    /// `--max-download`: only quantizations at most this large.
    pub max_download: Option<u64>,
}

impl Query {
    /// The settings each plan is made with.
    fn plan_settings(&self) -> Settings {
        let mut s = self.settings.clone();
        if let Some(min) = self.min_ctx {
            s.n_ctx = Some(s.n_ctx.map_or(min, |c| c.max(min)));
        }
        s
    }
}

/// One model in the ranking (`fit --json` prints these).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Catalog id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Parameters.
    pub n_params: u64,
    /// Parameters read per generated token (less than `n_params` for MoE).
    pub n_params_active: u64,
    /// The chosen quantization; null when none fits.
    pub quant: Option<String>,
    /// The plan's verdict, in `plan`'s words.
    pub verdict: Verdict,
    /// Layers on GPUs (null when nothing fits).
    pub n_gpu_layers: Option<u32>,
    /// Planned context.
    pub n_ctx: Option<u32>,
    /// Training context, the most the model supports (0 when unknown).
    pub n_ctx_max: u64,
    /// Estimated decode speed.
    pub est_decode_tokens_per_s: Option<f64>,
    /// Bytes to download for the chosen quantization.
    pub download_bytes: Option<u64>,
    /// Anything here was derived rather than listed: the download size, or
    /// the architecture (hence the memory plan).
    pub estimated: bool,
    /// The download size was derived from the architecture.
    pub size_estimated: bool,
    /// `headroom catalog refresh` read the chosen file on the hub.
    pub verified: bool,
    /// The architecture is another entry's (`arch_like`) or estimated from
    /// the parameter count.
    pub arch_estimated: bool,
    /// Where the architecture comes from: "own", "like ID" (another entry's)
    /// or "estimated" (from the parameter count).
    pub arch_basis: String,
    /// Fit class (2 runs fully, 1 with offload, 0 does not fit).
    pub fit_class: u8,
    /// The planner was held to llama.cpp's accounting on this architecture
    /// (`headroom_planner::arch::VERIFIED`); unverified ones rank lower.
    pub arch_verified: bool,
    /// Quality class (see the module docs).
    pub quality_class: i32,
    /// One line on why this quantization and placement.
    pub why: String,
    /// What the speed estimate assumes (the plan's `speed_basis`: each
    /// device's bandwidth and its source, bytes read per token), of the
    /// chosen quantization, or of the closest when none fits.
    pub speed_basis: SpeedBasis,
    /// The full `plan --json` object of the chosen quantization.
    pub plan: Option<Plan>,
}

/// A machine with `ram` bytes of RAM and these GPUs (none when empty),
/// otherwise headroom's default hardware profile (8 x86-64 cores with AVX2,
/// 20 GB/s RAM): the reference machine of tests and benchmarks.
///
/// # Errors
/// A RAM size of 0.
pub fn machine(ram: u64, vram: &[u64]) -> Result<HardwareSnapshot> {
    let base = hw::parse_profile("", std::path::Path::new("default profile"))?;
    Ok(hw::apply_overrides(
        base,
        &Overrides {
            ram_bytes: Some(ram),
            vram_bytes: Some(vram.to_vec()),
            profile: None,
        },
    )?)
}

/// Whether an entry passes the query's use and context filters.
fn selected(e: &Entry, arch: &ResolvedArch, q: &Query) -> bool {
    let uses_ok = q.uses.iter().all(|u| e.has_use(u));
    let ctx_ok = match q.min_ctx {
        // An unknown training context promises nothing.
        Some(min) => arch.facts.context_length >= u64::from(min),
        None => true,
    };
    uses_ok && ctx_ok
}

/// A quantization worth planning.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    /// Index into the entry's `quants`.
    index: usize,
    /// Effective bits per weight (the solver's quality measure).
    bpw: f64,
    /// Bytes of all weights, and of the repeating layers.
    weights: u64,
    layers: u64,
}

/// The quantizations of `e` to consider, highest effective bits first.
fn candidates(e: &Entry, arch: &ResolvedArch, q: &Query) -> Vec<Candidate> {
    let n = arch.skeleton.n_params().max(1) as f64;
    let mut out: Vec<Candidate> = e
        .quants
        .iter()
        .enumerate()
        .filter_map(|(index, quant)| {
            let (weights, layers) = arch.skeleton.weight_bytes(quant.file_type);
            let size = quant.size_bytes.unwrap_or(weights);
            q.max_download
                .is_none_or(|max| size <= max)
                .then_some(Candidate {
                    index,
                    bpw: weights as f64 * 8.0 / n,
                    weights,
                    layers,
                })
        })
        .collect();
    out.sort_by(|a, b| b.bpw.total_cmp(&a.bpw));
    out
}

/// Memory bounds that no plan can exceed, to skip plans that cannot run:
/// the most GPU memory and RAM the machine could offer.
struct Caps {
    gpu: u64,
    ram: u64,
    has_gpu: bool,
}

impl Caps {
    fn of(hw: &HardwareSnapshot, build: Build) -> Caps {
        let mut gpu: u64 = hw
            .gpus
            .iter()
            .map(|g| g.total_bytes.max(g.free_bytes))
            .sum();
        if let Some(u) = &hw.unified {
            gpu = gpu.max(u.gpu_limit_bytes);
        }
        let has_gpu = build.gpu && (gpu > 0);
        Caps {
            gpu: if has_gpu { gpu } else { 0 },
            ram: hw.ram.total_bytes.max(hw.ram.available_bytes),
            has_gpu,
        }
    }

    /// Whether `c` could possibly run fully: every layer on the GPUs, or
    /// every weight in RAM without GPU.
    fn may_run_fully(&self, c: &Candidate) -> bool {
        if self.has_gpu {
            c.layers <= self.gpu
        } else {
            c.weights <= self.ram
        }
    }

    /// Whether `c` could possibly run at all: weights in RAM and GPUs together.
    fn may_run(&self, c: &Candidate) -> bool {
        c.weights <= self.ram.saturating_add(self.gpu)
    }
}

/// Plans already made in one ranking, by architecture, mix and placement
/// mode: entries sharing an architecture (`arch_like`, fine-tunes listing
/// the same files) get the very same plan, so it is made once.
#[derive(Default)]
struct Memo {
    plans: Mutex<HashMap<(ArchFacts, FileType, bool), QuantPlan>>,
}

impl Memo {
    /// Plan quantization `index` of `e` (all layers forced onto the GPUs
    /// when `all_layers`), or reuse the plan of the same file type of the
    /// same architecture.
    #[allow(clippy::too_many_arguments)]
    fn plan(
        &self,
        e: &Entry,
        index: usize,
        arch: &ResolvedArch,
        settings: &Settings,
        all_layers: bool,
        hw: &HardwareSnapshot,
        build: Build,
    ) -> Result<QuantPlan> {
        let quant = &e.quants[index];
        let key = (arch.facts.clone(), quant.file_type, all_layers);
        let cached = self
            .plans
            .lock()
            .map_err(|_| anyhow::anyhow!("a planning thread panicked"))?
            .get(&key)
            .cloned();
        if let Some(mut qp) = cached {
            // Same tensors and settings: only the file's identity differs.
            let reference = format!("{}:{}", quant.repo, quant.name);
            if qp.plan.llama_args.get(1) == Some(&qp.plan.model.path) {
                qp.plan.llama_args[1].clone_from(&reference);
            }
            qp.plan.model.path = reference;
            qp.index = index;
            qp.size_estimated = quant.size_bytes.is_none();
            qp.download_bytes = quant.size_bytes.unwrap_or(qp.plan.model.file_bytes);
            return Ok(qp);
        }
        let mut s = settings.clone();
        if all_layers {
            s.n_gpu_layers = Some(u32::MAX);
        }
        let qp = plan_quant(e, index, arch, &s, hw, build)?;
        self.plans
            .lock()
            .map_err(|_| anyhow::anyhow!("a planning thread panicked"))?
            .insert(key, qp.clone());
        Ok(qp)
    }
}

/// Whether `fit` counts a plan as running: the plan fits, and its weights
/// stay in RAM (a model paged from disk for every token is no recommendation).
#[must_use]
pub fn runs(p: &Plan) -> bool {
    p.verdict.fits() && !pages_from_disk(p)
}

fn pages_from_disk(p: &Plan) -> bool {
    p.warnings
        .iter()
        .any(|w| w.code == headroom_planner::plan::WarningCode::PagesFromDisk)
}

/// The verdict `fit` reports: the plan's, except that a plan paging its
/// weights from disk does not fit.
#[must_use]
pub fn fit_verdict(p: &Plan) -> Verdict {
    if runs(p) {
        p.verdict
    } else {
        Verdict::DoesNotFit
    }
}

/// The plans of one entry that decide its row.
struct Planned {
    /// Plans made, highest bits first.
    plans: Vec<QuantPlan>,
    /// Index into `plans` of the pick.
    best: Option<usize>,
    /// The next-larger quantization, which does not run fully, when the
    /// pick runs fully.
    above: Option<usize>,
}

/// The plan [`solve::choose`] picks among `plans`, counting plans that page
/// from disk as not fitting.
fn chosen(plans: &[QuantPlan]) -> Option<usize> {
    let bpw: Vec<f64> = plans.iter().map(|p| p.bpw).collect();
    let view: Vec<Plan> = plans
        .iter()
        .map(|p| {
            let mut plan = p.plan.clone();
            plan.verdict = fit_verdict(&p.plan);
            plan.alternatives.clear();
            plan
        })
        .collect();
    let best = solve::choose(view, &bpw)?;
    plans
        .iter()
        .position(|p| p.plan.model.path == best.model.path)
}

/// Plan the candidates of `e` and pick one, as [`solve::choose`] would
/// among all of them, planning as few as that allows:
/// 1. the highest-bits quantization that runs with every layer on the GPUs
///    (or in RAM without GPU) wins outright; whether one does is a cheap
///    plan with all layers placed, and only the winner is planned in full;
/// 2. otherwise the plans are made highest bits first, and stop once no
///    remaining file could beat the best offload score (bits per weight ×
///    min(1, tok/s ÷ 10) ≤ bits per weight).
fn plan_entry(
    memo: &Memo,
    e: &Entry,
    arch: &ResolvedArch,
    hw: &HardwareSnapshot,
    build: Build,
    q: &Query,
) -> Result<Planned> {
    let settings = q.plan_settings();
    let cands = candidates(e, arch, q);
    let caps = Caps::of(hw, build);
    if settings.n_gpu_layers.is_none() {
        for (k, c) in cands.iter().enumerate() {
            if !caps.may_run_fully(c) {
                continue;
            }
            let whole = memo.plan(e, c.index, arch, &settings, true, hw, build)?;
            if whole.plan.verdict == Verdict::Fits && runs(&whole.plan) {
                let qp = memo.plan(e, c.index, arch, &settings, false, hw, build)?;
                let above = k.checked_sub(1).map(|a| cands[a].index);
                return Ok(Planned {
                    plans: vec![qp],
                    best: Some(0),
                    above,
                });
            }
        }
    }
    let mut plans: Vec<QuantPlan> = Vec::new();
    let mut best_offload = 0.0f64;
    for c in &cands {
        if c.bpw <= best_offload {
            break;
        }
        if !caps.may_run(c) {
            continue;
        }
        let qp = memo.plan(e, c.index, arch, &settings, false, hw, build)?;
        let verdict = fit_verdict(&qp.plan);
        if verdict == Verdict::FitsWithOffload {
            let score = qp.bpw * (qp.plan.est_decode_tokens_per_s / 10.0).min(1.0);
            best_offload = best_offload.max(score);
        }
        plans.push(qp);
        if verdict == Verdict::Fits {
            // With -ngl given: the highest-bits file that fits wins outright.
            break;
        }
    }
    if plans.is_empty()
        && let Some(smallest) = cands.last()
    {
        // Nothing can run: plan the smallest file to say why.
        plans.push(memo.plan(e, smallest.index, arch, &settings, false, hw, build)?);
    }
    let best = chosen(&plans);
    Ok(Planned {
        plans,
        best,
        above: None,
    })
}

fn where_it_runs(p: &Plan) -> String {
    let gpus = p.devices.len().saturating_sub(1);
    match gpus {
        0 => "in RAM (no GPU)".to_string(),
        1 => "fully on the GPU".to_string(),
        n => format!("fully on {n} GPUs"),
    }
}

fn why(e: &Entry, planned: &Planned, best: usize) -> String {
    let qp = &planned.plans[best];
    let p = &qp.plan;
    let q = &e.quants[qp.index].name;
    match fit_verdict(p) {
        Verdict::Fits => match planned.above {
            None => format!("{q}, the largest listed, runs {}", where_it_runs(p)),
            Some(a) => format!(
                "{q} runs {}; {} would not",
                where_it_runs(p),
                e.quants[a].name
            ),
        },
        Verdict::FitsWithOffload => {
            let in_ram = if p.n_cpu_moe > 0 {
                format!("experts of {} of {} layers in RAM", p.n_cpu_moe, qp.n_layer)
            } else {
                format!(
                    "{} of {} layers on the GPU",
                    p.n_gpu_layers.min(qp.n_layer),
                    qp.n_layer
                )
            };
            format!(
                "{q}: {in_ram}, est. {:.1} tok/s{}",
                p.est_decode_tokens_per_s,
                p.est_full_gpu_decode_tokens_per_s
                    .map(|f| format!(" ({f:.0} fully on the GPU)"))
                    .unwrap_or_default()
            )
        }
        Verdict::DoesNotFit => {
            let reason = p
                .warnings
                .iter()
                .find(|w| {
                    w.code == headroom_planner::plan::WarningCode::DoesNotFit
                        || w.code == headroom_planner::plan::WarningCode::PagesFromDisk
                })
                .map_or("over budget", |w| w.message.as_str());
            format!("does not fit: {reason} ({q}, the closest)")
        }
    }
}

/// The row of `e` for the ranking, or `None` when the query filters it out.
///
/// # Errors
/// An entry that cannot be planned.
pub fn row(
    cat: &Catalog,
    e: &Entry,
    hw: &HardwareSnapshot,
    build: Build,
    q: &Query,
) -> Result<Option<Row>> {
    row_with(&Memo::default(), cat, e, hw, build, q)
}

fn row_with(
    memo: &Memo,
    cat: &Catalog,
    e: &Entry,
    hw: &HardwareSnapshot,
    build: Build,
    q: &Query,
) -> Result<Option<Row>> {
    let arch = resolve_arch(cat, e)?;
    if !selected(e, &arch, q) {
        return Ok(None);
    }
    let planned = plan_entry(memo, e, &arch, hw, build, q)?;
    let Some(best) = planned.best else {
        return Ok(None);
    };
    let qp = &planned.plans[best];
    let quant = &e.quants[qp.index];
    let verdict = fit_verdict(&qp.plan);
    let fits = verdict.fits();
    let arch_estimated = arch.basis != ArchBasis::Own;
    Ok(Some(Row {
        id: e.id.clone(),
        name: e.name.clone(),
        n_params: qp.n_params,
        n_params_active: qp.n_params_active,
        quant: fits.then(|| quant.name.clone()),
        verdict,
        n_gpu_layers: fits.then_some(qp.plan.n_gpu_layers),
        n_ctx: fits.then_some(qp.plan.n_ctx),
        n_ctx_max: arch.facts.context_length,
        est_decode_tokens_per_s: fits.then_some(qp.plan.est_decode_tokens_per_s),
        download_bytes: fits.then_some(qp.download_bytes),
        estimated: arch_estimated || (fits && qp.size_estimated),
        size_estimated: fits && qp.size_estimated,
        verified: fits && quant.verified,
        arch_estimated,
        fit_class: fit_class(verdict),
        arch_verified: trust_class(&arch.facts.architecture) == 1,
        quality_class: quality_class(
            qp.n_params,
            qp.n_params_active,
            quant.file_type,
            fits.then_some(qp.plan.est_decode_tokens_per_s),
        ),
        arch_basis: match &arch.basis {
            ArchBasis::Own => "own".into(),
            ArchBasis::Like(id) => format!("like {id}"),
            ArchBasis::Estimated => "estimated".into(),
        },
        why: why(e, &planned, best),
        speed_basis: qp.plan.speed_basis.clone(),
        plan: fits.then(|| qp.plan.clone()),
    }))
}

/// Rank the catalog for `hw` (see the module docs for the order).
///
/// # Errors
/// An entry that cannot be planned.
pub fn rank(cat: &Catalog, hw: &HardwareSnapshot, build: Build, q: &Query) -> Result<Vec<Row>> {
    // Entries are independent: plan them on every core (plans are pure).
    let entries = cat.entries();
    let workers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(entries.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let memo = Memo::default();
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(e) = entries.get(i) else { break };
            let r = row_with(&memo, cat, e, hw, build, q);
            done.push((i, r.with_context(|| format!("planning {}", e.id))));
        }
        done
    };
    let mut results: Vec<(usize, Result<Option<Row>>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (1..workers).map(|_| s.spawn(work)).collect();
        let mut all = work();
        for h in handles {
            // A worker only panics on a bug; surface it as this thread's panic.
            all.extend(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        all
    });
    results.sort_by_key(|(i, _)| *i);
    let mut rows = Vec::with_capacity(results.len());
    for (_, r) in results {
        if let Some(r) = r? {
            rows.push(r);
        }
    }
    rows.sort_by(|a, b| {
        b.fit_class
            .cmp(&a.fit_class)
            .then(b.arch_verified.cmp(&a.arch_verified))
            .then(b.quality_class.cmp(&a.quality_class))
            .then((a.arch_basis == "estimated").cmp(&(b.arch_basis == "estimated")))
            .then(
                b.est_decode_tokens_per_s
                    .unwrap_or(0.0)
                    .total_cmp(&a.est_decode_tokens_per_s.unwrap_or(0.0)),
            )
            .then(a.id.cmp(&b.id))
    });
    Ok(rows)
}

/// One quantization of one model, for `headroom fit MODEL`.
#[derive(Debug, Clone, Serialize)]
pub struct QuantRow {
    /// Quantization name as listed.
    pub quant: String,
    /// File name(s), or the folder of a split file.
    pub files: Vec<String>,
    /// Bytes to download.
    pub download_bytes: u64,
    /// The size as listed (`4.92 GB`), if listed so.
    pub size_listed: Option<String>,
    /// The size was derived rather than listed.
    pub size_estimated: bool,
    /// `headroom catalog refresh` read this file on the hub.
    pub verified: bool,
    /// Effective bits per weight.
    pub bits_per_weight: f64,
    /// `fit`'s pick: the one `plan` would choose, counting files that would
    /// page from disk as not fitting.
    pub chosen: bool,
    /// The verdict `fit` counts (`plan`'s, except paging from disk does not fit).
    pub verdict: Verdict,
    /// What the speed estimate assumes (as the plan's `speed_basis`).
    pub speed_basis: SpeedBasis,
    /// The plan.
    pub plan: Plan,
}

/// Every quantization of `e` planned for `hw`, in listed order, with the
/// architecture basis.
///
/// # Errors
/// An entry that cannot be planned.
pub fn quant_rows(
    cat: &Catalog,
    e: &Entry,
    hw: &HardwareSnapshot,
    build: Build,
    q: &Query,
) -> Result<(ResolvedArch, Vec<QuantRow>)> {
    let arch = resolve_arch(cat, e)?;
    let settings = q.plan_settings();
    let mut plans = candidates(e, &arch, q)
        .into_iter()
        .map(|c| plan_quant(e, c.index, &arch, &settings, hw, build))
        .collect::<Result<Vec<_>>>()?;
    let best = chosen(&plans).map(|i| plans[i].index);
    plans.sort_by_key(|p| p.index);
    let rows = plans
        .into_iter()
        .map(|p| {
            let quant = &e.quants[p.index];
            QuantRow {
                quant: quant.name.clone(),
                files: if quant.files.is_empty() {
                    quant.folder.iter().cloned().collect()
                } else {
                    quant.files.clone()
                },
                download_bytes: p.download_bytes,
                size_listed: quant.size_listed.clone(),
                size_estimated: p.size_estimated,
                verified: quant.verified,
                bits_per_weight: (p.bpw * 100.0).round() / 100.0,
                chosen: Some(p.index) == best,
                verdict: fit_verdict(&p.plan),
                speed_basis: p.plan.speed_basis.clone(),
                plan: p.plan,
            }
        })
        .collect();
    Ok((arch, rows))
}
