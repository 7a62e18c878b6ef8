//! `headroom llama-accounting`: llama.cpp's own per-buffer memory figures for
//! a model and context (a `no_alloc` load, no weights read), the ground truth
//! the planner is held to.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use headroom_planner::hw::format_size;
use headroom_planner::plan::FlashAttn;

use super::resolve_models;
use crate::cli::LlamaAccountingArgs;
use crate::llama::{self, AccountingParams};

/// Accounting parameters equivalent to the planner's settings at a context size.
///
/// # Errors
/// A cache type llama.cpp has no name for.
pub fn params_for(
    path: &std::path::Path,
    s: &headroom_planner::plan::Settings,
    n_ctx: u32,
    n_gpu_layers: i32,
) -> Result<AccountingParams> {
    let mut p = AccountingParams::for_model(path);
    p.n_ctx = n_ctx;
    p.n_batch = s.n_batch;
    p.n_ubatch = s.n_ubatch;
    p.n_seq_max = s.n_parallel;
    p.type_k = kv_type(s.cache_type_k)?;
    p.type_v = kv_type(s.cache_type_v)?;
    p.flash_attn = match s.flash_attn {
        FlashAttn::Auto => llama::FlashAttn::Auto,
        FlashAttn::On => llama::FlashAttn::On,
        FlashAttn::Off => llama::FlashAttn::Off,
    };
    p.swa_full = s.swa_full;
    p.use_extra_bufts = s.repack;
    p.n_gpu_layers = n_gpu_layers;
    Ok(p)
}

fn kv_type(
    ty: headroom_planner::gguf::GgmlType,
) -> Result<llama_cpp_2::context::params::KvCacheType> {
    use headroom_planner::gguf::GgmlType as G;
    use llama_cpp_2::context::params::KvCacheType as K;
    Ok(match ty {
        G::F32 => K::F32,
        G::F16 => K::F16,
        G::BF16 => K::BF16,
        G::Q8_0 => K::Q8_0,
        G::Q4_0 => K::Q4_0,
        G::Q4_1 => K::Q4_1,
        G::IQ4_NL => K::IQ4_NL,
        G::Q5_0 => K::Q5_0,
        G::Q5_1 => K::Q5_1,
        other => anyhow::bail!("{other} cannot be a KV cache type"),
    })
}

/// Run `headroom llama-accounting`.
///
/// # Errors
/// A model llama.cpp refuses, or bad options.
pub fn run(args: &LlamaAccountingArgs) -> Result<ExitCode> {
    let settings = args
        .ctx
        .settings()
        .map_err(|e| super::UsageError(format!("{e:#}")))?;
    let models: Vec<String> = args.model.iter().cloned().collect();
    let path = resolve_models(&models)?.remove(0);
    // Validate the header ourselves first: llama.cpp may abort on hostile files.
    super::load_profile(&path)?;
    let n_ctx = settings.n_ctx.unwrap_or(4096);
    let params = params_for(
        &path,
        &settings,
        n_ctx,
        settings.n_gpu_layers.map_or(0, |n| n as i32),
    )?;
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
