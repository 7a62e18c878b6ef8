//! Calibration probe: loads a model through llama-cpp-2 with the same context
//! settings the planner assumes, processes a prompt, generates greedily, and
//! prints measured decode/prompt speed and peak RSS (`ru_maxrss`) next to the
//! plan's predictions. Used to calibrate the speed and residency models until
//! the runner (`headroom run`) reports the same figures.
//!
//! `cargo run --release --example measure -- MODEL N_CTX [N_GEN] [--no-mmap]`

use std::num::NonZeroU32;
use std::time::Instant;

use anyhow::{Context, Result};
use headroom_planner::plan::Settings;
use headroom_planner::solve::{self, Build};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::sampling::LlamaSampler;

fn max_rss_bytes() -> u64 {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    u64::try_from(ru.ru_maxrss).unwrap_or(0) * 1024
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .context("usage: measure MODEL N_CTX [N_GEN] [--no-mmap]")?;
    let n_ctx: u32 = args.get(2).map_or(Ok(4096), |s| s.parse())?;
    let n_gen: usize = args
        .get(3)
        .filter(|s| !s.starts_with("--"))
        .map_or(Ok(64), |s| s.parse())?;
    let mmap = !args.iter().any(|a| a == "--no-mmap");
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get() as i32);

    let settings = Settings {
        n_ctx: Some(n_ctx),
        mmap,
        ..Settings::default()
    };
    let profile = headroom::source::load_profile(std::path::Path::new(path))?;
    let hw = headroom_planner::hw::probe(&headroom_planner::hw::ProbeOptions {
        measure_bandwidth: true,
        cache_dir: headroom::files::cache_dir().ok(),
    });
    let plan = solve::plan(&profile, path, &settings, &hw, Build { gpu: false });

    let backend = headroom::llama::backend::shared().context("llama backend")?;
    let t0 = Instant::now();
    let model = LlamaModel::load_from_file(
        backend,
        path,
        &LlamaModelParams::default().with_use_mmap(mmap),
    )?;
    let ctx_params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(settings.n_batch)
        .with_n_ubatch(settings.n_ubatch)
        .with_swa_full(false)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let mut ctx = model.new_context(backend, ctx_params)?;
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;
    let rss_load = max_rss_bytes();

    let prompt =
        "Explain in a few sentences why the sky is blue, and what Rayleigh scattering is. "
            .repeat(4);
    let tokens = model.vocab().tokenize(prompt.as_bytes(), true, false);
    let mut batch = LlamaBatch::new(settings.n_ubatch as usize, 1);
    for (i, t) in tokens.iter().enumerate() {
        batch.add(*t, i as i32, &[0], i + 1 == tokens.len())?;
    }
    let t1 = Instant::now();
    ctx.decode(&mut batch)?;
    let prompt_s = t1.elapsed().as_secs_f64();

    let mut sampler = LlamaSampler::greedy();
    let t2 = Instant::now();
    let mut generated = 0usize;
    for pos in (tokens.len()..).take(n_gen) {
        let tok = sampler.sample(&ctx, batch.n_tokens() - 1);
        batch.clear();
        batch.add(tok, i32::try_from(pos)?, &[0], true)?;
        ctx.decode(&mut batch)?;
        generated += 1;
    }
    let decode_s = t2.elapsed().as_secs_f64();
    let peak = max_rss_bytes();
    let mib = |b: u64| b as f64 / 1048576.0;
    println!("model        {path} (n_ctx {n_ctx}, mmap {mmap}, threads {threads})");
    println!(
        "load         {load_ms:.0} ms, RSS after load {:.1} MiB",
        mib(rss_load)
    );
    println!(
        "prompt       {} tokens, {:.1} tok/s measured, {:.1} planned",
        tokens.len(),
        tokens.len() as f64 / prompt_s,
        plan.est_prompt_tokens_per_s
    );
    println!(
        "decode       {generated} tokens, {:.1} tok/s measured, {:.1} planned ({:+.0}%)",
        generated as f64 / decode_s,
        plan.est_decode_tokens_per_s,
        (plan.est_decode_tokens_per_s / (generated as f64 / decode_s) - 1.0) * 100.0
    );
    println!(
        "peak RSS     {:.1} MiB measured, {:.1} MiB planned (ratio {:.3}); planned anon {:.1} + mapped {:.1}",
        mib(peak),
        mib(plan.ram.peak_bytes),
        plan.ram.peak_bytes as f64 / peak as f64,
        mib(plan.ram.anonymous_bytes),
        mib(plan.ram.mapped_bytes)
    );
    Ok(())
}
