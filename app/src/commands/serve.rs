//! `headroom serve`: plan the slots, refuse what does not fit, listen, load,
//! then answer OpenAI's API until SIGINT or SIGTERM.
//!
//! Order matters: the plan (and its refusal, exit 3) comes before the port is
//! bound and before any weight is read; the port is bound before the load,
//! so `/health` answers "loading" meanwhile; a load that fails ends the
//! server with exit 1.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use headroom_planner::hw::{format_size, parse_size};
use headroom_planner::plan::FrontEnd;
use headroom_planner::slots::{self, Parallel};

use super::{UsageError, hardware};
use crate::cli::{MachineArgs, ServeArgs};
use crate::runner::batch::{Admission, Scheduler, Stats};
use crate::runner::preflight::{self, Request};
use crate::runner::prompt::chat_format;
use crate::runner::template::TemplateChoice;
use crate::runner::{Engine, Sampling};
use crate::server::{AppState, Config, Loaded, ModelFacts};

/// Waiting requests per slot when `--max-queue` is not given.
const QUEUE_PER_SLOT: usize = 4;
/// The embedding context's bounds (`--embeddings TOKENS`): one batch holds a
/// whole input, and its output rows are logits for every token.
const MIN_EMBEDDING_CTX: u32 = 16;
const MAX_EMBEDDING_CTX: u32 = 8192;
/// Embeddings requests waiting for the embedding context.
const EMBED_QUEUE: usize = 16;
/// How long in-flight answers get to finish after SIGINT/SIGTERM.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Run `headroom serve`.
///
/// # Errors
/// Bad options, an unreadable model, a port that cannot be bound, a failed load.
pub fn run(args: &ServeArgs, machine: &MachineArgs, verbose: u8) -> Result<ExitCode> {
    let usage = |e: anyhow::Error| anyhow::Error::from(UsageError::from_chain(&e));
    let max_body = parse_size(&args.max_body)
        .map_err(|e| anyhow!("--max-body: {e}"))
        .map_err(usage)?;
    let max_body = usize::try_from(max_body).unwrap_or(usize::MAX);
    let host: IpAddr = args
        .host
        .parse()
        .map_err(|e| UsageError(format!("--host {}: {e} (give an IP address)", args.host)))?;
    if args.threads == Some(0) {
        return Err(UsageError("--threads must be at least 1".into()).into());
    }
    if args.top_k < 0 || !(0.0..=1.0).contains(&args.min_p) {
        return Err(UsageError("--top-k must be 0 or more, --min-p in [0, 1]".into()).into());
    }
    let choice = TemplateChoice::parse(args.chat_template.as_deref());
    if let TemplateChoice::File(p) = &choice
        && !p.is_file()
    {
        return Err(UsageError(format!("--chat-template {}: no such file", p.display())).into());
    }

    // Plan: the slots, then the guard and llama.cpp's own accounting.
    let mut settings = args.ctx.settings().map_err(usage)?;
    // The plan counts the HTTP runtime beside the model, and the embedding
    // context when there is one.
    settings.front_end = FrontEnd::Server;
    if let Some(n) = args.embeddings
        && !(MIN_EMBEDDING_CTX..=MAX_EMBEDDING_CTX).contains(&n)
    {
        return Err(UsageError(format!(
            "--embeddings {n}: between {MIN_EMBEDDING_CTX} and {MAX_EMBEDDING_CTX} tokens"
        ))
        .into());
    }
    settings.embeddings = args.embeddings;
    let hw = hardware(machine)?;
    let models: Vec<String> = args.model.iter().cloned().collect();
    let paths = crate::source::resolve_models(&models)?;
    let [path] = paths.as_slice() else {
        return Err(UsageError(format!(
            "{}: a directory of {} GGUF files; give one file",
            args.model.as_deref().unwrap_or("demo"),
            paths.len()
        ))
        .into());
    };
    let profile = crate::source::load_profile(path)?;
    if args.ctx.parallel_or(Parallel::Auto) == Parallel::Auto {
        let build = machine.build();
        let chosen = slots::plan_auto(&profile, &path.display().to_string(), &settings, &hw, build);
        settings.n_parallel = chosen.n_parallel;
    }
    let decision = preflight::decide(Request {
        path,
        profile: &profile,
        settings: &settings,
        hw,
        force: args.force,
        threads: args.threads,
        siblings: &crate::source::siblings,
    })?;
    let go = match super::run::report(decision) {
        super::run::Prepared::Ready(go) => go,
        super::run::Prepared::Refused(code) => return Ok(code),
    };
    let plan = go.plan.clone();
    let n_slots = plan.n_parallel.max(1) as usize;
    let n_ctx_slot = plan.n_ctx as usize / n_slots;
    let max_queue = args.max_queue.unwrap_or(QUEUE_PER_SLOT * n_slots);
    if !host.is_loopback() && args.api_key.is_none() {
        eprintln!(
            "headroom: warning: listening on {host} without --api-key: anyone who can reach this port can use the model"
        );
    }

    let model_id = plan.model.name.clone().unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into())
    });
    let admission = Arc::new(Admission::new(n_slots, max_queue));
    let stats = Arc::new(Stats::default());
    let state = Arc::new(AppState::new(
        Config {
            model_id,
            slots: n_slots,
            n_ctx_slot,
            api_key: args.api_key.clone(),
            defaults: Sampling {
                top_k: args.top_k,
                min_p: args.min_p,
                ..Sampling::DEFAULT
            },
            planned_peak_bytes: plan.ram.peak_bytes,
            reasoning: args.reasoning_format != "none",
            facts: ModelFacts {
                n_ctx_train: plan.model.n_ctx_train,
                n_params: plan.model.n_params,
                size: plan.model.file_bytes,
                n_vocab: profile.n_vocab,
                n_embd: u64::from(profile.n_embd),
            },
            embeddings: plan.embeddings.as_ref().map(|e| (e.n_ctx, e.bytes)),
        },
        Arc::clone(&admission),
        Arc::clone(&stats),
    ));

    raise_open_files();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // Templates and tokenizing run here; a handful is plenty, and a
        // burst must not become hundreds of threads.
        .max_blocking_threads(4)
        .enable_all()
        .build()
        .context("starting the HTTP runtime")?;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(SocketAddr::new(
            host, args.port,
        )))
        .with_context(|| format!("listening on {host}:{}", args.port))?;
    let addr = listener.local_addr().context("reading the bound address")?;

    // The model loads and the scheduler runs on a thread of their own; the
    // runtime serves /health ("loading") meanwhile.
    let failed: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
    let spec = crate::llama::AccountingParams {
        no_alloc: false,
        ..go.spec.clone()
    };
    let stop_load = Arc::new(AtomicBool::new(false));
    let worker = {
        let state = Arc::clone(&state);
        let failed = Arc::clone(&failed);
        let admission = Arc::clone(&admission);
        let stop_load = Arc::clone(&stop_load);
        let explicit_template = args.chat_template.is_some();
        let embeddings = args.embeddings;
        std::thread::Builder::new()
            .name("scheduler".into())
            .spawn(move || {
                let progress: Box<dyn FnMut(f32) -> bool> =
                    Box::new(move |_| !stop_load.load(Ordering::Relaxed));
                let result = (|| -> Result<()> {
                    let engine = Arc::new(Engine::load(&spec, Some(progress)).map_err(|e| {
                        anyhow!("{e:#} (planned {} of RAM for it)", format_size(plan.ram.peak_bytes))
                    })?);
                    let format = match chat_format(&engine, &choice) {
                        Ok(f) => {
                            tracing::info!("chat template: {}", f.describe());
                            Some(f)
                        }
                        Err(e) if !explicit_template => {
                            eprintln!(
                                "headroom: warning: no usable chat template ({e:#}): /v1/chat/completions will refuse requests; /v1/completions works"
                            );
                            None
                        }
                        Err(e) => return Err(e),
                    };
                    let _ = state.loaded.set(Loaded {
                        engine: Arc::clone(&engine),
                        format,
                    });
                    if let Some(n_ctx) = embeddings {
                        start_embeddings(&engine, n_ctx, &state)?;
                    }
                    let scheduler = Scheduler::new(&engine, n_slots, Arc::clone(&admission), Arc::clone(&state.stats));
                    eprintln!(
                        "headroom: serving {} at http://{addr}/v1: {n_slots} slot{} × {n_ctx_slot} tokens (context {}), queue {max_queue}; planned peak RAM {}{}{}",
                        state.config.model_id,
                        if n_slots == 1 { "" } else { "s" },
                        plan.n_ctx,
                        format_size(plan.ram.peak_bytes),
                        gpu_note(&plan),
                        plan.embeddings.as_ref().map_or(String::new(), |e| format!(
                            "; embeddings: {} tokens per input ({} planned)",
                            e.n_ctx,
                            format_size(e.bytes)
                        )),
                    );
                    scheduler.run()
                })();
                if let Err(e) = result {
                    *failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                        Some(format!("{e:#}"));
                    admission.close();
                }
            })
            .context("starting the scheduler thread")?
    };
    if verbose > 0 {
        eprintln!("headroom: listening on http://{addr} (loading the model)");
    }

    let router = crate::server::router(Arc::clone(&state), max_body);
    let admission_for_signal = Arc::clone(&admission);
    let stopping = Arc::new(tokio::sync::Notify::new());
    let served = runtime.block_on(async move {
        let notify = Arc::clone(&stopping);
        let shutdown = async move {
            let closed = wait_closed(Arc::clone(&admission_for_signal));
            tokio::select! {
                () = signal() => {}
                () = closed => {}
            }
            admission_for_signal.close();
            notify.notify_one();
        };
        let server = axum::serve(listener, router).with_graceful_shutdown(shutdown);
        let mut handle = tokio::spawn(async move { server.await });
        // In-flight answers get their last chunk at once; a connection that
        // still lingers after the grace period is not waited for.
        tokio::select! {
            r = &mut handle => r,
            () = async {
                stopping.notified().await;
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            } => Ok(Ok(())),
        }
    });
    stop_load.store(true, Ordering::Relaxed);
    // The scheduler ends the running jobs at once; give it the grace period.
    let t0 = std::time::Instant::now();
    while !worker.is_finished() && t0.elapsed() < SHUTDOWN_GRACE {
        std::thread::sleep(Duration::from_millis(20));
    }
    runtime.shutdown_timeout(Duration::from_secs(1));
    if let Some(why) = failed
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
    {
        return Err(anyhow!(why));
    }
    served
        .context("the HTTP server task")?
        .context("the HTTP server")?;
    eprintln!("headroom: server stopped");
    Ok(ExitCode::SUCCESS)
}

/// The embedding thread: it creates the embedding context of `n_ctx`
/// tokens on `engine`'s weights, then embeds one job at a time from a
/// bounded queue. Returns once the context exists (or failed: the server
/// then ends, as for a failed load).
fn start_embeddings(
    engine: &Arc<Engine>,
    n_ctx: u32,
    state: &Arc<crate::server::AppState>,
) -> Result<()> {
    let (jobs, queue) = std::sync::mpsc::sync_channel::<crate::server::EmbedJob>(EMBED_QUEUE);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(usize, usize, &'static str)>>();
    let engine = Arc::clone(engine);
    std::thread::Builder::new()
        .name("embeddings".into())
        .spawn(move || {
            let mut embedder = match engine.embedder(n_ctx) {
                Ok(e) => e,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let _ = ready_tx.send(Ok((
                embedder.n_ctx(),
                embedder.n_embd(),
                embedder.pooling().name(),
            )));
            // Ends when the server's sender is gone.
            while let Ok(job) = queue.recv() {
                // A request whose client went away (its handler dropped the
                // receiver) stops between inputs; the first error ends it.
                let out = job
                    .inputs
                    .iter()
                    .take_while(|_| !job.reply.is_closed())
                    .map(|t| embedder.embed(t).map_err(|e| format!("{e:#}")))
                    .collect();
                let _ = job.reply.send(out);
            }
        })
        .context("starting the embedding thread")?;
    let (n_ctx, n_embd, pooling) = ready_rx
        .recv()
        .map_err(|_| anyhow!("the embedding thread ended before its context existed"))??;
    tracing::info!("embeddings: {n_ctx} tokens, {n_embd} dimensions, {pooling} pooling");
    let _ = state.embeddings.set(crate::server::Embeddings {
        jobs,
        n_ctx,
        n_embd,
    });
    Ok(())
}

fn gpu_note(plan: &headroom_planner::plan::Plan) -> String {
    if plan.n_gpu_layers > 0 {
        format!(", {} layers on the GPU", plan.n_gpu_layers)
    } else {
        String::new()
    }
}

/// A connection is a file descriptor: a burst of clients must meet a 503,
/// not a refused `accept`. Raise the soft limit to the hard one, as servers do.
fn raise_open_files() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raw const lim) != 0 {
                tracing::debug!("could not raise the open-file limit");
            }
        }
    }
}

/// SIGINT or SIGTERM.
async fn signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        // Without handlers the default actions still end the process.
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
    eprintln!("headroom: shutting down: finishing the answers in flight");
}

/// Resolves when the admission queue closes (the scheduler failed).
async fn wait_closed(admission: Arc<Admission>) {
    while !admission.is_closed() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
