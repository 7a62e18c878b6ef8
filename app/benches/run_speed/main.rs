//! Run-speed benchmark (issue #3 acceptance): `headroom run` must decode at
//! least 0.97× and process the prompt at least 0.95× as fast as llama.cpp's own
//! `llama-bench`, and peak at most 32 MiB more resident memory than llama.cpp's
//! own `llama-completion` doing the same work.
//!
//! Both llama.cpp tools are built by `scripts/llama-tools.sh` from the same
//! llama.cpp sources and static libraries headroom links, so what differs is
//! the front end alone. Same model, threads, `-b`/`-ub`; a prompt of exactly
//! 64 tokens (llama-bench's `-p 64` uses random tokens; headroom and
//! llama-completion get a text that tokenizes to 64, checked in their output);
//! 128 greedy tokens with EOS ignored. Runs are interleaved (llama-bench,
//! headroom, llama-completion, repeated) so that drift hits all three alike;
//! medians are compared. llama-completion's speeds are printed too: unlike
//! llama-bench it samples, as headroom does.
//!
//! Peak RSS is each child's own `ru_maxrss` from `wait4`, at the speed runs'
//! context and at larger ones, where the KV cache grows.
//!
//! Then headroom's decode estimate on a first run (empty data and cache
//! directories: the bandwidth measured then, no calibration) for both demo
//! models, beside what headroom and llama-bench measure in the same rounds:
//! the goal is ±25% of headroom's measured speed. The shared 2-core test VMs have been AMD and
//! Intel hosts on which the instruct demo decoded at 105 to over 200 tok/s
//! within a day, so this is a figure to read, not a test to pass.
//!
//! A plain `fn main()`: prints the tables and exits 0; with
//! `HEADROOM_BENCH_STRICT=1` a MISS (or a build without `headroom run`) exits
//! non-zero — CI machines are too noisy for a hard gate. Other knobs:
//! `HEADROOM_BENCH_RUNS` (default 5, at least 3), `HEADROOM_BENCH_THREADS`
//! (default: available parallelism), `HEADROOM_BENCH_RSS_CTX` (default
//! `8192,32768`; empty for none), `HEADROOM_BENCH_MODEL` (default: the demo
//! model), `LLAMA_BENCH_BIN` with `LLAMA_COMPLETION_BIN` (skip the build
//! script).

mod child;
#[path = "../common/mod.rs"]
mod common;
mod programs;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::thread;
use std::time::Instant;

use anyhow::{Context, Result};

use common::{env_number, load_average, strict};
use programs::{Job, Sample, Tools, headroom_run, prompt_of_exactly, runner_available};

/// Prompt length in tokens (llama-bench `-p`).
const PROMPT_TOKENS: usize = 64;
/// Generated tokens (llama-bench `-n`).
const GEN_TOKENS: usize = 128;
/// llama.cpp's default logical batch size.
const BATCH: u32 = 2048;
/// llama.cpp's default physical batch size.
const UBATCH: u32 = 512;
/// Context of the speed runs: room for prompt and generation (llama-bench
/// sizes its own to exactly that, 192 cells, which llama.cpp pads to 256).
const SPEED_CTX: u32 = 512;
const DECODE_GOAL: f64 = 0.97;
const PROMPT_GOAL: f64 = 0.95;
const RSS_SLACK_BYTES: u64 = 32 << 20;
const MIB: f64 = (1u64 << 20) as f64;

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`; this harness has no options to read.
    match run() {
        Ok(Outcome::Pass) => ExitCode::SUCCESS,
        Ok(Outcome::Miss) if strict() => {
            println!("\nMISS under HEADROOM_BENCH_STRICT=1: failing");
            ExitCode::FAILURE
        }
        Ok(Outcome::Miss) => {
            println!("\nMISS reported only; HEADROOM_BENCH_STRICT=1 makes it fail");
            ExitCode::SUCCESS
        }
        Ok(Outcome::NoRunner) if strict() => ExitCode::FAILURE,
        Ok(Outcome::NoRunner) => ExitCode::SUCCESS,
        Err(e) => {
            println!("run_speed benchmark could not run: {e:#}");
            ExitCode::FAILURE
        }
    }
}

enum Outcome {
    Pass,
    Miss,
    /// `headroom run` is not in this build: only llama.cpp was measured.
    NoRunner,
}

/// What one benchmark run uses, from the environment.
struct Config {
    model: PathBuf,
    runs: usize,
    threads: usize,
    rss_ctx: Vec<u32>,
}

impl Config {
    fn from_env() -> Result<Self> {
        let runs = env_number("HEADROOM_BENCH_RUNS")?.unwrap_or(5).max(3);
        let threads = match env_number("HEADROOM_BENCH_THREADS")? {
            Some(t) if t > 0 => t,
            _ => thread::available_parallelism().map_or(2, |n| n.get()),
        };
        let rss_ctx = match std::env::var("HEADROOM_BENCH_RSS_CTX") {
            Ok(list) => list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    s.parse()
                        .with_context(|| format!("HEADROOM_BENCH_RSS_CTX: {s:?} is not a number"))
                })
                .collect::<Result<_>>()?,
            Err(_) => vec![8192, 32768],
        };
        let model = match std::env::var_os("HEADROOM_BENCH_MODEL") {
            Some(p) => PathBuf::from(p),
            None => headroom::source::demo::demo_model()
                .context("the test model (run `headroom demo-model` to fetch it)")?,
        };
        Ok(Self {
            model,
            runs,
            threads,
            rss_ctx,
        })
    }
}

fn run() -> Result<Outcome> {
    let started = Instant::now();
    let cfg = Config::from_env()?;
    let tools = Tools::locate()?;
    let prompt = prompt_of_exactly(&cfg.model, PROMPT_TOKENS)?;
    let headroom = PathBuf::from(env!("CARGO_BIN_EXE_headroom"));
    let ours = runner_available(&headroom).then_some(headroom.as_path());

    // The CPU as the planner names it: the test VMs have been AMD and Intel
    // hosts, whose decode speeds differ far more than the estimate's
    // constants say.
    println!(
        "run_speed: {}, {} threads, -b {BATCH} -ub {UBATCH}, prompt {PROMPT_TOKENS} tokens, \
         {GEN_TOKENS} generated (greedy, EOS ignored), {} interleaved runs, medians; CPU: {}",
        cfg.model.display(),
        cfg.threads,
        cfg.runs,
        headroom_planner::hw::cpu::probe(&mut Vec::new()).model
    );
    let load_before = load_average();
    if let Some(load) = load_before
        && load >= 1.0
    {
        println!(
            "note: 1-minute load average {load:.2} before starting: other work shares the CPUs, \
             so the speed ratios below carry its noise"
        );
    }
    if ours.is_none() {
        println!(
            "`headroom run` is not in this build ({} run --help failed): measuring llama.cpp's tools only",
            headroom.display()
        );
    }

    let job = Job {
        model: &cfg.model,
        prompt: &prompt,
        threads: cfg.threads,
        ctx: SPEED_CTX,
    };
    let runs = speed_runs(&tools, ours, &job, cfg.runs)?;
    let mut all_pass = report_speed(&runs);
    let rows = rss_rows(&tools, ours, &job, &runs, &cfg.rss_ctx)?;
    all_pass &= report_rss(&rows, &runs);
    if let Some(h) = ours {
        all_pass &= report_estimates(&estimate_rows(&tools, h, cfg.threads)?);
    }

    println!(
        "\ntotal benchmark time {:.1} s; 1-minute load average {} before, {} after",
        started.elapsed().as_secs_f64(),
        load_before.map_or_else(|| "?".into(), |l| format!("{l:.2}")),
        load_average().map_or_else(|| "?".into(), |l| format!("{l:.2}"))
    );
    Ok(match (ours, all_pass) {
        (None, _) => Outcome::NoRunner,
        (Some(_), true) => Outcome::Pass,
        (Some(_), false) => Outcome::Miss,
    })
}

/// Every speed run, one list per program (headroom's empty without a runner).
struct SpeedRuns {
    bench: Vec<Sample>,
    completion: Vec<Sample>,
    headroom: Vec<Sample>,
}

/// One untimed round (page cache, the binaries' pages, CPU frequency), then
/// `runs` interleaved rounds of llama-bench, headroom and llama-completion.
fn speed_runs(tools: &Tools, ours: Option<&Path>, job: &Job, runs: usize) -> Result<SpeedRuns> {
    tools.bench(job)?;
    tools.completion(job)?;
    if let Some(h) = ours {
        headroom_run(h, job, None)?;
    }
    let mut r = SpeedRuns {
        bench: Vec::new(),
        completion: Vec::new(),
        headroom: Vec::new(),
    };
    for _ in 0..runs {
        r.bench.push(tools.bench(job)?);
        if let Some(h) = ours {
            r.headroom.push(headroom_run(h, job, None)?);
        }
        r.completion.push(tools.completion(job)?);
    }
    Ok(r)
}

/// Prints the speed table; `false` when a ratio misses its goal.
///
/// The verdict is the ratio of medians. The median of each round's own
/// ratio is printed beside it: neighbouring runs share the machine's load of
/// the moment, so on a busy machine it is the steadier of the two.
fn report_speed(runs: &SpeedRuns) -> bool {
    type Field = fn(&Sample) -> f64;
    let prompt: Field = |s| s.prompt;
    let decode: Field = |s| s.decode;
    let med = |v: &[Sample], f: Field| median_f64(v.iter().map(f));
    let ours = !runs.headroom.is_empty();
    let mut all_pass = true;
    println!(
        "\nspeed (tokens/s, medians)       headroom  llama-bench   ratio   goal         paired"
    );
    for (label, f, goal) in [
        ("prompt processing", prompt, PROMPT_GOAL),
        ("decode", decode, DECODE_GOAL),
    ] {
        let theirs = med(&runs.bench, f);
        if ours {
            let o = med(&runs.headroom, f);
            let ratio = o / theirs.max(1e-9);
            let paired = median_f64(
                runs.headroom
                    .iter()
                    .zip(&runs.bench)
                    .map(|(h, b)| f(h) / f(b).max(1e-9)),
            );
            let pass = ratio >= goal;
            all_pass &= pass;
            println!(
                "{label:<30} {o:>9.1} {theirs:>12.1} {ratio:>6.3}×  ≥{goal:.2}×  {}  {paired:>6.3}×",
                verdict(pass)
            );
        } else {
            println!("{label:<30} {:>9} {theirs:>12.1}", "-");
        }
    }
    for (name, v) in [("llama-bench", &runs.bench), ("headroom", &runs.headroom)] {
        if !v.is_empty() {
            println!(
                "{name} spread over runs: prompt {:.1}%, decode {:.1}% (max-min over median)",
                spread(v.iter().map(prompt)) * 100.0,
                spread(v.iter().map(decode)) * 100.0
            );
        }
    }
    let (cp, cd) = (med(&runs.completion, prompt), med(&runs.completion, decode));
    print!("llama-completion (same text, greedy sampling): prompt {cp:.1}, decode {cd:.1} tok/s");
    if ours {
        println!(
            "; headroom/llama-completion {:.3}× prompt, {:.3}× decode",
            med(&runs.headroom, prompt) / cp.max(1e-9),
            med(&runs.headroom, decode) / cd.max(1e-9)
        );
    } else {
        println!();
    }
    all_pass
}

/// Peak RSS of headroom and llama-completion at one context.
struct RssRow {
    ctx: u32,
    headroom: Option<u64>,
    completion: u64,
}

/// The speed runs' median peaks, then one run of each program at every
/// larger context (where the KV cache, not the weights, makes the difference).
fn rss_rows(
    tools: &Tools,
    ours: Option<&Path>,
    job: &Job,
    runs: &SpeedRuns,
    contexts: &[u32],
) -> Result<Vec<RssRow>> {
    let mut rows = vec![RssRow {
        ctx: job.ctx,
        headroom: (!runs.headroom.is_empty())
            .then(|| median_u64(runs.headroom.iter().map(|s| s.rss))),
        completion: median_u64(runs.completion.iter().map(|s| s.rss)),
    }];
    for &ctx in contexts {
        let job = Job { ctx, ..*job };
        let completion = tools.completion(&job)?.rss;
        let headroom = match ours {
            Some(h) => Some(headroom_run(h, &job, None)?.rss),
            None => None,
        };
        rows.push(RssRow {
            ctx,
            headroom,
            completion,
        });
    }
    Ok(rows)
}

/// Prints the peak-RSS table; `false` when headroom exceeds the slack.
fn report_rss(rows: &[RssRow], runs: &SpeedRuns) -> bool {
    let mut all_pass = true;
    println!("\npeak RSS (wait4 ru_maxrss, MiB)  headroom  llama-completion  difference   goal");
    for r in rows {
        let completion = r.completion as f64 / MIB;
        match r.headroom {
            Some(o) => {
                let pass = o <= r.completion.saturating_add(RSS_SLACK_BYTES);
                all_pass &= pass;
                println!(
                    "-c {:<27} {:>9.1} {completion:>17.1} {:>+11.1}   ≤ +{} MiB  {}",
                    r.ctx,
                    o as f64 / MIB,
                    (o as f64 - r.completion as f64) / MIB,
                    RSS_SLACK_BYTES >> 20,
                    verdict(pass)
                );
            }
            None => println!("-c {:<27} {:>9} {completion:>17.1}", r.ctx, "-"),
        }
    }
    println!(
        "llama-bench peak RSS (its own {}-token context): {:.1} MiB",
        PROMPT_TOKENS + GEN_TOKENS,
        median_u64(runs.bench.iter().map(|s| s.rss)) as f64 / MIB
    );
    if let Some(reported) = runs.headroom.iter().filter_map(|s| s.reported_rss).max() {
        println!(
            "headroom's own peak_rss_bytes (largest at -c {SPEED_CTX}): {:.1} MiB",
            reported as f64 / MIB
        );
    }
    all_pass
}

/// Rounds of the estimate comparison per demo model.
const ESTIMATE_ROUNDS: usize = 3;
/// How far a first run's decode estimate may sit from the measured speed
/// before the comparison says MISS.
const ESTIMATE_TOLERANCE: f64 = 0.25;

/// One demo model's first-run decode estimates beside what headroom and
/// llama-bench measured in the same rounds.
struct EstimateRow {
    name: &'static str,
    estimate: Vec<f64>,
    headroom: Vec<f64>,
    bench: Vec<f64>,
}

/// For each demo model, [`ESTIMATE_ROUNDS`] interleaved rounds of llama-bench
/// and `headroom run`, the latter each time as a first run on a new machine
/// (empty data and cache directories), so that its `planned` decode speed
/// is the estimate such a run gets: the RAM bandwidth measured then, no
/// calibration. The job is the speed runs' own (64-token prompt, 128
/// tokens, the same threads and batches).
fn estimate_rows(tools: &Tools, headroom: &Path, threads: usize) -> Result<Vec<EstimateRow>> {
    let mut rows = Vec::new();
    for name in ["demo", "demo-base"] {
        let model = headroom::source::demo::named(name)
            .context("a demo model's name")?
            .with_context(|| {
                format!("the {name} model (`headroom demo-model {name}` fetches it)")
            })?;
        let prompt = prompt_of_exactly(&model, PROMPT_TOKENS)?;
        let job = Job {
            model: &model,
            prompt: &prompt,
            threads,
            ctx: SPEED_CTX,
        };
        let mut row = EstimateRow {
            name,
            estimate: Vec::new(),
            headroom: Vec::new(),
            bench: Vec::new(),
        };
        // The untimed warm-up of the speed runs: page cache and binaries.
        tools.bench(&job)?;
        for _ in 0..ESTIMATE_ROUNDS {
            row.bench.push(tools.bench(&job)?.decode);
            let empty = tempfile::tempdir().context("a temporary directory")?;
            let s = headroom_run(headroom, &job, Some(empty.path()))?;
            row.estimate.push(
                s.estimate
                    .context("`headroom run --json` has no planned decode_tokens_per_s")?,
            );
            row.headroom.push(s.decode);
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Prints the estimate table; `false` when a median estimate is further
/// than [`ESTIMATE_TOLERANCE`] from the median speed headroom measured.
fn report_estimates(rows: &[EstimateRow]) -> bool {
    let mut all_pass = true;
    println!(
        "\nfirst-run decode estimate (tok/s, medians of {ESTIMATE_ROUNDS}; each a first run: \
         empty data and cache directories)"
    );
    println!("model        estimate  headroom  llama-bench  est/headroom  est/llama-bench  goal");
    for r in rows {
        let (e, h, b) = (
            median_f64(r.estimate.iter().copied()),
            median_f64(r.headroom.iter().copied()),
            median_f64(r.bench.iter().copied()),
        );
        let ratio = e / h.max(1e-9);
        let pass = (ratio - 1.0).abs() <= ESTIMATE_TOLERANCE;
        all_pass &= pass;
        println!(
            "{:<12} {e:>8.1} {h:>9.1} {b:>12.1} {ratio:>12.3}× {:>15.3}×  ±{:.0}%  {}",
            r.name,
            e / b.max(1e-9),
            ESTIMATE_TOLERANCE * 100.0,
            verdict(pass)
        );
        println!(
            "{:<12} runs: estimate {:.1?}, headroom {:.1?}, llama-bench {:.1?}",
            "", r.estimate, r.headroom, r.bench
        );
    }
    all_pass
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

fn median_f64(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn median_u64(values: impl Iterator<Item = u64>) -> u64 {
    let mut v: Vec<u64> = values.collect();
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// (max − min) / median: how far one program's runs drifted.
fn spread(values: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = values.collect();
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (hi - lo) / median_f64(v.iter().copied()).max(1e-9)
}
