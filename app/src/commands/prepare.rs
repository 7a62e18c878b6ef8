//! Planning before a load, shared by `run` and `chat`: the plan, its refusal
//! with the nearest plan that fits, and the check against llama.cpp's own
//! `no_alloc` accounting of exactly the load that follows. Returns data;
//! `run` prints it, `chat` shows it on screen.

use anyhow::{Context, Result};
use headroom_planner::hw::{HardwareSnapshot, format_size};
use headroom_planner::plan::Plan;
use headroom_planner::solve::{self, Build};

use super::{UsageError, build_for, hardware, llama_cpp_version, load_profile};
use crate::cli::{ContextArgs, GenArgs, MachineArgs};
use crate::llama::AccountingParams;
use crate::runner::guard::{self, Nearest};
use crate::runner::load;

/// A plan that may be loaded.
pub struct Go {
    /// The plan.
    pub plan: Plan,
    /// The exact load.
    pub spec: AccountingParams,
    /// Disagreements with llama.cpp's accounting, and other notes for the banner.
    pub warnings: Vec<String>,
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

/// Plan, refuse what does not fit (with the nearest plan that does), and check
/// the plan against llama.cpp's own accounting — the steps of `run`'s
/// `prepare`, returning data instead of printing, so the chat can show them.
///
/// # Errors
/// Bad options, an unreadable model, or llama.cpp's accounting failing.
pub fn decide(
    model: Option<&str>,
    ctx: &ContextArgs,
    gen_args: &GenArgs,
    machine: &MachineArgs,
) -> Result<Decision> {
    let usage = |e: anyhow::Error| UsageError(format!("{e:#}"));
    let settings = ctx.settings().map_err(usage)?;
    let hw = hardware(machine)?;
    let models: Vec<String> = model.map(str::to_string).into_iter().collect();
    let paths = super::resolve_models(&models)?;
    let [path] = paths.as_slice() else {
        return Err(UsageError(format!(
            "{}: a directory of {} GGUF files; give one file",
            model.unwrap_or("demo"),
            paths.len()
        ))
        .into());
    };
    let profile = load_profile(path)?;
    let build = Build {
        gpu: super::gpu_build(),
    };
    let mut warnings = Vec::new();
    if build_for(machine).gpu && !build.gpu && machine.vram.as_deref().is_some_and(|v| v != "0") {
        warnings.push("this build has no GPU backend: --vram is ignored when running".to_string());
    }
    let mut plan = solve::plan(&profile, &path.display().to_string(), &settings, &hw, build);
    plan.llama_cpp = llama_cpp_version();
    if !plan.verdict.fits() && !gen_args.force {
        let mut reason = guard::reason(&plan);
        let nearest = guard::nearest_fit(&profile, path, &settings, &plan, &hw, build);
        if nearest.is_none() {
            reason = format!(
                "{reason}; nothing smaller fits either: at -c 256 with a q8_0 KV cache, {}",
                guard::floor_reason(&profile, path, &settings, &hw, build)
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
        i32::try_from(gen_args.threads.unwrap_or(hw.cpu.physical_cores.max(1))).unwrap_or(i32::MAX);
    match checked_spec(&plan, &settings, threads) {
        Ok((spec, more)) => {
            warnings.extend(more);
            Ok(Decision::Ready(Box::new(Go {
                plan,
                spec,
                warnings,
            })))
        }
        Err(e) if e.is::<OverBudget>() && !gen_args.force => {
            Ok(Decision::Refused(Box::new(Refusal {
                plan,
                reason: format!("{e}"),
                nearest: None,
                hw,
            })))
        }
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
/// the disagreements worth showing, or [`OverBudget`].
pub fn checked_spec(
    plan: &Plan,
    settings: &headroom_planner::plan::Settings,
    threads: i32,
) -> Result<(AccountingParams, Vec<String>)> {
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
    Ok((spec, guard::disagreements(&checks, 0.05)))
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
