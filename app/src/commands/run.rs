//! `headroom run`: plan, guard, load, generate one answer, measure.
//!
//! stdout carries only the answer (or the JSON object); everything else goes
//! to stderr. Exit codes: 0 done, 1 error, 2 bad usage, 3 refused (the plan
//! does not fit), 130 interrupted (what was generated is flushed first).

use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result};
use headroom_planner::hw::format_size;
use headroom_planner::plan::Plan;

use super::{EXIT_DOES_NOT_FIT, UsageError, preflight};
use crate::cli::{ContextArgs, GenArgs, MachineArgs, RunArgs};
use crate::runner::measure;
use crate::runner::preflight::{Decision, Go, describe_nearest};
use crate::runner::prompt::{chat_format, tokenize_prompt};
use crate::runner::reasoning::ReasoningSplit;
use crate::runner::report::{LlamaDevice, Report, record};
use crate::runner::template::{Message, TemplateChoice};
use crate::runner::{Engine, GenOptions, Generation, StopReason};

/// Exit code: interrupted (128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;

/// Run `headroom run`.
///
/// # Errors
/// Bad options, an unreadable model or prompt, a failed load or decode.
pub fn run(args: &RunArgs, machine: &MachineArgs, verbose: u8) -> Result<ExitCode> {
    let usage = |e: anyhow::Error| UsageError(format!("{e:#}"));
    let opts = args.sampling.options().map_err(usage)?;
    let prompt = read_prompt(args)?;
    let choice = template_choice(&args.sampling, args.raw)?;
    let interrupted = interrupt_flag()?;
    if let Some(n) = args.sampling.oom_score_adj {
        measure::set_oom_score_adj(n)?;
    }

    let prepared = match prepare(args.model.as_deref(), &args.ctx, &args.sampling, machine)? {
        Prepared::Ready(p) => p,
        Prepared::Refused(code) => return Ok(code),
    };
    let engine = match load_engine(&prepared, verbose, &interrupted) {
        Err(_) if interrupted.load(std::sync::atomic::Ordering::Relaxed) => {
            eprintln!("headroom: interrupted while loading");
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        other => other?,
    };
    let rss_after_load = measure::rss_bytes();

    // The prompt before the context: a template that cannot be used is
    // refused in milliseconds, creating the context takes seconds.
    let (text, stops, mut split) = if args.raw {
        (prompt, Vec::new(), None)
    } else {
        let format = chat_format(&engine, &choice)?;
        tracing::info!("chat template: {}", format.describe());
        let mut messages = Vec::new();
        if let Some(system) = &args.sampling.system {
            messages.push(Message::system(system.clone()));
        }
        messages.push(Message::user(prompt));
        let text = format.render(&messages, true)?;
        // A thinking model's reasoning goes to stderr, its answer to
        // stdout (and `--json`'s `reasoning` and `text`).
        let split = ReasoningSplit::for_format(&format, &text);
        (text, format.stop_strings(), split)
    };
    let tokens = tokenize_prompt(&engine, &text)?;
    tracing::debug!("prompt ({} tokens): {text:?}", tokens.len());
    let mut session = engine.session()?;
    let opts = GenOptions {
        stop: opts.stop.iter().cloned().chain(stops).collect(),
        ..opts
    };

    let mut stdout = std::io::stdout().lock();
    let stream = !args.json;
    let mut write_err: Option<std::io::Error> = None;
    let (mut reasoning, mut answer) = (String::new(), String::new());
    let mut write = |reasoning_piece: &str, piece: &str| -> std::io::Result<()> {
        if !reasoning_piece.is_empty() {
            let mut stderr = std::io::stderr().lock();
            stderr.write_all(reasoning_piece.as_bytes())?;
            stderr.flush()?;
        }
        stdout.write_all(piece.as_bytes())?;
        stdout.flush()
    };
    let generation = session.generate(&tokens, &opts, &interrupted, &mut |piece| {
        // Without a split the piece goes out as it is (the generation
        // keeps the whole text).
        let split_piece = split.as_mut().map(|s| s.push(piece));
        if let Some((r, c)) = &split_piece {
            reasoning.push_str(r);
            answer.push_str(c);
        }
        if !stream {
            return true;
        }
        let (r, c) = split_piece
            .as_ref()
            .map_or(("", piece), |(r, c)| (r.as_str(), c.as_str()));
        match write(r, c) {
            Ok(()) => true,
            Err(e) => {
                write_err = Some(e);
                false
            }
        }
    })?;
    if let Some(e) = write_err {
        return Err(e.into());
    }
    if let Some(s) = split.as_mut() {
        let (r, c) = s.finish();
        if stream {
            write(&r, &c)?;
        }
        reasoning.push_str(&r);
        answer.push_str(&c);
    }
    let peak = measure::peak_rss_bytes();
    let mut report = Report::new(&prepared.plan, &engine, &generation, rss_after_load, peak);
    if split.is_some() {
        report.text = answer.trim_start().to_string();
        report.reasoning = Some(reasoning);
    }
    report.measured.llama_devices = prepared
        .accounted
        .iter()
        .map(|c| LlamaDevice {
            name: c.device.clone(),
            llama_bytes: c.llama_bytes,
            planned_bytes: c.planned_bytes,
        })
        .collect();
    if args.json {
        writeln!(stdout, "{}", serde_json::to_string_pretty(&report)?)?;
    } else if !report.text.ends_with('\n') {
        writeln!(stdout)?;
    }
    stdout.flush()?;
    drop(stdout);
    summarise(&prepared.plan, &generation, &report, verbose);
    record(&prepared.plan, &report);
    Ok(if generation.stop_reason == StopReason::Interrupted {
        ExitCode::from(EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}

/// What [`prepare`] decided.
pub enum Prepared {
    /// Go ahead.
    Ready(Box<Go>),
    /// Refused; the reason was printed; exit with this code.
    Refused(ExitCode),
}

/// Plan, refuse what does not fit (with the nearest plan that does), and check
/// the plan against llama.cpp's own accounting — all before any weight is
/// read — printing the outcome on stderr.
///
/// # Errors
/// Bad options, an unreadable model, or llama.cpp's accounting failing.
pub fn prepare(
    model: Option<&str>,
    ctx: &ContextArgs,
    opts_args: &GenArgs,
    machine: &MachineArgs,
) -> Result<Prepared> {
    Ok(report(preflight(model, ctx, opts_args, machine)?))
}

/// Print a decision's warnings, or its refusal with the nearest plan that
/// fits, on stderr.
pub fn report(decision: Decision) -> Prepared {
    match decision {
        Decision::Ready(go) => {
            for w in &go.warnings {
                eprintln!("headroom: warning: {w}");
            }
            Prepared::Ready(go)
        }
        Decision::Refused(r) => {
            let hint = r.nearest.as_ref().map_or_else(String::new, |n| {
                format!("; nearest plan that fits: {}", describe_nearest(n))
            });
            eprintln!(
                "headroom: refused: does not fit: {}{hint}; --force loads anyway",
                r.reason
            );
            Prepared::Refused(ExitCode::from(EXIT_DOES_NOT_FIT))
        }
    }
}

/// Ctrl-C sets the returned flag (the generation stops cleanly at the next
/// token); a second Ctrl-C ends the process at once.
///
/// # Errors
/// The handler cannot be installed.
pub fn interrupt_flag() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    let sig = signal_hook::consts::SIGINT;
    // Order matters: the conditional shutdown fires only once the flag is set.
    signal_hook::flag::register_conditional_shutdown(
        sig,
        i32::from(EXIT_INTERRUPTED),
        flag.clone(),
    )
    .context("installing the Ctrl-C handler")?;
    signal_hook::flag::register(sig, flag.clone()).context("installing the Ctrl-C handler")?;
    Ok(flag)
}

/// Load the model, with a progress line on stderr when it is a terminal.
///
/// # Errors
/// llama.cpp failing to load.
pub fn load_engine(ready: &Go, verbose: u8, cancel: &Arc<AtomicBool>) -> Result<Engine> {
    let cancel = cancel.clone();
    let name = ready
        .spec
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Not while llama.cpp logs to stderr (-v).
    let bar = crate::source::hub::progress::Progress::loading(&name, verbose == 0);
    let shown = bar.clone();
    let progress: Box<dyn FnMut(f32) -> bool> = Box::new(move |p| {
        shown.set_fraction(p);
        !cancel.load(std::sync::atomic::Ordering::Relaxed)
    });
    let spec = crate::llama::AccountingParams {
        no_alloc: false,
        ..ready.spec.clone()
    };
    let engine = Engine::load(&spec, Some(progress));
    bar.finish();
    engine.map_err(|e| {
        anyhow::anyhow!(
            "{e:#} (planned {} of RAM for it)",
            format_size(ready.plan.ram.peak_bytes)
        )
    })
}

fn read_prompt(args: &RunArgs) -> Result<String> {
    if let Some(p) = &args.prompt {
        return Ok(p.clone());
    }
    if let Some(f) = &args.file {
        return std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()));
    }
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Err(UsageError(
            "no prompt: give -p TEXT, -f FILE, or pipe the prompt on standard input".into(),
        )
        .into());
    }
    let mut text = String::new();
    stdin
        .lock()
        .read_to_string(&mut text)
        .context("reading the prompt from standard input")?;
    if text.trim().is_empty() {
        return Err(UsageError("the prompt on standard input is empty".into()).into());
    }
    Ok(text)
}

/// The `--chat-template` choice, checked before anything loads.
///
/// # Errors
/// A missing template file or an unknown name (bad usage).
pub fn template_choice(opts_args: &GenArgs, raw: bool) -> Result<TemplateChoice> {
    let choice = TemplateChoice::parse(opts_args.chat_template.as_deref());
    if raw && opts_args.chat_template.is_some() {
        return Err(UsageError("--raw sends no template; drop --chat-template".into()).into());
    }
    match &choice {
        TemplateChoice::File(p) if !p.is_file() => {
            Err(UsageError(format!("--chat-template {}: no such file", p.display())).into())
        }
        TemplateChoice::Name(n) if !crate::runner::template::known_names().contains(n) => {
            Err(UsageError(format!(
                "--chat-template {n}: unknown; known names: {}",
                crate::runner::template::known_names().join(", ")
            ))
            .into())
        }
        _ => Ok(choice),
    }
}

fn summarise(plan: &Plan, g: &Generation, r: &Report, verbose: u8) {
    match g.stop_reason {
        StopReason::ContextFull => eprintln!(
            "headroom: the context is full ({} tokens): generation stopped; raise --ctx-size for longer answers",
            plan.n_ctx
        ),
        StopReason::Interrupted => eprintln!("headroom: interrupted"),
        _ => {}
    }
    if std::io::stderr().is_terminal() || verbose > 0 {
        eprintln!(
            "headroom: {} prompt tokens at {:.1} tok/s, {} generated at {:.1} tok/s (planned {:.1}); peak RSS {} (planned {})",
            g.tokens_prompt,
            r.prompt_tokens_per_s,
            g.tokens_generated,
            r.decode_tokens_per_s,
            plan.est_decode_tokens_per_s,
            format_size(r.peak_rss_bytes),
            format_size(plan.ram.peak_bytes)
        );
    }
}
