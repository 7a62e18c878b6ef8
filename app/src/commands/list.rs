//! `headroom list`: the models on disk — the Hugging Face cache, headroom's
//! cache and `--models-dir` folders — with their size and whether each fits
//! this machine (the same plan `headroom plan` makes, from the header).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use comfy_table::presets::UTF8_BORDERS_ONLY;
use comfy_table::{CellAlignment, Table};
use headroom_planner::plan::Plan;
use headroom_planner::solve;

use super::{UsageError, hardware};
use crate::cli::{ListArgs, MachineArgs};
use crate::render;
use crate::source::hub::HubEnv;
use crate::source::hub::local::{self, LocalModel, Partial, Source};
use crate::source::hub::progress::size;

/// One listed model and its plan (or why it could not be planned).
struct Row {
    model: LocalModel,
    plan: Result<Plan>,
}

/// Run `headroom list`.
///
/// # Errors
/// Bad options or hardware profile; a closed stdout.
pub fn run(args: &ListArgs, machine: &MachineArgs) -> Result<ExitCode> {
    let settings = args
        .ctx
        .settings()
        .map_err(|e| UsageError(format!("{e:#}")))?;
    let hw = hardware(machine)?;
    let build = machine.build();
    let mut models = Vec::new();
    let mut partials: Vec<Partial> = Vec::new();
    if let Ok(env) = HubEnv::from_env() {
        let (m, p) = local::scan_hub(&env.cache_dir);
        models.extend(m);
        partials.extend(p);
    }
    if let Ok(dir) = crate::files::cache_dir() {
        models.extend(local::scan_dir(&dir.join("models")));
    }
    for dir in &args.models_dir {
        if !dir.is_dir() {
            return Err(
                UsageError(format!("--models-dir {}: not a directory", dir.display())).into(),
            );
        }
        models.extend(local::scan_dir(dir));
    }
    let rows: Vec<Row> = models
        .into_iter()
        .map(|model| {
            let plan = if model.missing_parts > 0 {
                Err(anyhow::anyhow!("{} parts missing", model.missing_parts))
            } else {
                crate::source::load_profile(&model.path).map(|p| {
                    solve::plan(&p, &model.path.display().to_string(), &settings, &hw, build)
                })
            };
            Row { model, plan }
        })
        .collect();
    let mut out = std::io::stdout().lock();
    if args.json {
        let items: Vec<serde_json::Value> = rows.iter().map(json_row).collect();
        let partial: Vec<serde_json::Value> = partials
            .iter()
            .map(|p| serde_json::json!({ "repo": p.repo, "path": p.path, "bytes": p.bytes }))
            .collect();
        let doc = serde_json::json!({ "models": items, "partial_downloads": partial });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        writeln!(
            out,
            "No models on disk. `headroom pull org/repo[:QUANT]` downloads one; `--models-dir DIR` lists a folder."
        )?;
    } else {
        let mut t = Table::new();
        t.load_preset(UTF8_BORDERS_ONLY)
            .set_header(vec!["model", "size", "here", "path"]);
        for r in &rows {
            let here = match &r.plan {
                Ok(p) => render::summary(p),
                Err(e) => format!(
                    "unreadable: {}",
                    format!("{e:#}").chars().take(60).collect::<String>()
                ),
            };
            t.add_row(vec![
                r.model.name.clone(),
                size(r.model.size),
                here,
                r.model.path.display().to_string(),
            ]);
        }
        if let Some(col) = t.column_mut(1) {
            col.set_cell_alignment(CellAlignment::Right);
        }
        writeln!(out, "{t}")?;
    }
    for p in &partials {
        writeln!(
            out,
            "partial download of {}: {} in {} (`headroom pull` resumes it)",
            p.repo,
            size(p.bytes),
            p.path.display()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn json_row(r: &Row) -> serde_json::Value {
    let (repo, commit) = match &r.model.source {
        Source::HubCache { repo, commit } => (Some(repo.as_str()), Some(commit.as_str())),
        Source::Dir { .. } => (None, None),
    };
    let mut v = serde_json::json!({
        "name": r.model.name,
        "path": r.model.path,
        "size_bytes": r.model.size,
        "repo": repo,
        "commit": commit,
        "missing_parts": r.model.missing_parts,
    });
    match &r.plan {
        Ok(p) => {
            v["quant"] = serde_json::json!(p.quant);
            v["verdict"] = serde_json::json!(p.verdict.as_str());
            v["n_gpu_layers"] = serde_json::json!(p.n_gpu_layers);
            v["n_ctx"] = serde_json::json!(p.n_ctx);
            v["est_decode_tokens_per_s"] = serde_json::json!(p.est_decode_tokens_per_s);
            v["error"] = serde_json::Value::Null;
        }
        Err(e) => {
            v["quant"] = serde_json::Value::Null;
            v["verdict"] = serde_json::Value::Null;
            v["error"] = serde_json::json!(format!("{e:#}"));
        }
    }
    v
}
