//! `headroom pull MODEL[:QUANT]`: plan from the header, say what will be
//! downloaded and why, check the disk, download resumably into the Hugging
//! Face cache, and print the file's path (for `llama-cli -m "$(headroom pull …)"`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use headroom_planner::plan::Plan;

use super::{EXIT_DOES_NOT_FIT, UsageError, hardware};
use crate::cli::{MachineArgs, PullArgs};
use crate::llama::llama_cpp_version;
use crate::render;
use crate::source::hub::HubEnv;
use crate::source::hub::choose::Target;
use crate::source::hub::progress::size;
use crate::source::hub::pull::{self, Origin};
use crate::source::modelref::{self, HubRef, ModelArg, Select};

/// Run `headroom pull`.
///
/// # Errors
/// A bad reference, a hub that refuses, a failed or interrupted download.
pub fn run(args: &PullArgs, machine: &MachineArgs) -> Result<ExitCode> {
    let usage = |e: &dyn std::fmt::Display| UsageError(format!("{e:#}"));
    let settings = args.ctx.settings().map_err(|e| usage(&e))?;
    let model = match modelref::classify(&args.model).map_err(|e| usage(&e))? {
        ModelArg::Hub(h) => h,
        ModelArg::Catalog { id, quant } => {
            // A bad id is the user's (2); a bad catalog file is not (1).
            modelref::catalog_ref(&id, quant.as_deref()).map_err(|e| {
                if e.is::<modelref::RefError>() {
                    usage(&e).into()
                } else {
                    e
                }
            })?
        }
        ModelArg::Demo => {
            // The instruct demo model is published on PyPI, not on the hub.
            println!("{}", crate::source::demo::instruct_model()?.display());
            return Ok(ExitCode::SUCCESS);
        }
        ModelArg::DemoBase => HubRef {
            repo: crate::source::demo::HF_REPO.to_string(),
            select: Some(Select::File(crate::source::demo::FILE_NAME.to_string())),
        },
        ModelArg::Path(p) => {
            return Err(usage(&format!(
                "{} is a local file; pull takes org/repo[:QUANT], hf.co/org/repo[:QUANT] or a catalog id",
                p.display()
            ))
            .into());
        }
    };
    let hw = hardware(machine)?;
    let target = Target {
        hw: &hw,
        settings: &settings,
        build: machine.build(),
    };
    let env = HubEnv::from_env()?;
    let mut r = pull::resolve(&env, &model, target)?;
    r.plan.llama_cpp = llama_cpp_version();
    let fits = r.plan.verdict.fits();
    let mut err = std::io::stderr().lock();
    if r.origin != Origin::Hub {
        let why = if r.origin == Origin::Offline {
            "HF_HUB_OFFLINE is set"
        } else {
            "the hub cannot be reached"
        };
        writeln!(err, "headroom: {why}: using the cache")?;
    }
    writeln!(
        err,
        "headroom: {} ({}): {}",
        r.label(),
        size(r.candidate.size()),
        render::summary(&r.plan)
    )?;
    if let Some(why) = &r.why {
        writeln!(err, "headroom: chose {}: {why}", r.candidate.label())?;
    }
    if r.header_bytes > 0 {
        writeln!(
            err,
            "headroom: planned from the GGUF header alone ({} read of {})",
            size(r.header_bytes),
            size(r.candidate.size())
        )?;
    }
    let refuse = !fits && model.select.is_none();
    if refuse {
        writeln!(
            err,
            "headroom: nothing in {} fits this machine (available: {}); name a quantization (org/repo:QUANT) to download one anyway",
            r.repo,
            crate::source::hub::choose::available(&r.all)
        )?;
    } else if !fits {
        writeln!(
            err,
            "headroom: warning: {} does not fit this machine; downloading it as asked",
            r.label()
        )?;
    }
    drop(err);
    let outcome = if refuse || args.dry_run {
        None
    } else {
        Some(pull::fetch(&env, &r)?)
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let json = PullJson {
            repo: &r.repo,
            commit: &r.commit,
            quant: r.candidate.quant.as_deref(),
            files: r.candidate.files.iter().map(|f| f.path.as_str()).collect(),
            size_bytes: r.candidate.size(),
            path: outcome.as_ref().map(|o| o.path.display().to_string()),
            downloaded: outcome.is_some(),
            transferred_bytes: outcome.as_ref().map_or(0, |o| o.transferred),
            resumed_from_bytes: outcome.as_ref().map_or(0, |o| o.resumed_from),
            header_bytes_read: r.header_bytes,
            chosen_by_planner: model.select.is_none(),
            why: r.why.as_deref(),
            plan: &r.plan,
        };
        writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?;
    } else if let Some(o) = &outcome {
        writeln!(out, "{}", o.path.display())?;
    }
    drop(out);
    if let Some(o) = &outcome {
        let what = if o.cached {
            "already in the Hugging Face cache".to_string()
        } else if o.resumed_from > 0 {
            format!(
                "downloaded {} (resumed after {})",
                size(o.transferred),
                size(o.resumed_from)
            )
        } else {
            format!("downloaded {}", size(o.transferred))
        };
        eprintln!("headroom: {}: {what}", r.label());
    }
    Ok(if refuse {
        ExitCode::from(EXIT_DOES_NOT_FIT)
    } else {
        ExitCode::SUCCESS
    })
}

/// `pull --json`.
#[derive(serde::Serialize)]
struct PullJson<'a> {
    repo: &'a str,
    commit: &'a str,
    quant: Option<&'a str>,
    files: Vec<&'a str>,
    size_bytes: u64,
    /// The snapshot path, when the file is on disk.
    path: Option<String>,
    downloaded: bool,
    transferred_bytes: u64,
    resumed_from_bytes: u64,
    header_bytes_read: u64,
    chosen_by_planner: bool,
    why: Option<&'a str>,
    plan: &'a Plan,
}
