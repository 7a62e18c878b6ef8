//! Run-speed benchmark (issue #3 acceptance): `headroom run` must decode at
//! least 0.97× and process the prompt at least 0.95× as fast as llama.cpp's own
//! `llama-bench`, and peak at most 32 MiB more resident memory than llama.cpp's
//! own `llama-completion` doing the same work.
//!
//! Both llama.cpp tools are built by `scripts/llama-tools.sh` from the same
//! llama.cpp sources and static libraries headroom links, so the comparison is
//! of the front ends only. Same model, threads, `-b`/`-ub`; a prompt of exactly
//! 64 tokens (llama-bench's `-p 64` uses random tokens; headroom and
//! llama-completion get a text that tokenizes to 64, checked in their output),
//! 128 greedy tokens with EOS ignored. Runs are interleaved (llama-bench,
//! headroom, llama-completion, repeated) so drift hits all alike; medians.
//!
//! Peak RSS is each child's own `ru_maxrss` from `wait4`, measured at the speed
//! run's context and at larger ones, where the KV cache grows.
//!
//! A plain `fn main()`: prints the table and exits 0; with
//! `HEADROOM_BENCH_STRICT=1` a MISS exits non-zero (CI machines are too noisy
//! for a hard gate). Other knobs: `HEADROOM_BENCH_RUNS` (default 5, at least
//! 3), `HEADROOM_BENCH_THREADS` (default: available parallelism),
//! `HEADROOM_BENCH_RSS_CTX` (default `8192,32768`), `HEADROOM_BENCH_MODEL`
//! (default: the demo model), `LLAMA_BENCH_BIN` and `LLAMA_COMPLETION_BIN`
//! (skip the build script).

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::thread;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

/// Prompt length in tokens (llama-bench `-p`).
const PROMPT_TOKENS: usize = 64;
/// Generated tokens (llama-bench `-n`).
const GEN_TOKENS: usize = 128;
/// llama.cpp's default logical and physical batch sizes.
const BATCH: u32 = 2048;
const UBATCH: u32 = 512;
/// Context of the speed runs: holds prompt and generation (llama-bench sizes
/// its own to exactly that, 192, padded to 256).
const SPEED_CTX: u32 = 512;
/// Acceptance thresholds.
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
            println!("\nMISS (reported only; set HEADROOM_BENCH_STRICT=1 to fail on it)");
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

fn strict() -> bool {
    std::env::var("HEADROOM_BENCH_STRICT").is_ok_and(|v| v == "1")
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
        let runs = env_parse("HEADROOM_BENCH_RUNS")?.unwrap_or(5).max(3);
        let threads = match env_parse("HEADROOM_BENCH_THREADS")? {
            Some(t) if t > 0 => t,
            _ => thread::available_parallelism().map_or(2, |n| n.get()),
        };
        let rss_ctx = match std::env::var("HEADROOM_BENCH_RSS_CTX") {
            Ok(list) => list
                .split(',')
                .filter(|s| !s.trim().is_empty())
                .map(|s| {
                    s.trim()
                        .parse()
                        .with_context(|| format!("HEADROOM_BENCH_RSS_CTX: {s:?} is not a number"))
                })
                .collect::<Result<_>>()?,
            Err(_) => vec![8192, 32768],
        };
        let model = match std::env::var_os("HEADROOM_BENCH_MODEL") {
            Some(p) => PathBuf::from(p),
            None => headroom::demo::demo_model()
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

fn env_parse(name: &str) -> Result<Option<usize>> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .map(Some)
            .with_context(|| format!("{name}: {v:?} is not a number")),
        Err(_) => Ok(None),
    }
}

fn run() -> Result<Outcome> {
    let started = Instant::now();
    let cfg = Config::from_env()?;
    let tools = Tools::locate()?;
    let prompt = prompt_of_exactly(&cfg.model, PROMPT_TOKENS)?;
    let headroom = PathBuf::from(env!("CARGO_BIN_EXE_headroom"));
    let has_runner = runner_available(&headroom);

    println!(
        "run_speed: {}, {} threads, -b {BATCH} -ub {UBATCH}, prompt {PROMPT_TOKENS} tokens, \
         {GEN_TOKENS} generated (greedy, EOS ignored), {} interleaved runs, medians",
        cfg.model.display(),
        cfg.threads,
        cfg.runs
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
    if !has_runner {
        println!(
            "`headroom run` is not in this build ({} run --help failed): measuring llama.cpp's tools only",
            headroom.display()
        );
    }

    // One untimed round: page cache, binaries' pages, CPU frequency.
    let job = Job {
        model: &cfg.model,
        prompt: &prompt,
        threads: cfg.threads,
        ctx: SPEED_CTX,
    };
    tools.bench(&job)?;
    tools.completion(&job)?;
    if has_runner {
        headroom_run(&headroom, &job)?;
    }
    let mut bench = Vec::new();
    let mut completion = Vec::new();
    let mut ours = Vec::new();
    for _ in 0..cfg.runs {
        bench.push(tools.bench(&job)?);
        if has_runner {
            ours.push(headroom_run(&headroom, &job)?);
        }
        completion.push(tools.completion(&job)?);
    }

    let b = Speeds::median(&bench);
    let c = Speeds::median(&completion);
    let h = (!ours.is_empty()).then(|| Speeds::median(&ours));
    let mut all_pass = true;

    println!("\nspeed (tokens/s, medians)       headroom  llama-bench   ratio   goal");
    for (label, ours, theirs, goal) in [
        (
            "prompt processing",
            h.map(|h| h.prompt),
            b.prompt,
            PROMPT_GOAL,
        ),
        ("decode", h.map(|h| h.decode), b.decode, DECODE_GOAL),
    ] {
        match ours {
            Some(o) => {
                let ratio = o / theirs.max(1e-9);
                let pass = ratio >= goal;
                all_pass &= pass;
                println!(
                    "{label:<30} {o:>9.1} {theirs:>12.1} {ratio:>6.3}×  ≥{goal:.2}×  {}",
                    verdict(pass)
                );
            }
            None => println!("{label:<30} {:>9} {theirs:>12.1}", "-"),
        }
    }
    println!(
        "llama-bench spread over runs: prompt {:.1}%, decode {:.1}% (max-min over median)",
        spread(bench.iter().map(|s| s.prompt)) * 100.0,
        spread(bench.iter().map(|s| s.decode)) * 100.0
    );
    print!(
        "llama-completion (same prompt text, greedy sampler): prompt {:.1}, decode {:.1} tok/s",
        c.prompt, c.decode
    );
    match h {
        Some(h) => println!(
            "; headroom/llama-completion {:.3}× prompt, {:.3}× decode",
            h.prompt / c.prompt.max(1e-9),
            h.decode / c.decode.max(1e-9)
        ),
        None => println!(),
    }

    // Peak RSS: the speed runs' medians, then one run each at larger contexts.
    let mut rss_rows = vec![RssRow {
        ctx: SPEED_CTX,
        headroom: (!ours.is_empty()).then(|| median_u64(ours.iter().map(|s| s.rss))),
        completion: median_u64(completion.iter().map(|s| s.rss)),
    }];
    for &ctx in &cfg.rss_ctx {
        let job = Job { ctx, ..job };
        let completion = tools.completion(&job)?.rss;
        let headroom = if has_runner {
            Some(headroom_run(&headroom, &job)?.rss)
        } else {
            None
        };
        rss_rows.push(RssRow {
            ctx,
            headroom,
            completion,
        });
    }
    println!("\npeak RSS (wait4 ru_maxrss, MiB)  headroom  llama-completion  difference   goal");
    for r in &rss_rows {
        match r.headroom {
            Some(o) => {
                let pass = o <= r.completion.saturating_add(RSS_SLACK_BYTES);
                all_pass &= pass;
                println!(
                    "-c {:<27} {:>9.1} {:>17.1} {:>+11.1}   ≤ +{} MiB  {}",
                    r.ctx,
                    o as f64 / MIB,
                    r.completion as f64 / MIB,
                    (o as f64 - r.completion as f64) / MIB,
                    RSS_SLACK_BYTES >> 20,
                    verdict(pass)
                );
            }
            None => println!(
                "-c {:<27} {:>9} {:>17.1}",
                r.ctx,
                "-",
                r.completion as f64 / MIB
            ),
        }
    }
    println!(
        "llama-bench peak RSS (its own context of {} cells): {:.1} MiB",
        PROMPT_TOKENS + GEN_TOKENS,
        median_u64(bench.iter().map(|s| s.rss)) as f64 / MIB
    );
    if let Some(reported) = ours.iter().filter_map(|s| s.reported_rss).max() {
        println!(
            "headroom's own peak_rss_bytes (largest reported at -c {SPEED_CTX}): {:.1} MiB",
            reported as f64 / MIB
        );
    }
    println!(
        "\ntotal benchmark time {:.1} s; 1-minute load average {} before, {} after",
        started.elapsed().as_secs_f64(),
        load_before.map_or_else(|| "?".into(), |l| format!("{l:.2}")),
        load_average().map_or_else(|| "?".into(), |l| format!("{l:.2}"))
    );
    Ok(match (has_runner, all_pass) {
        (false, _) => Outcome::NoRunner,
        (true, true) => Outcome::Pass,
        (true, false) => Outcome::Miss,
    })
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

/// One measured run of any of the three programs.
#[derive(Clone, Copy)]
struct Sample {
    prompt: f64,
    decode: f64,
    /// Peak RSS from `wait4`, bytes.
    rss: u64,
    /// What the program said its own peak was (headroom's JSON), bytes.
    reported_rss: Option<u64>,
}

/// Median throughputs of several runs.
#[derive(Clone, Copy)]
struct Speeds {
    prompt: f64,
    decode: f64,
}

impl Speeds {
    fn median(samples: &[Sample]) -> Self {
        Self {
            prompt: median_f64(samples.iter().map(|s| s.prompt)),
            decode: median_f64(samples.iter().map(|s| s.decode)),
        }
    }
}

struct RssRow {
    ctx: u32,
    headroom: Option<u64>,
    completion: u64,
}

/// The settings every program gets for one run.
#[derive(Clone, Copy)]
struct Job<'a> {
    model: &'a Path,
    prompt: &'a str,
    threads: usize,
    ctx: u32,
}

impl Job<'_> {
    /// The flags llama-completion and `headroom run` share (llama.cpp's names).
    fn common_args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec!["-p".into(), self.prompt.into()];
        for (flag, value) in [
            ("-n", GEN_TOKENS.to_string()),
            ("--temp", "0".into()),
            ("-t", self.threads.to_string()),
            ("-c", self.ctx.to_string()),
            ("-b", BATCH.to_string()),
            ("-ub", UBATCH.to_string()),
        ] {
            a.push(flag.into());
            a.push(value.into());
        }
        a.push("--ignore-eos".into());
        a
    }
}

/// The llama.cpp tools built by `scripts/llama-tools.sh`.
struct Tools {
    bench: PathBuf,
    completion: PathBuf,
}

impl Tools {
    fn locate() -> Result<Self> {
        if let (Some(b), Some(c)) = (
            std::env::var_os("LLAMA_BENCH_BIN"),
            std::env::var_os("LLAMA_COMPLETION_BIN"),
        ) {
            return Ok(Self {
                bench: b.into(),
                completion: c.into(),
            });
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/llama-tools.sh");
        let out = Command::new("bash")
            .arg(&script)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .with_context(|| format!("running {}", script.display()))?;
        ensure!(
            out.status.success(),
            "{} failed ({})",
            script.display(),
            out.status
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
        match (lines.next(), lines.next()) {
            (Some(b), Some(c)) => Ok(Self {
                bench: b.into(),
                completion: c.into(),
            }),
            _ => bail!("{} printed no tool paths: {text:?}", script.display()),
        }
    }

    /// One `llama-bench` run: `-p 64` and `-n 128` once each (`-r 1`), after
    /// its own warm-up.
    fn bench(&self, job: &Job) -> Result<Sample> {
        let mut cmd = Command::new(&self.bench);
        cmd.arg("-m").arg(job.model);
        cmd.args([
            "-p",
            &PROMPT_TOKENS.to_string(),
            "-n",
            &GEN_TOKENS.to_string(),
        ]);
        cmd.args(["-t", &job.threads.to_string()]);
        cmd.args(["-b", &BATCH.to_string(), "-ub", &UBATCH.to_string()]);
        cmd.args(["-r", "1", "-o", "json"]);
        let out = measure(cmd)?;
        let tests: Vec<Value> =
            serde_json::from_str(&out.stdout).context("llama-bench printed no JSON array")?;
        let rate = |key: &str, n: usize| -> Result<f64> {
            tests
                .iter()
                .find(|t| t[key].as_u64() == Some(n as u64))
                .and_then(|t| t["avg_ts"].as_f64())
                .with_context(|| format!("llama-bench JSON has no {key} = {n} test"))
        };
        Ok(Sample {
            prompt: rate("n_prompt", PROMPT_TOKENS)?,
            decode: rate("n_gen", GEN_TOKENS)?,
            rss: out.max_rss,
            reported_rss: None,
        })
    }

    /// One `llama-completion` run on the same text and flags as headroom.
    fn completion(&self, job: &Job) -> Result<Sample> {
        let mut cmd = Command::new(&self.completion);
        cmd.arg("-m").arg(job.model);
        cmd.args(job.common_args());
        cmd.args(["-no-cnv", "--no-display-prompt", "--simple-io"]);
        let out = measure(cmd)?;
        let perf = CompletionPerf::parse(&out.stderr)?;
        ensure!(
            perf.prompt_tokens == PROMPT_TOKENS,
            "llama-completion evaluated a {}-token prompt, not {PROMPT_TOKENS}",
            perf.prompt_tokens
        );
        Ok(Sample {
            prompt: perf.prompt,
            decode: perf.decode,
            rss: out.max_rss,
            reported_rss: None,
        })
    }
}

/// llama-completion's closing timings (`common_perf_print` on stderr).
#[derive(Debug, PartialEq)]
struct CompletionPerf {
    prompt_tokens: usize,
    prompt: f64,
    decode: f64,
}

impl CompletionPerf {
    /// Reads lines such as
    /// `prompt eval time = 78.56 ms / 64 tokens ( 1.51 ms per token, 661.96 tokens per second)` and
    /// `eval time = 1502.20 ms / 127 runs ( 11.83 ms per token, 84.54 tokens per second)`.
    fn parse(stderr: &str) -> Result<Self> {
        let per_second = |line: &str| -> Option<f64> {
            let before = line.split("tokens per second").next()?;
            before.rsplit([',', '(']).next()?.trim().parse().ok()
        };
        let prompt_line = stderr
            .lines()
            .find(|l| l.contains("prompt eval time ="))
            .context("llama-completion printed no `prompt eval time` line")?;
        let eval_line = stderr
            .lines()
            .find(|l| l.contains(" eval time =") && !l.contains("prompt eval"))
            .context("llama-completion printed no `eval time` line")?;
        let prompt_tokens = prompt_line
            .split('/')
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("no token count in {prompt_line:?}"))?;
        Ok(Self {
            prompt_tokens,
            prompt: per_second(prompt_line)
                .with_context(|| format!("no rate in {prompt_line:?}"))?,
            decode: per_second(eval_line).with_context(|| format!("no rate in {eval_line:?}"))?,
        })
    }
}

/// Whether this build has `headroom run` (it is being written beside this
/// benchmark; until it lands only llama.cpp is measured).
fn runner_available(headroom: &Path) -> bool {
    Command::new(headroom)
        .args(["run", "--help"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// One `headroom run --raw --json` with the job's settings.
fn headroom_run(headroom: &Path, job: &Job) -> Result<Sample> {
    let mut cmd = Command::new(headroom);
    cmd.arg("run").arg(job.model).arg("--raw");
    cmd.args(job.common_args());
    cmd.arg("--json");
    let out = measure(cmd)?;
    let v: Value = serde_json::from_str(&out.stdout)
        .with_context(|| format!("`headroom run --json` printed no JSON: {:?}", out.stdout))?;
    let num = |key: &str| -> Result<f64> {
        v[key]
            .as_f64()
            .with_context(|| format!("`headroom run --json` has no number {key:?}"))
    };
    let prompt_tokens = num("tokens_prompt")?;
    ensure!(
        prompt_tokens == PROMPT_TOKENS as f64,
        "headroom evaluated a {prompt_tokens}-token prompt, not {PROMPT_TOKENS}"
    );
    let generated = num("tokens_generated")?;
    ensure!(
        generated == GEN_TOKENS as f64,
        "headroom generated {generated} tokens, not {GEN_TOKENS} (--ignore-eos)"
    );
    Ok(Sample {
        prompt: num("prompt_tokens_per_s")?,
        decode: num("decode_tokens_per_s")?,
        rss: out.max_rss,
        reported_rss: v["peak_rss_bytes"].as_u64(),
    })
}

/// What a finished child left: its output and its own peak RSS.
struct Measured {
    stdout: String,
    stderr: String,
    max_rss: u64,
}

/// Runs `cmd` to completion and reaps it with `wait4`, whose `rusage` is that
/// child's alone (`getrusage(RUSAGE_CHILDREN)` would be the maximum over every
/// child so far). Fails on a non-zero exit, with the tail of its stderr.
fn measure(mut cmd: Command) -> Result<Measured> {
    let shown = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {shown}"))?;
    // Drain both pipes while the child runs, so a full pipe never blocks it.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let mut bytes = Vec::new();
                // A read error only truncates what is parsed below.
                let _ = p.read_to_end(&mut bytes);
                text = String::from_utf8_lossy(&bytes).into_owned();
            }
            text
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let pid = libc::pid_t::try_from(child.id()).context("child pid out of range")?;
    let (status, usage) = wait4(pid).with_context(|| format!("waiting for {shown}"))?;
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!(
            "{shown} failed (wait status {status:#x}):\n{}",
            tail.join("\n")
        );
    }
    // Linux reports ru_maxrss in KiB.
    let max_rss = u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024;
    Ok(Measured {
        stdout,
        stderr,
        max_rss,
    })
}

fn wait4(pid: libc::pid_t) -> Result<(libc::c_int, libc::rusage)> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data; all-zero is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both pointers are to live locals of the right types; `pid`
        // is our own unreaped child (std's `Child` never waited for it).
        let r = unsafe { libc::wait4(pid, &raw mut status, 0, &raw mut usage) };
        if r == pid {
            return Ok((status, usage));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e).context("wait4");
        }
    }
}

/// A raw text that tokenizes (with BOS, as llama-completion and `headroom run
/// --raw` tokenize it) to exactly `n` tokens for this model's vocabulary:
/// common words are added one at a time, and a word that would overshoot is
/// swapped for the next candidate.
fn prompt_of_exactly(model: &Path, n: usize) -> Result<String> {
    use llama_cpp_2::model::LlamaModel;
    use llama_cpp_2::model::params::LlamaModelParams;

    llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default().with_logs_enabled(false));
    let backend = headroom::llama::backend::shared()
        .context("llama.cpp's backend was initialised elsewhere")?;
    let params = LlamaModelParams::default().with_vocab_only(true);
    let m = LlamaModel::load_from_file(backend, model, &params)
        .with_context(|| format!("loading {}'s vocabulary", model.display()))?;
    let count = |text: &str| m.vocab().tokenize(text.as_bytes(), true, true).len();

    const WORDS: &[&str] = &[
        "the",
        "model",
        "reads",
        "a",
        "long",
        "story",
        "about",
        "rivers",
        "and",
        "mountains",
        "in",
        "early",
        "spring",
        "while",
        "people",
        "walk",
        "to",
        "work",
        "on",
        "quiet",
        "roads",
    ];
    let mut text = String::new();
    let mut tries = 0;
    let mut i = 0;
    while count(&text) < n {
        ensure!(
            tries < 100 * n,
            "no {n}-token prompt found for {}",
            model.display()
        );
        tries += 1;
        let word = WORDS[i % WORDS.len()];
        i += 1;
        let candidate = if text.is_empty() {
            word.to_string()
        } else {
            format!("{text} {word}")
        };
        if count(&candidate) <= n {
            text = candidate;
        }
    }
    Ok(text)
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

/// (max − min) / median: how far runs of one program drifted.
fn spread(values: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = values.collect();
    let (lo, hi) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    (hi - lo) / median_f64(v.iter().copied()).max(1e-9)
}

/// The 1-minute load average (`/proc/loadavg`), where Linux provides it: a
/// busy machine makes every speed ratio noisy, and the table should say so.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
