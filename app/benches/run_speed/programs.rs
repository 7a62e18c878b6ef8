//! The three programs under test and how each is asked for, and read back,
//! the same work: `llama-bench`, `llama-completion` and `headroom run`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, ensure};
use serde_json::Value;

use crate::child::measure;
use crate::{BATCH, GEN_TOKENS, PROMPT_TOKENS, UBATCH};

/// The settings every program gets for one run.
#[derive(Clone, Copy)]
pub struct Job<'a> {
    pub model: &'a Path,
    pub prompt: &'a str,
    pub threads: usize,
    pub ctx: u32,
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

/// One measured run of any of the three programs.
#[derive(Clone, Copy)]
pub struct Sample {
    /// Prompt processing, tokens/s.
    pub prompt: f64,
    /// Generation, tokens/s.
    pub decode: f64,
    /// Peak RSS from `wait4`, bytes.
    pub rss: u64,
    /// What the program said its own peak was (headroom's JSON), bytes.
    pub reported_rss: Option<u64>,
    /// headroom's own decode estimate for the run (`planned` in its JSON),
    /// tokens/s.
    pub estimate: Option<f64>,
}

/// The llama.cpp tools built by `scripts/llama-tools.sh`.
pub struct Tools {
    bench: PathBuf,
    completion: PathBuf,
}

impl Tools {
    /// `LLAMA_BENCH_BIN` and `LLAMA_COMPLETION_BIN` when both are set, else
    /// what `scripts/llama-tools.sh` builds (or finds already built).
    pub fn locate() -> Result<Self> {
        if let (Some(b), Some(c)) = (
            std::env::var_os("LLAMA_BENCH_BIN"),
            std::env::var_os("LLAMA_COMPLETION_BIN"),
        ) {
            return Ok(Self {
                bench: b.into(),
                completion: c.into(),
            });
        }
        let tools = crate::common::llama_tools()?;
        Ok(Self {
            bench: tools[0].clone(),
            completion: tools[1].clone(),
        })
    }

    /// One `llama-bench` run: `-p 64` and `-n 128` once each (`-r 1`), each
    /// after llama-bench's own warm-up. Its context is sized by llama-bench
    /// itself (prompt + generated tokens).
    pub fn bench(&self, job: &Job) -> Result<Sample> {
        let mut cmd = Command::new(&self.bench);
        cmd.arg("-m").arg(job.model);
        cmd.args(["-p", &PROMPT_TOKENS.to_string()]);
        cmd.args(["-n", &GEN_TOKENS.to_string()]);
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
                .with_context(|| format!("llama-bench's JSON has no test with {key} = {n}"))
        };
        Ok(Sample {
            prompt: rate("n_prompt", PROMPT_TOKENS)?,
            decode: rate("n_gen", GEN_TOKENS)?,
            rss: out.max_rss,
            reported_rss: None,
            estimate: None,
        })
    }

    /// One `llama-completion` run on the same text and flags as headroom.
    pub fn completion(&self, job: &Job) -> Result<Sample> {
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
            estimate: None,
        })
    }
}

/// llama-completion's closing timings (`common_perf_print` on stderr).
struct CompletionPerf {
    prompt_tokens: usize,
    prompt: f64,
    decode: f64,
}

impl CompletionPerf {
    /// Reads lines such as
    /// `prompt eval time = 78.56 ms / 64 tokens ( 1.51 ms per token, 661.96 tokens per second)`
    /// and `eval time = 1502.20 ms / 127 runs ( 11.83 ms per token, 84.54 tokens per second)`.
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

/// Whether this build has `headroom run` (written beside this benchmark;
/// until it lands only llama.cpp is measured).
pub fn runner_available(headroom: &Path) -> bool {
    Command::new(headroom)
        .args(["run", "--help"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// One `headroom run --raw --json` with the job's settings; checks that it
/// really evaluated the 64-token prompt and generated 128 tokens. With
/// `first_in`, a folder, the run is a first run on a new machine: an empty
/// data directory (no earlier run calibrates its estimate) and an empty
/// cache (the RAM bandwidth is measured anew) inside it.
pub fn headroom_run(headroom: &Path, job: &Job, first_in: Option<&Path>) -> Result<Sample> {
    let mut cmd = Command::new(headroom);
    if let Some(dir) = first_in {
        cmd.env("HEADROOM_DATA_DIR", dir.join("data"));
        cmd.env("HEADROOM_CACHE_DIR", dir.join("cache"));
    }
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
        estimate: v["planned"]["decode_tokens_per_s"].as_f64(),
    })
}

/// A raw text that tokenizes (with BOS, as llama-completion and `headroom run
/// --raw` tokenize it) to exactly `n` tokens in this model's vocabulary:
/// words are added one at a time, and a word that would overshoot is skipped
/// for the next.
pub fn prompt_of_exactly(model: &Path, n: usize) -> Result<String> {
    use llama_cpp_2::model::LlamaModel;
    use llama_cpp_2::model::params::LlamaModelParams;

    const WORDS: &str = "the model reads a long story about rivers and mountains in early \
                         spring while people walk to work on quiet roads";
    let words: Vec<&str> = WORDS.split_whitespace().collect();

    llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default().with_logs_enabled(false));
    let backend = headroom::llama::backend::shared()
        .context("llama.cpp's backend was initialised elsewhere")?;
    let params = LlamaModelParams::default().with_vocab_only(true);
    let m = LlamaModel::load_from_file(backend, model, &params)
        .with_context(|| format!("loading {}'s vocabulary", model.display()))?;
    let count = |text: &str| m.vocab().tokenize(text.as_bytes(), true, true).len();

    let mut text = String::new();
    for (tries, word) in words.iter().cycle().enumerate() {
        if count(&text) >= n {
            break;
        }
        ensure!(
            tries < 100 * n,
            "no {n}-token prompt found for {}",
            model.display()
        );
        let candidate = if text.is_empty() {
            (*word).to_string()
        } else {
            format!("{text} {word}")
        };
        if count(&candidate) <= n {
            text = candidate;
        }
    }
    ensure!(
        count(&text) == n,
        "no {n}-token prompt found for {}",
        model.display()
    );
    Ok(text)
}
