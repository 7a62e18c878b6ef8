//! `headroom fit`: which catalog models to run on a machine, best first.
//!
//! Each model is planned at its quantizations (the solver places layers and
//! MoE experts as `headroom plan` would; a plan whose weights would page
//! from disk counts as not running). Its row shows the configuration
//! [`rank::pick`] chooses: the highest expected quality (the model's
//! quality figure less its quantization's loss, on the LMArena Elo scale)
//! among those at or above the purpose's speed floor, else the fastest.
//! Rows are sorted by [`rank::cmp_rows`]: usable (at or above the floor)
//! before too slow before not running; checked architectures first; then
//! expected quality (usable rows) or speed (too slow ones). A model whose
//! successor (`supersedes` in the catalog) is usable on the same machine is
//! hidden unless `--all` is given. [`headroom_planner::rank`] has the rules
//! and their property tests.
//!
//! The purpose (`--use`'s first tag: chat, code or reasoning) sets the
//! speed floor (`--min-speed` replaces it) and the context: every file is
//! chosen at [`BASE_CTX`], and the pick gets the purpose's (8k chat, 16k
//! reasoning, 32k code, where the model allows) when that costs under
//! [`CTX_SPEED_COST`] of the speed; otherwise the row says what the longer
//! context would cost.

use std::collections::HashMap;
use std::sync::Mutex;

use anyhow::{Context, Result};
use headroom_planner::hw::{self, HardwareSnapshot, Overrides};
use headroom_planner::plan::{Plan, Settings, Verdict};
// The ranking's pure decisions live (and are property-tested) in the planner;
// re-exported because they are part of this module's public face.
use headroom_planner::rank::{self, RowKey, expected_quality};
pub use headroom_planner::rank::{
    Config, Purpose, Standing, fit_class, quality_class, quant_loss_elo, trust_class,
};
use headroom_planner::solve::Build;
use headroom_planner::speed::SpeedBasis;
use headroom_planner::synth::facts::ArchFacts;
use headroom_planner::synth::mix::FileType;
use serde::Serialize;

use super::plan::{ArchBasis, QuantPlan, ResolvedArch, plan_quant, resolve_arch};
use super::{Catalog, Entry};

/// The context every file is planned at to choose among them (the solver's
/// smallest default): the purpose's own is tried on the pick.
pub const BASE_CTX: u32 = headroom_planner::solve::MIN_DEFAULT_CTX;

/// The share of speed a purpose's longer context may cost before `fit`
/// keeps the shorter one and shows the trade instead.
pub const CTX_SPEED_COST: f64 = 0.15;

/// What to rank, and with which settings.
#[derive(Debug, Clone)]
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
    /// What the models are for (`--use`'s first tag).
    pub purpose: Purpose,
    /// `--min-speed`: the speed floor, replacing the purpose's.
    pub min_speed: Option<f64>,
    /// `--all`: keep models whose successor is usable too.
    pub all: bool,
}

impl Default for Query {
    fn default() -> Query {
        Query {
            settings: Settings::default(),
            min_ctx: None,
            uses: Vec::new(),
            max_download: None,
            purpose: Purpose::Chat,
            min_speed: None,
            all: false,
        }
    }
}

impl Query {
    /// The settings each file of a model trained for `train` tokens (0:
    /// unknown) is planned and chosen with: `-c` or `--min-ctx` when given,
    /// else [`BASE_CTX`] (or the training context when shorter), the same
    /// for every model and machine, so that speeds compare and more memory
    /// never makes a file slower. The purpose's context is tried on the
    /// pick afterwards.
    fn plan_settings(&self, train: u64) -> Settings {
        let mut s = self.settings.clone();
        if let Some(min) = self.min_ctx {
            s.n_ctx = Some(s.n_ctx.map_or(min, |c| c.max(min)));
        }
        if s.n_ctx.is_none() {
            let train = u32::try_from(train).unwrap_or(u32::MAX);
            s.n_ctx = Some(if train == 0 {
                BASE_CTX
            } else {
                BASE_CTX.min(train)
            });
        }
        s
    }

    /// The speed floor in tokens/s.
    #[must_use]
    pub fn floor(&self) -> f64 {
        self.min_speed.unwrap_or_else(|| self.purpose.min_speed())
    }

    /// The context the purpose asks of a model trained for `train` tokens
    /// (0: unknown), unless the user fixed the context.
    fn purpose_ctx(&self, train: u64) -> Option<u32> {
        if self.settings.n_ctx.is_some() || self.min_ctx.is_some() {
            return None;
        }
        let want = self.purpose.min_ctx();
        let train = u32::try_from(train).unwrap_or(u32::MAX);
        Some(if train == 0 { want } else { want.min(train) })
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
    /// How it stands against the speed floor.
    pub standing: Standing,
    /// The purpose ranked for.
    pub purpose: Purpose,
    /// Its speed floor in tokens/s (or `--min-speed`).
    pub min_speed: f64,
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
    /// Where the download size comes from: "listed" (a README table),
    /// "exact" (a byte count recorded by a third party), "verified" (read
    /// on the hub by `catalog refresh`) or "derived" (from the
    /// architecture facts).
    pub size_basis: Option<&'static str>,
    /// The model's quality at 16 bits (LMArena text Elo scale), when known.
    pub quality: Option<f64>,
    /// Where `quality` comes from.
    pub quality_basis: Option<String>,
    /// Elo points the chosen quantization costs.
    pub quant_loss: Option<f64>,
    /// `quality` less `quant_loss`: what the ranking compares.
    pub expected_quality: Option<f64>,
    /// First public release.
    pub release: Option<String>,
    /// Ids of usable models that supersede this one (shown with `--all`).
    pub superseded_by: Vec<String>,
    /// Other entries of the same model (same architecture and quality
    /// figure: a QAT checkpoint, another publisher's files) that ranked
    /// lower and are folded into this row (shown with `--all`).
    pub also_as: Vec<String>,
    /// The entry it is folded into, with `--all`.
    pub variant_of: Option<String>,
    /// What makes two entries the same model: their architecture and
    /// quality figure.
    #[serde(skip)]
    same_model: Option<(ArchFacts, u64)>,
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
    /// Size-based quality class (the order of models without a quality
    /// figure; see [`headroom_planner::rank`]).
    pub quality_class: i32,
    /// Why this configuration, in words.
    pub why: String,
    /// What the speed estimate assumes (the plan's `speed_basis`: each
    /// device's bandwidth and its source, bytes read per token), of the
    /// chosen quantization, or of the closest when none fits.
    pub speed_basis: SpeedBasis,
    /// The full `plan --json` object of the chosen quantization.
    pub plan: Option<Plan>,
}

impl Row {
    fn key(&self) -> RowKey<'_> {
        RowKey {
            standing: self.standing,
            trust: u8::from(self.arch_verified),
            quality: self.expected_quality,
            size_class: self.quality_class,
            tokens_per_s: self.est_decode_tokens_per_s.unwrap_or(0.0),
            id: &self.id,
        }
    }
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

/// Whether an entry passes the query's use and context filters. Without
/// `--use`, the ranking is for chat: models tagged `chat` (a coder or a
/// thinking-only model is ranked with `--use code` or `--use reasoning`).
/// A base model (pretrained, not tuned to follow instructions) is ranked
/// only when `--use base` asks for it.
fn selected(e: &Entry, arch: &ResolvedArch, q: &Query) -> bool {
    let base_ok = !e.has_use("base") || q.uses.iter().any(|u| u.eq_ignore_ascii_case("base"));
    let uses_ok =
        base_ok && q.uses.iter().all(|u| e.has_use(u)) && (!q.uses.is_empty() || e.has_use("chat"));
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
    /// Bytes of all weights.
    weights: u64,
    /// Expected quality (None without a quality figure).
    quality: Option<f64>,
}

impl Candidate {
    fn merit(&self) -> f64 {
        rank::merit(self.quality, self.bpw)
    }
}

/// The quantizations of `e` to consider, best expected quality first (most
/// bits first for a model without a quality figure); of two that score the
/// same, the smaller (faster) first.
fn candidates(e: &Entry, arch: &ResolvedArch, q: &Query) -> Vec<Candidate> {
    let n = arch.skeleton.n_params().max(1) as f64;
    let mut out: Vec<Candidate> = e
        .quants
        .iter()
        .enumerate()
        .filter_map(|(index, quant)| {
            let (weights, _) = arch.skeleton.weight_bytes(quant.file_type);
            let size = quant.size_bytes.unwrap_or(weights);
            q.max_download
                .is_none_or(|max| size <= max)
                .then_some(Candidate {
                    index,
                    bpw: weights as f64 * 8.0 / n,
                    weights,
                    quality: expected_quality(e.quality, quant.file_type),
                })
        })
        .collect();
    out.sort_by(|a, b| {
        b.merit()
            .total_cmp(&a.merit())
            .then(a.weights.cmp(&b.weights))
    });
    out
}

/// The most memory the machine could offer, to skip plans that cannot run.
struct Caps {
    gpu: u64,
    ram: u64,
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
        Caps {
            gpu: if build.gpu { gpu } else { 0 },
            ram: hw.ram.total_bytes.max(hw.ram.available_bytes),
        }
    }

    /// Whether `c` could possibly run at all: weights in RAM and GPUs together.
    fn may_run(&self, c: &Candidate) -> bool {
        c.weights <= self.ram.saturating_add(self.gpu)
    }
}

/// Plans already made in one ranking, by architecture, mix and context:
/// entries sharing an architecture (`arch_like`, fine-tunes listing the
/// same files) get the very same plan, so it is made once.
#[derive(Default)]
struct Memo {
    plans: Mutex<HashMap<(ArchFacts, FileType, Option<u32>), QuantPlan>>,
}

impl Memo {
    /// Plan quantization `index` of `e` with `settings`, or reuse the plan
    /// of the same file type of the same architecture.
    fn plan(
        &self,
        e: &Entry,
        index: usize,
        arch: &ResolvedArch,
        settings: &Settings,
        hw: &HardwareSnapshot,
        build: Build,
    ) -> Result<QuantPlan> {
        let quant = &e.quants[index];
        let key = (arch.facts.clone(), quant.file_type, settings.n_ctx);
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
        let qp = plan_quant(e, index, arch, settings, hw, build)?;
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

/// A planned quantization as the ranking sees it.
fn config_of(e: &Entry, qp: &QuantPlan) -> Config {
    Config {
        runs: runs(&qp.plan),
        tokens_per_s: qp.plan.est_decode_tokens_per_s,
        quality: expected_quality(e.quality, e.quants[qp.index].file_type),
        bits_per_weight: qp.bpw,
    }
}

/// The plans of one entry that decide its row.
struct Planned {
    /// Plans made, best expected quality first.
    plans: Vec<QuantPlan>,
    /// Index into `plans` of the pick.
    best: Option<usize>,
    /// What the purpose's context did: the pick runs at it, or what it
    /// would have cost.
    ctx_note: Option<String>,
}

/// Plan the candidates of `e` and pick one ([`rank::pick`]), planning as
/// few as that allows. On one machine a larger file never decodes faster
/// (more bytes per token, fewer layers on the GPU), so the usable files are
/// the ones up to some size: bisection over the files by size finds it in
/// about log2(files) plans, and the pick is the best expected quality at
/// or under it. That one is planned too, and should it not be usable after
/// all, every file is planned best first until one is. When none is
/// usable, the smallest (the fastest) is shown.
fn plan_entry(
    memo: &Memo,
    e: &Entry,
    arch: &ResolvedArch,
    hw: &HardwareSnapshot,
    build: Build,
    q: &Query,
) -> Result<Planned> {
    let settings = q.plan_settings(arch.facts.context_length);
    let floor = q.floor();
    let caps = Caps::of(hw, build);
    let all = candidates(e, arch, q);
    // Best expected quality first (`candidates`' order), and by size.
    let cands: Vec<&Candidate> = all.iter().filter(|c| caps.may_run(c)).collect();
    let mut by_size = cands.clone();
    by_size.sort_by(|a, b| a.weights.cmp(&b.weights).then(a.index.cmp(&b.index)));
    let mut plans: Vec<QuantPlan> = Vec::new();
    let plan = |plans: &mut Vec<QuantPlan>, c: &Candidate| -> Result<bool> {
        if let Some(p) = plans.iter().find(|p| p.index == c.index) {
            return Ok(config_of(e, p).standing(floor) == Standing::Usable);
        }
        let qp = memo.plan(e, c.index, arch, &settings, hw, build)?;
        let usable = config_of(e, &qp).standing(floor) == Standing::Usable;
        plans.push(qp);
        Ok(usable)
    };
    // The number of files, smallest first, that are usable.
    let (mut lo, mut hi) = (0, by_size.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if plan(&mut plans, by_size[mid])? {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let fits = &by_size[..lo];
    let best = cands
        .iter()
        .find(|c| fits.iter().any(|f| f.index == c.index));
    match best {
        Some(b) if plan(&mut plans, b)? => {}
        Some(_) => {
            for c in &cands {
                if plan(&mut plans, c)? {
                    break;
                }
            }
        }
        None => {
            if let Some(smallest) = by_size.first() {
                plan(&mut plans, smallest)?;
            }
        }
    }
    if plans.is_empty()
        && let Some(smallest) = all
            .iter()
            .min_by(|a, b| a.weights.cmp(&b.weights).then(a.index.cmp(&b.index)))
    {
        // Nothing can run: plan the smallest file to say why.
        plans.push(memo.plan(e, smallest.index, arch, &settings, hw, build)?);
    }
    let configs: Vec<Config> = plans.iter().map(|qp| config_of(e, qp)).collect();
    let best = rank::pick(&configs, floor);
    let mut ctx_note = None;
    if let (Some(b), Some(want)) = (best, q.purpose_ctx(arch.facts.context_length)) {
        let short = &plans[b];
        if short.plan.n_ctx < want {
            let mut s = settings.clone();
            s.n_ctx = Some(want);
            let long = memo.plan(e, short.index, arch, &s, hw, build)?;
            let (sc, lc) = (config_of(e, short), config_of(e, &long));
            let cheap = lc.runs
                && lc.standing(floor) <= sc.standing(floor)
                && lc.tokens_per_s >= (1.0 - CTX_SPEED_COST) * sc.tokens_per_s;
            let use_name = q.purpose.name();
            if cheap {
                ctx_note = Some(format!("{} context for {use_name}", ctx_words(want)));
                plans[b] = long;
            } else if lc.runs {
                ctx_note = Some(format!(
                    "{} context for {use_name} would run at {:.0} tok/s; {} kept",
                    ctx_words(want),
                    lc.tokens_per_s,
                    ctx_words(short.plan.n_ctx)
                ));
            } else {
                ctx_note = Some(format!(
                    "{} context for {use_name} does not fit; {} kept",
                    ctx_words(want),
                    ctx_words(short.plan.n_ctx)
                ));
            }
        }
    }
    Ok(Planned {
        plans,
        best,
        ctx_note,
    })
}

/// A context as people say it: `32k`, `4k`, `1500`.
fn ctx_words(n: u32) -> String {
    if n >= 1024 && n % 1024 == 0 {
        format!("{}k", n / 1024)
    } else {
        n.to_string()
    }
}

/// Where a plan runs, in words.
fn placement(p: &Plan) -> String {
    let gpus = p.devices.len().saturating_sub(1);
    if gpus == 0 {
        return "in RAM (no GPU)".to_string();
    }
    let total: u32 = p.devices.iter().map(|d| d.n_layers).sum();
    if p.n_cpu_moe > 0 {
        return format!("experts of {} of {total} layers in RAM", p.n_cpu_moe);
    }
    let on_gpu: u32 = p.devices.iter().skip(1).map(|d| d.n_layers).sum();
    if on_gpu >= total {
        match gpus {
            1 => "fully on the GPU".to_string(),
            n => format!("fully on {n} GPUs"),
        }
    } else {
        format!("{on_gpu} of {total} layers on the GPU")
    }
}

/// The first part of a row's `why`: its quantization, placement, speed and
/// quality. The comparison with faster rows is added once the rows are
/// sorted ([`compare_faster`]).
fn why(e: &Entry, planned: &Planned, best: usize, q: &Query) -> String {
    let qp = &planned.plans[best];
    let p = &qp.plan;
    let quant = &e.quants[qp.index];
    let name = &quant.name;
    if !runs(p) {
        let reason = p
            .warnings
            .iter()
            .find(|w| {
                w.code == headroom_planner::plan::WarningCode::DoesNotFit
                    || w.code == headroom_planner::plan::WarningCode::PagesFromDisk
            })
            .map_or("over budget", |w| w.message.as_str());
        return format!("does not fit: {reason} ({name}, the smallest)");
    }
    let tps = p.est_decode_tokens_per_s;
    let mut s = format!("{name} {}, est. {tps:.0} tok/s", placement(p));
    let floor = q.floor();
    if tps < floor {
        let _ = std::fmt::Write::write_fmt(
            &mut s,
            format_args!(
                ", under the {floor:.0} tok/s floor for {}",
                q.purpose.name()
            ),
        );
    }
    if let Some(quality) = e.quality {
        let loss = quant_loss_elo(quant.file_type);
        let _ = std::fmt::Write::write_fmt(
            &mut s,
            format_args!(
                "; quality {:.0} ({quality:.0} less {loss:.0} for {name})",
                quality - loss
            ),
        );
    }
    if let Some(note) = &planned.ctx_note {
        s.push_str("; ");
        s.push_str(note);
    }
    s
}

/// Where the chosen file's size comes from.
fn size_basis(quant: &super::Quant) -> &'static str {
    if quant.verified {
        "verified"
    } else if quant.size_bytes.is_none() {
        "derived"
    } else if quant.size_precision == 0 {
        "exact"
    } else {
        "listed"
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
    // With nothing that runs, the row shows the smallest file's plan.
    let best = planned.best.unwrap_or(0);
    let Some(qp) = planned.plans.get(best) else {
        return Ok(None);
    };
    let quant = &e.quants[qp.index];
    let verdict = fit_verdict(&qp.plan);
    let fits = verdict.fits();
    let floor = q.floor();
    let tps = qp.plan.est_decode_tokens_per_s;
    let arch_estimated = arch.basis != ArchBasis::Own;
    let loss = e.quality.map(|_| quant_loss_elo(quant.file_type));
    Ok(Some(Row {
        id: e.id.clone(),
        name: e.name.clone(),
        n_params: qp.n_params,
        n_params_active: qp.n_params_active,
        quant: fits.then(|| quant.name.clone()),
        verdict,
        standing: rank::standing(fits, tps, floor),
        purpose: q.purpose,
        min_speed: floor,
        n_gpu_layers: fits.then_some(qp.plan.n_gpu_layers),
        n_ctx: fits.then_some(qp.plan.n_ctx),
        n_ctx_max: arch.facts.context_length,
        est_decode_tokens_per_s: fits.then_some(tps),
        download_bytes: fits.then_some(qp.download_bytes),
        size_basis: fits.then(|| size_basis(quant)),
        quality: e.quality,
        quality_basis: e.quality_basis.clone(),
        quant_loss: fits.then_some(loss).flatten(),
        expected_quality: fits
            .then(|| expected_quality(e.quality, quant.file_type))
            .flatten(),
        release: e.release.clone(),
        superseded_by: Vec::new(),
        also_as: Vec::new(),
        variant_of: None,
        same_model: e.quality.map(|q| (arch.facts.clone(), q.to_bits())),
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
            fits.then_some(tps),
        ),
        arch_basis: match &arch.basis {
            ArchBasis::Own => "own".into(),
            ArchBasis::Like(id) => format!("like {id}"),
            ArchBasis::Estimated => "estimated".into(),
        },
        why: why(e, &planned, best, q),
        speed_basis: qp.plan.speed_basis.clone(),
        plan: fits.then(|| qp.plan.clone()),
    }))
}

/// Adds to each usable row's `why` the best-ranked usable row below it that
/// runs at least 20% faster: what the user gives up by taking the faster one.
fn compare_faster(rows: &mut [Row]) {
    let notes: Vec<Option<String>> = (0..rows.len())
        .map(|i| {
            let r = &rows[i];
            if r.standing != Standing::Usable {
                return None;
            }
            let tps = r.est_decode_tokens_per_s?;
            let quality = r.expected_quality?;
            let faster = rows[i + 1..].iter().find(|o| {
                o.standing == Standing::Usable
                    && o.est_decode_tokens_per_s.is_some_and(|t| t >= 1.2 * tps)
                    && o.expected_quality.is_some_and(|q| q < quality)
            })?;
            let where_ = faster.plan.as_ref().map(placement).unwrap_or_default();
            Some(format!(
                "; {} {where_} would be faster ({:.0} tok/s) but scores lower",
                faster.name,
                faster.est_decode_tokens_per_s.unwrap_or(0.0)
            ))
        })
        .collect();
    for (r, n) in rows.iter_mut().zip(notes) {
        if let Some(n) = n {
            r.why.push_str(&n);
        }
    }
}

/// One row per model: an entry of the same architecture and quality figure
/// as a higher-ranked one (a QAT checkpoint of it, another publisher's
/// files) is folded into that row, named in its `also_as`; with `all` it
/// stays, marked `variant_of`. Only lower-ranked rows go, so no pick gets
/// worse.
fn fold_variants(rows: Vec<Row>, all: bool) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::with_capacity(rows.len());
    for mut r in rows {
        let first = r.same_model.as_ref().and_then(|k| {
            out.iter()
                .position(|o| o.variant_of.is_none() && o.same_model.as_ref() == Some(k))
        });
        match first {
            Some(i) => {
                out[i].also_as.push(r.id.clone());
                if all {
                    r.variant_of = Some(out[i].id.clone());
                    out.push(r);
                }
            }
            None => out.push(r),
        }
    }
    out
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
    // Supersession: who is usable, and whom each row's model replaces.
    let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    let supersedes: Vec<Vec<&str>> = rows
        .iter()
        .map(|r| {
            cat.get(&r.id)
                .map(|e| e.supersedes.iter().map(String::as_str).collect())
                .unwrap_or_default()
        })
        .collect();
    let usable: Vec<bool> = rows
        .iter()
        .map(|r| r.standing == Standing::Usable)
        .collect();
    let by = rank::superseded_by(&ids, &supersedes, &usable);
    let by: Vec<Vec<String>> = by
        .iter()
        .map(|js| js.iter().map(|&j| rows[j].id.clone()).collect())
        .collect();
    let mut rows: Vec<Row> = rows
        .into_iter()
        .zip(by)
        .filter(|(_, b)| q.all || b.is_empty())
        .map(|(mut r, b)| {
            r.superseded_by = b;
            r
        })
        .collect();
    rows.sort_by(|a, b| rank::cmp_rows(&a.key(), &b.key()));
    let mut rows = fold_variants(rows, q.all);
    for r in rows.iter_mut().filter(|r| !r.also_as.is_empty()) {
        r.why
            .push_str(&format!("; also listed as {}", r.also_as.join(", ")));
    }
    compare_faster(&mut rows);
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
    /// `fit`'s pick ([`rank::pick`]): the highest expected quality at or
    /// above the speed floor, else the fastest that runs (files that would
    /// page from disk do not run).
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
    let settings = q.plan_settings(arch.facts.context_length);
    let mut plans = candidates(e, &arch, q)
        .into_iter()
        .map(|c| plan_quant(e, c.index, &arch, &settings, hw, build))
        .collect::<Result<Vec<_>>>()?;
    let configs: Vec<Config> = plans.iter().map(|p| config_of(e, p)).collect();
    let best = rank::pick(&configs, q.floor()).map(|i| plans[i].index);
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
