//! `headroom chat`: plan (exactly as `run` does: refusal, nearest fit,
//! llama.cpp's own accounting), then hand over to the terminal chat in
//! [`crate::tui`]. A refused plan is shown in the chat screen with the
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

use super::run::template_choice;
use super::{EXIT_DOES_NOT_FIT, UsageError, preflight};
use crate::cli::{ChatArgs, MachineArgs};
use crate::runner::preflight::{Decision, checked_spec, describe_nearest};
use crate::tui::worker::WorkerConfig;
use crate::tui::{App, Mode, Options, Outcome, PlanInfo, Start, Theme};

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
    if let Some(n) = args.sampling.oom_score_adj {
        crate::runner::measure::set_oom_score_adj(n)?;
    }
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

    let (mut app, start) =
        match preflight(args.model.as_deref(), &args.ctx, &args.sampling, machine)? {
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
                    let (spec, warnings, _) = checked_spec(&n.plan, &n.settings, threads)?;
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

    let log = crate::files::cache_dir().ok().map(|d| d.join("chat.log"));
    let options = Options {
        log: std::env::var_os("HEADROOM_CHAT_LOG")
            .map(PathBuf::from)
            .or(log),
        latency_log: std::env::var_os("HEADROOM_CHAT_LATENCY_LOG").map(PathBuf::from),
    };
    let outcome = crate::tui::run(app, start, &options)?;
    let log_note = options
        .log
        .as_ref()
        .map(|p| format!("; log: {}", p.display()))
        .unwrap_or_default();
    match outcome {
        Outcome::Quit => {
            eprintln!(
                "headroom: chat ended; peak RSS {}{log_note}",
                format_size(crate::runner::measure::peak_rss_bytes())
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
