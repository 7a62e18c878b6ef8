//! `headroom chat`: plan (exactly as `run` does: refusal, nearest fit,
//! llama.cpp's own accounting), then hand over to the terminal chat in
//! [`crate::chat`]. A refused plan is shown in the chat screen with the
//! nearest plan that fits, which the person may start from there.
//!
//! Exit codes: 0 after quitting, 1 when the model could not be loaded, 2 bad
//! usage (also: not a terminal), 3 when the person quit at a refusal, 143
//! after SIGTERM or SIGHUP (the terminal is restored first).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use headroom_planner::hw::{HardwareSnapshot, format_size};
use headroom_planner::plan::Plan;
use headroom_planner::solve::{self, Build};

use super::run::template_choice;
use super::{EXIT_DOES_NOT_FIT, UsageError, build_for, hardware, llama_cpp_version, load_profile};
use crate::chat::worker::WorkerConfig;
use crate::chat::{App, Mode, Options, Outcome, PlanInfo, Start, Theme};
use crate::cli::{ChatArgs, ContextArgs, GenArgs, MachineArgs};
use crate::llama::AccountingParams;
use crate::runner::guard::{self, Nearest};
use crate::runner::load;

/// Exit code after SIGTERM or SIGHUP (128 + SIGTERM).
pub const EXIT_SIGNALLED: u8 = 143;

/// Tokens kept free for a reply when old turns are dropped (unless
/// `--n-predict` says how long replies are).
pub const DEFAULT_RESERVE: usize = 512;

/// Run `headroom chat`.
///
/// # Errors
/// Bad options, no terminal, an unreadable model, or a terminal that cannot
/// be set up.
pub fn run(args: &ChatArgs, machine: &MachineArgs, _verbose: u8) -> Result<ExitCode> {
    let usage = |e: anyhow::Error| UsageError(format!("{e:#}"));
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(UsageError(
            "chat needs a terminal on standard input and output; for one answer in a script use `headroom run`".into(),
        )
        .into());
    }
    let opts = args.sampling.options().map_err(usage)?;
    let choice = template_choice(&args.sampling, false)?;
    let threads = |hw: &HardwareSnapshot| {
        i32::try_from(
            args.sampling
                .threads
                .unwrap_or(hw.cpu.physical_cores.max(1)),
        )
        .unwrap_or(i32::MAX)
    };
    let theme = Theme::from_env();
    let size = crossterm::terminal::size().unwrap_or((80, 24));
    let reserve = opts.n_predict.map_or(DEFAULT_RESERVE, |n| n as usize);

    let (mut app, start) = match decide(args.model.as_deref(), &args.ctx, &args.sampling, machine)?
    {
        Decision::Ready(d) => {
            let info = PlanInfo::from_plan(&d.plan, d.warnings);
            let cfg = WorkerConfig {
                spec: d.spec,
                template: choice,
                opts,
                plan: d.plan,
            };
            (
                App::new(info, Mode::Loading(0.0), size, theme),
                Start::Load(Box::new(cfg)),
            )
        }
        Decision::Refused(r) => {
            let info = PlanInfo::from_plan(&r.plan, Vec::new());
            let nearest_text = r.nearest.as_ref().map(describe_nearest);
            let threads = threads(&r.hw);
            let nearest = r.nearest;
            let start = Start::Refused(Box::new(move || {
                let n = nearest.context("no plan nearby fits")?;
                let (spec, warnings) = checked_spec(&n.plan, &n.settings, threads)?;
                let info = PlanInfo::from_plan(&n.plan, warnings);
                Ok((
                    WorkerConfig {
                        spec,
                        template: choice,
                        opts,
                        plan: n.plan,
                    },
                    info,
                ))
            }));
            let mode = Mode::Refused {
                reason: r.reason,
                nearest: nearest_text,
            };
            (App::new(info, mode, size, theme), start)
        }
    };
    app.system.clone_from(&args.sampling.system);
    app.reserve = reserve;

    let log = crate::demo::cache_dir().ok().map(|d| d.join("chat.log"));
    let options = Options {
        log: std::env::var_os("HEADROOM_CHAT_LOG")
            .map(PathBuf::from)
            .or(log),
        latency_log: std::env::var_os("HEADROOM_CHAT_LATENCY_LOG").map(PathBuf::from),
    };
    let outcome = crate::chat::run(app, start, &options)?;
    let log_note = options
        .log
        .as_ref()
        .map(|p| format!("; log: {}", p.display()))
        .unwrap_or_default();
    match outcome {
        Outcome::Quit => {
            eprintln!(
                "headroom: chat ended; peak RSS {}{log_note}",
                format_size(crate::measure::peak_rss_bytes())
            );
            Ok(ExitCode::SUCCESS)
        }
        Outcome::Refused => {
            eprintln!("headroom: refused: the plan does not fit; --force loads anyway");
            Ok(ExitCode::from(EXIT_DOES_NOT_FIT))
        }
        Outcome::LoadFailed(why) => Err(anyhow::anyhow!("{why}{log_note}")),
        Outcome::Signalled => {
            eprintln!("headroom: chat ended by a signal");
            Ok(ExitCode::from(EXIT_SIGNALLED))
        }
    }
}

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
            "{}: a directory of {} GGUF files; chat takes one file",
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
        warnings.push("this build has no GPU backend: --vram is ignored by chat".to_string());
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
fn checked_spec(
    plan: &Plan,
    settings: &headroom_planner::plan::Settings,
    threads: i32,
) -> Result<(AccountingParams, Vec<String>)> {
    let spec = load::spec_for(plan, settings, threads)?;
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
fn describe_nearest(n: &Nearest) -> String {
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
