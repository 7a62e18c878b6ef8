//! Planning a catalog entry without its file: its architecture facts become a
//! synthetic header (`headroom_planner::synth::facts`) with the real file's
//! tensors and quantization types, planned by the same solver as a file on
//! disk, so `fit` and `plan` cannot disagree.
//!
//! Where an entry's own facts are incomplete, the architecture comes from
//! the entry named by `arch_like`, else it is estimated from the parameter
//! count; either way the result says so ([`ArchBasis`]).

use anyhow::{Context, Result, anyhow};
use headroom_planner::hw::HardwareSnapshot;
use headroom_planner::plan::{Plan, Settings};
use headroom_planner::profile::ModelProfile;
use headroom_planner::solve::{self, Build};
use headroom_planner::synth::facts::{self, ArchFacts, Skeleton};

use super::{Catalog, Entry, Quant};

/// Where an entry's architecture facts come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchBasis {
    /// Its own facts (config.json or header).
    Own,
    /// Borrowed from another entry with the same architecture.
    Like(String),
    /// Filled from the parameter count with the planner's generic shape.
    Estimated,
}

/// An entry's complete architecture, and how it was obtained.
#[derive(Debug, Clone)]
pub struct ResolvedArch {
    /// The facts the plan uses.
    pub facts: ArchFacts,
    /// Their origin.
    pub basis: ArchBasis,
    /// Its tensors, laid out once for all of the entry's quantizations.
    pub skeleton: Skeleton,
}

impl ResolvedArch {
    /// Whether the architecture is not the model's own (the plan is an estimate).
    #[must_use]
    pub fn estimated(&self) -> bool {
        self.basis != ArchBasis::Own
    }
}

/// The parameter count to estimate a shape from: the stated one, else what
/// the largest-typed listed file holds at its mix's base bits per weight.
#[must_use]
pub fn params_for_estimate(e: &Entry) -> Option<u64> {
    if let Some(b) = e.params_b {
        return Some((b * 1e9) as u64);
    }
    e.quants
        .iter()
        .filter_map(|q| {
            let bits = q.file_type.default_type().bits_per_weight();
            q.size_bytes.map(|s| (bits, s))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(bits, size)| (size as f64 * 8.0 / bits) as u64)
}

/// The architecture to plan `e` with.
///
/// # Errors
/// An entry whose facts cannot be completed (the catalog validation and
/// tests rule this out for the built-in catalog).
pub fn resolve_arch(cat: &Catalog, e: &Entry) -> Result<ResolvedArch> {
    let resolved = |facts: ArchFacts, basis| ResolvedArch {
        skeleton: Skeleton::new(&facts),
        facts,
        basis,
    };
    if let Ok(facts) = e.arch.complete() {
        return Ok(resolved(facts, ArchBasis::Own));
    }
    if let Some(like) = &e.arch_like {
        let target = cat
            .get(like)
            .ok_or_else(|| anyhow!("{}: arch_like '{like}' is not in the catalog", e.id))?;
        let facts = e
            .arch
            .or(&target.arch)
            .complete()
            .with_context(|| format!("{}: architecture of '{like}'", e.id))?;
        return Ok(resolved(facts, ArchBasis::Like(like.clone())));
    }
    let n = params_for_estimate(e)
        .ok_or_else(|| anyhow!("{}: no parameter count or size to estimate from", e.id))?;
    let facts = facts::estimate(&e.arch, n).with_context(|| format!("{}: estimating", e.id))?;
    Ok(resolved(facts, ArchBasis::Estimated))
}

/// One quantization of an entry, planned.
#[derive(Debug, Clone)]
pub struct QuantPlan {
    /// Index into the entry's `quants`.
    pub index: usize,
    /// The plan, exactly as `headroom plan` makes it for a file.
    pub plan: Plan,
    /// Effective bits per weight of the planned file (the solver's quality measure).
    pub bpw: f64,
    /// Bytes to download: as listed, else the derived file size.
    pub download_bytes: u64,
    /// The download size was derived, not listed.
    pub size_estimated: bool,
    /// Parameters, total and active per token.
    pub n_params: u64,
    /// Parameters read per token (all of them for a dense model).
    pub n_params_active: u64,
    /// Repeating layers.
    pub n_layer: u32,
}

/// The profile the planner sees for `q` of an entry with architecture `arch`.
///
/// # Errors
/// Facts that do not make a valid model.
pub fn profile(arch: &ResolvedArch, q: &Quant) -> Result<ModelProfile> {
    arch.skeleton.profile(q.file_type).with_context(|| {
        format!(
            "{} {}: building its header",
            arch.facts.architecture, q.name
        )
    })
}

/// Plan quantization `index` of `e`.
///
/// # Errors
/// Facts that do not make a valid model.
pub fn plan_quant(
    e: &Entry,
    index: usize,
    arch: &ResolvedArch,
    settings: &Settings,
    hw: &HardwareSnapshot,
    build: Build,
) -> Result<QuantPlan> {
    let q = e
        .quants
        .get(index)
        .ok_or_else(|| anyhow!("{}: no quantization #{index}", e.id))?;
    let p = profile(arch, q).with_context(|| e.id.clone())?;
    Ok(plan_profile(e, index, &p, settings, hw, build))
}

/// Plan quantization `index` of `e` from its profile (see [`profile`]).
#[must_use]
pub fn plan_profile(
    e: &Entry,
    index: usize,
    p: &ModelProfile,
    settings: &Settings,
    hw: &HardwareSnapshot,
    build: Build,
) -> QuantPlan {
    let q = &e.quants[index];
    let reference = format!("{}:{}", q.repo, q.name);
    let mut plan = solve::plan(p, &reference, settings, hw, build);
    plan.llama_cpp = crate::llama::llama_cpp_version();
    // The file is not on disk: llama.cpp fetches the same quantization with -hf.
    if plan.llama_args.first().map(String::as_str) == Some("-m") {
        plan.llama_args[0] = "-hf".into();
    }
    let expert: u64 = p
        .layers
        .iter()
        .flat_map(|l| &l.tensors)
        .filter(|t| t.is_expert())
        .map(|t| t.n_elements())
        .sum();
    let idle = p.experts.map_or(0, |x| {
        expert / u64::from(x.count.max(1)) * u64::from(x.count - x.used.min(x.count))
    });
    QuantPlan {
        index,
        bpw: solve::bits_per_weight(p),
        download_bytes: q.size_bytes.unwrap_or_else(|| p.file_bytes()),
        size_estimated: q.size_bytes.is_none(),
        n_params: p.n_params,
        n_params_active: p.n_params - idle,
        n_layer: p.n_layer,
        plan,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_entry_resolves_and_plans() -> Result<()> {
        let cat = Catalog::builtin()?;
        let hw = super::super::fit::machine(16 << 30, &[8 << 30])?;
        for e in cat.entries() {
            let arch = resolve_arch(&cat, e)?;
            assert_eq!(
                arch.basis == ArchBasis::Own,
                e.arch.is_complete(),
                "{}",
                e.id
            );
            for i in 0..e.quants.len() {
                let qp = plan_quant(e, i, &arch, &Settings::default(), &hw, Build { gpu: true })?;
                assert_eq!(qp.plan.llama_args[0], "-hf");
                assert!(qp.n_params_active <= qp.n_params && qp.n_params_active > 0);
            }
        }
        Ok(())
    }
}
