//! `headroom plan`: plan one model file, or choose among several
//! quantizations, and print the plan as a table, JSON or a curve. A model on
//! the hub (`org/repo:QUANT`) is planned from its GGUF header alone.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use headroom_planner::plan::Plan;
use headroom_planner::solve::{self, Build};

use super::{EXIT_DOES_NOT_FIT, hardware};
use crate::cli::{MachineArgs, PlanArgs};
use crate::llama::llama_cpp_version;
use crate::render;
use crate::source::plan_inputs;

/// Run `headroom plan`.
///
/// # Errors
/// Unreadable models, bad options or hardware profile.
pub fn run(args: &PlanArgs, machine: &MachineArgs) -> Result<ExitCode> {
    let mut settings = args
        .ctx
        .settings()
        .map_err(|e| super::UsageError(format!("{e:#}")))?;
    settings.logits_per_sequence = args.logits.per_sequence();
    if args.ctx.parallel == Some(crate::cli::Parallel::Auto) {
        // Only `serve` takes `auto`: plan as it plans, HTTP runtime included,
        // so the two never disagree.
        settings.front_end = headroom_planner::plan::FrontEnd::Server;
    }
    let hw = hardware(machine)?;
    let build: Build = machine.build();
    let target = crate::source::hub::choose::Target {
        hw: &hw,
        settings: &settings,
        build,
    };
    let inputs = plan_inputs(&args.models, target)?;
    let mut plans = Vec::with_capacity(inputs.len());
    let mut bpw = Vec::with_capacity(inputs.len());
    for (label, profile) in &inputs {
        let mut plan = match args.ctx.parallel {
            Some(crate::cli::Parallel::Auto) => {
                headroom_planner::slots::plan_auto(profile, label, &settings, &hw, build)
            }
            _ => solve::plan(profile, label, &settings, &hw, build),
        };
        plan.llama_cpp = llama_cpp_version();
        if !std::path::Path::new(label).exists() {
            // Planned from the hub: llama.cpp can fetch it the same way.
            crate::source::hub::pull::use_hf_flag(&mut plan);
        }
        bpw.push(solve::bits_per_weight(profile));
        plans.push(plan);
    }
    let best = solve::choose(plans, &bpw).ok_or_else(|| anyhow::anyhow!("no model to plan"))?;
    let idx = inputs
        .iter()
        .position(|(label, _)| *label == best.model.path)
        .unwrap_or(0);
    let profiles: Vec<_> = inputs.into_iter().map(|(_, p)| p).collect();
    let last_run = crate::files::data_dir()
        .ok()
        .and_then(|dir| crate::runner::calibration::last_for(&dir, &best));
    let mut out = std::io::stdout().lock();
    if args.json {
        // Serialise first: a closed pipe then surfaces as a plain io::Error.
        let with_run = WithLastRun {
            plan: &best,
            last_run: last_run.as_ref(),
        };
        writeln!(out, "{}", serde_json::to_string_pretty(&with_run)?)?;
    } else {
        write!(out, "{}", render::plan_text(&best, &hw))?;
        if let Some(run) = &last_run {
            writeln!(out, "{}", render::last_run_line(&best, run))?;
        }
        if args.curve {
            let curve = render::curve::Curve::compute(&profiles[idx], &settings, &hw, build, &best);
            write!(out, "\n{}", curve.draw(72, 16))?;
        }
    }
    Ok(exit_for(&best))
}

/// `plan --json`: the plan, and the last measured run with the same model
/// and settings from the calibration log (null when there is none).
#[derive(serde::Serialize)]
struct WithLastRun<'a> {
    #[serde(flatten)]
    plan: &'a Plan,
    last_run: Option<&'a crate::runner::calibration::Entry>,
}

fn exit_for(plan: &Plan) -> ExitCode {
    if plan.verdict.fits() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_DOES_NOT_FIT)
    }
}
