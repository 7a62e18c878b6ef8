//! `headroom llama-accounting`: llama.cpp's own per-buffer memory figures for
//! a model and context (a `no_alloc` load, no weights read), the ground truth
//! the planner is held to.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use headroom_planner::hw::format_size;

use crate::cli::{LlamaAccountingArgs, MachineArgs};
use crate::llama::{self, AccountingParams};
use crate::source::resolve_models;

/// Run `headroom llama-accounting`.
///
/// # Errors
/// A model llama.cpp refuses, or bad options.
pub fn run(args: &LlamaAccountingArgs, machine: &MachineArgs) -> Result<ExitCode> {
    let mut settings = args
        .ctx
        .settings()
        .map_err(|e| super::UsageError(format!("{e:#}")))?;
    settings.logits_per_sequence = args.logits.per_sequence();
    let models: Vec<String> = args.model.iter().cloned().collect();
    let path = resolve_models(&models)?.remove(0);
    // Validate the header ourselves first: llama.cpp may abort on hostile files.
    crate::source::load_profile(&path)?;
    let n_ctx = settings.n_ctx.unwrap_or(4096);
    let ngl = settings
        .n_gpu_layers
        .map_or(0, |n| i32::try_from(n).unwrap_or(i32::MAX));
    // Workers given with --rpc are devices of this load, as in `run`.
    if let Some((endpoints, _)) = machine.rpc_workers()? {
        llama::rpc::connect(&endpoints)?;
    }
    let params = AccountingParams::from_settings(&path, &settings, n_ctx, ngl)?;
    let rows = llama::memory_breakdown(&params)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| serde_json::json!({"name": r.name, "model_bytes": r.model, "context_bytes": r.context, "compute_bytes": r.compute}))
            .collect();
        let doc =
            serde_json::json!({"model": path.display().to_string(), "n_ctx": n_ctx, "buffers": v});
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        writeln!(
            out,
            "{:<12} {:>12} {:>12} {:>12}",
            "buffer", "model", "context", "compute"
        )?;
        for r in &rows {
            writeln!(
                out,
                "{:<12} {:>12} {:>12} {:>12}",
                r.name,
                format_size(r.model),
                format_size(r.context),
                format_size(r.compute)
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
