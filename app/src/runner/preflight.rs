//! Planning before a load, shared by `run` and `chat`: the plan, its refusal
//! with the nearest plan that fits, and the check against llama.cpp's own
//! `no_alloc` accounting of exactly the load that follows. Returns data;
//! `run` prints it, `chat` shows it on screen. Takes validated values, not
//! what was typed: `commands` resolves the model and the machine first.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use headroom_planner::hw::{HardwareSnapshot, format_size};
use headroom_planner::plan::{Plan, Settings};
use headroom_planner::profile::ModelProfile;
use headroom_planner::solve::{self, Build};

use super::guard::{self, Nearest};
use super::load;
use crate::error::UsageError;
use crate::llama::AccountingParams;

/// A plan that may be loaded.
pub struct Go {
    /// The plan.
    pub plan: Plan,
    /// The exact load.
    pub spec: AccountingParams,
    /// Disagreements with llama.cpp's accounting, and other notes for the banner.
    pub warnings: Vec<String>,
    /// llama.cpp's accounting of this very load, per device, beside the plan's.
    pub accounted: Vec<guard::DeviceCheck>,
}

/// A plan that does not fit.
pub struct Refusal {
    /// The plan.
    pub plan: Plan,
    /// Why it does not fit.
    pub reason: String,
    /// The nearest plan that does.
    pub nearest: Option<Nearest>,
    /// The machine it was planned for.
    pub hw: HardwareSnapshot,
}

/// What planning decided.
pub enum Decision {
    /// Load it.
    Ready(Box<Go>),
    /// Refused.
    Refused(Box<Refusal>),
}

/// What a preflight needs, validated: the model, the settings asked for, the
/// machine, and how to run it.
pub struct Request<'a> {
    /// The model file (the first part of a split model).
    pub path: &'a Path,
    /// Its profile, from the header.
    pub profile: &'a ModelProfile,
    /// The settings asked for.
    pub settings: &'a Settings,
    /// The machine.
    pub hw: HardwareSnapshot,
    /// `--force`: load a plan that does not fit.
    pub force: bool,
    /// `--threads`; the physical cores when absent.
    pub threads: Option<u32>,
    /// Other quantizations of the same model beside it, read only when the plan
    /// is refused (the nearest fit may be one of them).
    pub siblings: &'a dyn Fn(&Path) -> Vec<(PathBuf, ModelProfile)>,
}

/// Plan, refuse what does not fit (with the nearest plan that does), and check
/// the plan against llama.cpp's own accounting of exactly this binary's load:
/// data, not text, so `run` can print it and the chat can show it.
///
/// # Errors
/// Settings llama.cpp cannot take, or llama.cpp's accounting failing.
pub fn decide(req: Request<'_>) -> Result<Decision> {
    let Request {
        path,
        profile,
        settings,
        hw,
        force,
        threads,
        siblings,
    } = req;
    // RPC workers are devices this build loads onto, GPU backend or not.
    let build = Build {
        gpu: crate::llama::gpu_build()
            || hw
                .gpus
                .iter()
                .any(|g| g.vendor == headroom_planner::hw::GpuVendor::Rpc),
    };
    let mut plan = solve::plan(profile, &path.display().to_string(), settings, &hw, build);
    plan.llama_cpp = crate::llama::llama_cpp_version();
    if !plan.verdict.fits() && !force {
        let mut reason = guard::reason(&plan);
        let nearest = guard::nearest_fit(profile, path, settings, &plan, &hw, build, siblings);
        if nearest.is_none() {
            reason = format!(
                "{reason}; nothing smaller fits either: at -c 256 with a q8_0 KV cache, {}",
                guard::floor_reason(profile, path, settings, &hw, build)
            );
        }
        return Ok(Decision::Refused(Box::new(Refusal {
            plan,
            reason,
            nearest,
            hw,
        })));
    }
    let threads =
        i32::try_from(threads.unwrap_or(hw.cpu.physical_cores.max(1))).unwrap_or(i32::MAX);
    match checked_spec(&plan, settings, threads) {
        Ok((spec, warnings, accounted)) => Ok(Decision::Ready(Box::new(Go {
            plan,
            spec,
            warnings,
            accounted,
        }))),
        Err(e) if e.is::<OverBudget>() && !force => Ok(Decision::Refused(Box::new(Refusal {
            plan,
            reason: format!("{e}"),
            nearest: None,
            hw,
        }))),
        Err(e) => Err(e),
    }
}

/// llama.cpp's accounting puts a device over its budget.
#[derive(Debug, thiserror::Error)]
#[error("by llama.cpp's own accounting {device} needs {need} but has {have}")]
struct OverBudget {
    device: String,
    need: String,
    have: String,
}

/// The load for a plan, checked against llama.cpp's own accounting of it:
/// the disagreements worth showing and the comparison per device, or
/// [`OverBudget`].
pub fn checked_spec(
    plan: &Plan,
    settings: &Settings,
    threads: i32,
) -> Result<(AccountingParams, Vec<String>, Vec<guard::DeviceCheck>)> {
    let spec = load::spec_for(plan, settings, threads).map_err(|e| UsageError(format!("{e:#}")))?;
    let acct = crate::llama::breakdown(&spec)
        .with_context(|| format!("llama.cpp's accounting of {}", plan.model.path))?;
    let checks = guard::cross_check(plan, &acct);
    if let Some(over) = guard::over_budget(&checks)
        && plan.verdict.fits()
    {
        return Err(OverBudget {
            device: over.device.clone(),
            need: format_size(over.total_bytes),
            have: format_size(over.budget_bytes),
        }
        .into());
    }
    let warnings = guard::disagreements(&checks, 0.05);
    Ok((spec, warnings, checks))
}

/// The nearest plan, in one line.
pub fn describe_nearest(n: &Nearest) -> String {
    let gpu = if n.plan.n_gpu_layers > 0 {
        format!("{} layers on GPU, ", n.plan.n_gpu_layers)
    } else {
        String::new()
    };
    format!(
        "{} ({}, {gpu}context {}, peak RAM {})",
        n.change,
        n.plan.verdict.as_str(),
        n.plan.n_ctx,
        format_size(n.plan.ram.peak_bytes)
    )
}
