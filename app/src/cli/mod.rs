//! Command-line definitions: what the user typed (clap structs), and their
//! conversion into validated planner values before any work starts;
//! llama.cpp's flag spelling ([`flags`]) and the log setup ([`logging`]).
//!
//! Options that every model command shares (context, batch, GPU layers, cache
//! types, hardware overrides) are defined once here and flattened into each
//! subcommand, so `plan`, `run` and `chat` cannot drift apart.

mod flags;
mod logging;

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
pub use flags::rewrite_llama_flags;
pub use logging::init_logging;

use clap::builder::TypedValueParser as _;
use clap::{Args, Parser, Subcommand};
use headroom_planner::gguf::GgmlType;
use headroom_planner::hw::{self, Overrides};
use headroom_planner::plan::{FlashAttn, FrontEnd, Settings};
pub use headroom_planner::slots::Parallel;

/// headroom: know before you load whether a model fits.
#[derive(Debug, Parser)]
#[command(name = "headroom", version, about, long_about = None)]
pub struct Cli {
    /// Plan for another machine (these apply to every command).
    #[command(flatten)]
    pub machine: MachineArgs,
    /// More log output (-v: info, -vv: debug, including llama.cpp's own log).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Plan how a model loads on this machine: memory per device (CPU, GPUs, --rpc workers), verdict, speed, llama.cpp flags.
    Plan(PlanArgs),
    /// Run one prompt (from -p, -f or standard input) and stream the answer to stdout
    /// (a thinking model's reasoning to stderr).
    Run(RunArgs),
    /// Chat in the terminal, with memory use and the context always in view.
    Chat(ChatArgs),
    /// Serve the model over an OpenAI-compatible HTTP API, with planned slots and a bounded queue.
    Serve(ServeArgs),
    /// Show the detected hardware (RAM, cgroup and process limits, GPUs, CPU); --gpus lists the known GPUs.
    Hw(HwArgs),
    /// Print llama.cpp's own memory accounting for a model (a no_alloc load: no weights are read).
    #[command(name = "llama-accounting")]
    LlamaAccounting(LlamaAccountingArgs),
    /// Rank the catalog's models for this machine (or --ram/--vram/--gpu/--hw), or lay out every quantization of one.
    Fit(FitArgs),
    /// Print the path of a demo model (`demo`: SmolLM2 135M Instruct; `demo-base`: Gemma 3 270M), fetching and verifying it first if needed.
    #[command(name = "demo-model")]
    DemoModel(DemoModelArgs),
    /// Download a model from Hugging Face (org/repo[:QUANT]); without QUANT the planner picks it for this machine.
    Pull(PullArgs),
    /// List the models on disk (Hugging Face cache, --models-dir) and whether each fits here.
    List(ListArgs),
    /// The model catalog: `catalog refresh` verifies entries against the hub.
    Catalog(CatalogArgs),
    /// Print a shell completion script (e.g. `headroom completions bash > ~/.local/share/bash-completion/completions/headroom`).
    Completions(CompletionsArgs),
    /// Measure one GPU-type device's speed (internal: started by headroom
    /// itself, in a child process, at a device's first use).
    #[command(name = "probe-device", hide = true)]
    ProbeDevice(ProbeDeviceArgs),
}

/// `headroom probe-device` (hidden).
#[derive(Debug, Args)]
pub struct ProbeDeviceArgs {
    /// llama.cpp's name of the device (`Vulkan0`).
    #[arg(value_name = "NAME")]
    pub name: String,
}

/// `headroom demo-model`.
#[derive(Debug, Args)]
pub struct DemoModelArgs {
    /// Which demo model.
    #[arg(value_name = "NAME", default_value = "demo", value_parser = ["demo", "demo-base"])]
    pub name: String,
}

/// `headroom completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// The whole command line as clap knows it (for completions).
#[must_use]
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// Hardware overrides shared by every command.
#[derive(Debug, Clone, Default, Args)]
pub struct MachineArgs {
    /// Plan as if the machine had this much RAM available (e.g. 2GiB, 512MiB).
    #[arg(long, global = true, value_name = "SIZE")]
    pub ram: Option<String>,
    /// GPU memory per GPU, comma-separated (e.g. 8GiB or 24GiB,24GiB); 0 for no GPU. Bandwidth is assumed (a mid-range card's): name the card with --gpu instead.
    #[arg(long, global = true, value_name = "SIZE[,SIZE…]")]
    pub vram: Option<String>,
    /// Plan for these GPUs, comma-separated (e.g. rtx4060, "RTX 4060 Ti 16GB", "RTX 3090,RTX 3090", "M4 Max 64GB"): their memory, bandwidth and FP16 from `headroom hw --gpus`. Not with --vram. An Apple chip or Strix Halo is the machine's RAM too, unless --ram says otherwise.
    #[arg(
        long = "gpu",
        global = true,
        value_name = "NAME[,NAME…]",
        conflicts_with = "vram"
    )]
    pub gpu: Option<String>,
    /// A hardware profile (TOML) to plan for instead of this machine.
    #[arg(long = "hw", global = true, value_name = "FILE")]
    pub hw_file: Option<PathBuf>,
    /// llama.cpp RPC workers (`ggml-rpc-server`) to use as devices, comma-separated HOST:PORT. Each is probed (connect and hello, 2 s each), then planned and loaded like a GPU: llama.cpp puts them first and splits the offloaded layers in proportion to the free memory each reports. Loopback only unless --rpc-trust-network.
    #[arg(long, global = true, value_name = "HOST:PORT[,HOST:PORT…]")]
    pub rpc: Option<String>,
    /// What the plan may use on each RPC worker, comma-separated in --rpc's order (default: the free memory it reports, which for a CPU worker is its machine's available RAM, whatever limit the worker runs under).
    #[arg(
        long = "rpc-mem",
        global = true,
        value_name = "SIZE[,SIZE…]",
        requires = "rpc"
    )]
    pub rpc_mem: Option<String>,
    /// The link to the --rpc workers, for the speed estimate: bits per second with a unit (1Gbit, 10Gbit, 2.5Gbit, 100Mbit) or bytes per second (125MB/s, 1GB/s). Default 1Gbit (gigabit Ethernet), shown as assumed.
    #[arg(
        long = "rpc-bandwidth",
        global = true,
        value_name = "RATE",
        requires = "rpc",
        value_parser = parse_link_rate
    )]
    pub rpc_bandwidth: Option<f64>,
    /// Allow --rpc workers that are not on this machine. llama.cpp's RPC protocol has no authentication or encryption: anyone who can reach a worker can make it allocate memory and run graphs, and read what it computes.
    #[arg(long = "rpc-trust-network", global = true, requires = "rpc")]
    pub rpc_trust_network: bool,
}

impl MachineArgs {
    /// The build the plan is for: this binary's backends, or, when planning for
    /// another machine (`--vram`, `--gpu`, `--hw`), a build that can use its GPUs.
    #[must_use]
    pub fn build(&self) -> headroom_planner::solve::Build {
        headroom_planner::solve::Build {
            gpu: crate::llama::gpu_build()
                || self.rpc.is_some()
                || self.vram.is_some()
                || self.gpu.is_some()
                || self.hw_file.is_some(),
        }
    }

    /// `--gpu`: the named cards from the GPU table, in order; `None` when
    /// not given.
    ///
    /// # Errors
    /// An empty entry, or a name that is unknown or ambiguous (the error
    /// lists the close matches).
    pub fn named_gpus(&self) -> Result<Option<Vec<hw::gpus::NamedGpu>>> {
        let Some(list) = self.gpu.as_deref() else {
            return Ok(None);
        };
        let cards = list
            .split(',')
            .map(|name| {
                if name.trim().is_empty() {
                    bail!("--gpu: an empty name in '{list}' (e.g. --gpu rtx4060 or --gpu \"RTX 3090,RTX 3090\")");
                }
                hw::gpus::resolve(name.trim()).context("--gpu")
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(cards))
    }

    /// `--rpc` and `--rpc-mem`: the workers' endpoints, checked (loopback
    /// unless the network is trusted), and each one's budget when given.
    ///
    /// # Errors
    /// A malformed or untrusted address, a size that does not parse, or a
    /// number of sizes other than the number of workers.
    pub fn rpc_workers(&self) -> Result<Option<(Vec<String>, Vec<Option<u64>>)>> {
        let Some(list) = self.rpc.as_deref() else {
            return Ok(None);
        };
        let endpoints = crate::llama::rpc::parse_endpoints(list, self.rpc_trust_network)
            .map_err(|e| anyhow::anyhow!("--rpc: {e}"))?;
        let budgets = match self.rpc_mem.as_deref() {
            None => vec![None; endpoints.len()],
            Some(mem) => {
                let sizes = mem
                    .split(',')
                    .map(|s| hw::parse_size(s.trim()).map(Some))
                    .collect::<Result<Vec<_>, _>>()
                    .context("--rpc-mem")?;
                if sizes.len() != endpoints.len() {
                    bail!(
                        "--rpc-mem: {} sizes for {} workers (one per --rpc worker, in its order)",
                        sizes.len(),
                        endpoints.len()
                    );
                }
                sizes
            }
        };
        Ok(Some((endpoints, budgets)))
    }

    /// Validate into planner overrides.
    ///
    /// # Errors
    /// A size that does not parse.
    pub fn overrides(&self) -> Result<Overrides> {
        let ram_bytes = self
            .ram
            .as_deref()
            .map(hw::parse_size)
            .transpose()
            .context("--ram")?;
        let vram_bytes = match self.vram.as_deref().map(str::trim) {
            None => None,
            Some("0") => Some(Vec::new()),
            Some(list) => {
                let sizes = list
                    .split(',')
                    .map(|s| hw::parse_size(s.trim()))
                    .collect::<Result<Vec<u64>, _>>()
                    .context("--vram")?;
                if sizes.contains(&0) {
                    bail!("--vram: a GPU of 0 bytes in '{list}' (use --vram 0 alone for no GPU)");
                }
                Some(sizes)
            }
        };
        Ok(Overrides {
            ram_bytes,
            vram_bytes,
            profile: self.hw_file.clone(),
        })
    }
}

/// `--flash-attn`: llama.cpp's values, parsed into the planner's one type.
fn flash_attn_parser() -> impl clap::builder::TypedValueParser<Value = FlashAttn> {
    clap::builder::PossibleValuesParser::new(FlashAttn::ALL.map(FlashAttn::as_str))
        .map(|s| s.parse().unwrap_or_default())
}

/// Context and placement options shared by `plan`, `run` and `chat`
/// (llama.cpp's names and defaults).
#[derive(Debug, Clone, Args)]
pub struct ContextArgs {
    /// Context size in tokens (default: at least 4096, grown up to 32768 while it costs no GPU layer).
    #[arg(short = 'c', long = "ctx-size", value_name = "N")]
    pub ctx_size: Option<u32>,
    /// Logical batch size.
    #[arg(
        short = 'b',
        long = "batch-size",
        value_name = "N",
        default_value_t = headroom_planner::plan::DEFAULT_N_BATCH
    )]
    pub batch_size: u32,
    /// Physical batch size (-ub).
    #[arg(long = "ubatch-size", value_name = "N", default_value_t = headroom_planner::plan::DEFAULT_N_UBATCH)]
    pub ubatch_size: u32,
    /// Parallel sequences sharing the context (-np; -c is split between them). `auto` (plan, serve; serve's default): as many 4096-token slots as fit, up to 4, never at the cost of a GPU layer.
    #[arg(long = "parallel", value_name = "N|auto", value_parser = parse_parallel)]
    pub parallel: Option<Parallel>,
    /// Layers to put on the GPU (-ngl); default: as many as fit.
    #[arg(long = "n-gpu-layers", value_name = "N")]
    pub n_gpu_layers: Option<u32>,
    /// KV cache type for K (-ctk): f16, bf16, q8_0, q4_0, …
    #[arg(long = "cache-type-k", value_name = "TYPE", default_value = "f16")]
    pub cache_type_k: String,
    /// KV cache type for V (-ctv).
    #[arg(long = "cache-type-v", value_name = "TYPE", default_value = "f16")]
    pub cache_type_v: String,
    /// Flash attention (-fa).
    #[arg(long = "flash-attn", value_parser = flash_attn_parser(), default_value = "auto")]
    pub flash_attn: FlashAttn,
    /// Full-size cache for sliding-window layers (as llama.cpp's --swa-full).
    #[arg(long = "swa-full")]
    pub swa_full: bool,
    /// Read weights into anonymous memory instead of mapping the file.
    #[arg(long = "no-mmap")]
    pub no_mmap: bool,
    /// Do not repack CPU weights into llama.cpp's CPU_REPACK buffer (plan only: the runner cannot turn repacking off).
    #[arg(long = "no-repack")]
    pub no_repack: bool,
    /// Safety margin: per GPU (default 512MiB) and for RAM (default 5%, at least 128MiB).
    #[arg(long = "margin", value_name = "SIZE")]
    pub margin: Option<String>,
}

impl ContextArgs {
    /// Validate into planner settings.
    ///
    /// # Errors
    /// Out-of-range numbers or an unknown cache type.
    pub fn settings(&self) -> Result<Settings> {
        let cache = |s: &str, flag: &str| -> Result<GgmlType> {
            let ty = GgmlType::from_name(s)
                .with_context(|| format!("{flag}: unknown cache type '{s}'"))?;
            if !headroom_planner::memory::is_valid_cache_type(ty) {
                bail!(
                    "{flag}: '{s}' cannot be used for the KV cache (f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1)"
                );
            }
            Ok(ty)
        };
        if self.batch_size == 0 || self.ubatch_size == 0 {
            bail!("--batch-size and --ubatch-size must be at least 1");
        }
        // llama.cpp's own limits: LLAMA_MAX_SEQ (256) sequences, checked by
        // `parse_parallel`; batches and contexts far beyond any machine's
        // memory are refused here rather than planned with numbers that mean
        // nothing.
        if self.batch_size > 1 << 24 || self.ubatch_size > 1 << 24 {
            bail!("--batch-size and --ubatch-size must be at most 16777216");
        }
        if self.ctx_size.is_some_and(|c| c > 1 << 28) {
            bail!("--ctx-size must be at most 268435456");
        }
        let type_v = cache(&self.cache_type_v, "--cache-type-v")?;
        if type_v.is_quantized() && self.flash_attn == FlashAttn::Off {
            bail!(
                "--cache-type-v {}: a quantized V cache needs flash attention (llama.cpp refuses it with --flash-attn off)",
                self.cache_type_v
            );
        }
        if self.ctx_size == Some(0) {
            bail!(
                "--ctx-size must be at least 1 (0 means the training context in llama.cpp; give it explicitly)"
            );
        }
        Ok(Settings {
            n_ctx: self.ctx_size,
            n_batch: self.batch_size,
            n_ubatch: self.ubatch_size,
            n_parallel: match self.parallel {
                Some(Parallel::Fixed(n)) => n,
                Some(Parallel::Auto) | None => 1,
            },
            n_gpu_layers: self.n_gpu_layers,
            cache_type_k: cache(&self.cache_type_k, "--cache-type-k")?,
            cache_type_v: type_v,
            flash_attn: self.flash_attn,
            swa_full: self.swa_full,
            mmap: !self.no_mmap,
            repack: !self.no_repack,
            margin_bytes: self
                .margin
                .as_deref()
                .map(hw::parse_size)
                .transpose()
                .context("--margin")?,
            front_end: FrontEnd::Cli,
            logits_per_sequence: true,
            embeddings: None,
        })
    }
}

/// `--rpc-bandwidth`: a link speed in bytes/s, from bits per second
/// (`1Gbit`, `100Mbit`, `2.5Gbps`) or bytes per second (`125MB/s`,
/// `1GiB/s`); the number and its prefix are read as `--ram`'s sizes are.
fn parse_link_rate(s: &str) -> Result<f64, String> {
    let lower = s.trim().to_ascii_lowercase();
    let bits = ["bit/s", "bit", "bps"]
        .iter()
        .find_map(|suffix| lower.strip_suffix(suffix));
    let (size, per_second) = match (bits, lower.strip_suffix("/s")) {
        (Some(size), _) => (size, 1.0 / 8.0),
        (None, Some(size)) => (size, 1.0),
        (None, None) => {
            return Err(format!(
                "'{s}': a rate in bits (1Gbit, 100Mbit) or bytes per second (125MB/s)"
            ));
        }
    };
    let bytes = hw::parse_size(size).map_err(|e| format!("'{s}': {e}"))?;
    #[allow(clippy::cast_precision_loss)]
    let rate = bytes as f64 * per_second;
    if rate > 0.0 {
        Ok(rate)
    } else {
        Err(format!("'{s}': a link speed above zero"))
    }
}

/// `--parallel N|auto` (1 to 256 sequences: llama.cpp's LLAMA_MAX_SEQ).
fn parse_parallel(s: &str) -> Result<Parallel, String> {
    s.parse::<Parallel>().map_err(|e| e.to_string())
}

impl ContextArgs {
    /// `--parallel` as given, or `default` when it was not.
    #[must_use]
    pub fn parallel_or(&self, default: Parallel) -> Parallel {
        self.parallel.unwrap_or(default)
    }
}

/// `headroom plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// GGUF files or directories of them (several: choose the best quantization); `demo` or nothing: the instruct demo model; `demo-base`: the base one.
    #[arg(value_name = "MODEL")]
    pub models: Vec<String>,
    /// Context and placement options.
    #[command(flatten)]
    pub ctx: ContextArgs,
    /// Print the plan as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Draw how each device's memory grows with context against its budget.
    #[arg(long)]
    pub curve: bool,
    /// Logits rows to plan for.
    #[command(flatten)]
    pub logits: LogitsArg,
}

/// `--logits`: which logits reservation to plan (`plan`) or account
/// (`llama-accounting`) for.
#[derive(Debug, Clone, Args)]
pub struct LogitsArg {
    /// Logits rows llama.cpp reserves: `sequence`, one per sequence (headroom's runner, llama-server); `batch`, one per token of the physical batch, n_vocab × ubatch × 4 bytes (llama.cpp's default: llama-completion, llama-fit-params). The printed llama.cpp command names the tool that matches.
    #[arg(long = "logits", value_name = "ROWS", value_parser = ["sequence", "batch"], default_value = "sequence")]
    logits: String,
}

impl LogitsArg {
    /// Whether one row per sequence was asked for (the planner's
    /// [`Settings::logits_per_sequence`]).
    #[must_use]
    pub fn per_sequence(&self) -> bool {
        self.logits != "batch"
    }
}

/// Generation options shared by `run` and `chat` (llama.cpp's names and defaults).
#[derive(Debug, Clone, Args)]
pub struct GenArgs {
    /// Temperature; 0 is greedy and deterministic.
    #[arg(
        long,
        value_name = "T",
        default_value_t = crate::runner::Sampling::DEFAULT.temp,
        allow_negative_numbers = true
    )]
    pub temp: f32,
    /// Top-k sampling (0 = off).
    #[arg(
        long = "top-k",
        value_name = "N",
        default_value_t = crate::runner::Sampling::DEFAULT.top_k,
        allow_negative_numbers = true
    )]
    pub top_k: i32,
    /// Top-p (nucleus) sampling (1.0 = off).
    #[arg(
        long = "top-p",
        value_name = "P",
        default_value_t = crate::runner::Sampling::DEFAULT.top_p,
        allow_negative_numbers = true
    )]
    pub top_p: f32,
    /// Min-p sampling (0.0 = off).
    #[arg(
        long = "min-p",
        value_name = "P",
        default_value_t = crate::runner::Sampling::DEFAULT.min_p,
        allow_negative_numbers = true
    )]
    pub min_p: f32,
    /// Penalty for repeating the last --repeat-last-n tokens (1.0 = off).
    #[arg(
        long = "repeat-penalty",
        value_name = "X",
        default_value_t = crate::runner::Sampling::DEFAULT.repeat_penalty,
        allow_negative_numbers = true
    )]
    pub repeat_penalty: f32,
    /// Tokens the repeat penalty looks back over.
    #[arg(
        long = "repeat-last-n",
        value_name = "N",
        default_value_t = crate::runner::Sampling::DEFAULT.repeat_last_n,
        allow_negative_numbers = true
    )]
    pub repeat_last_n: i32,
    /// Random seed (default: a random one).
    #[arg(long, value_name = "N")]
    pub seed: Option<u32>,
    /// Tokens to generate at most (default: until the model ends its turn or the context is full).
    #[arg(short = 'n', long = "n-predict", value_name = "N")]
    pub n_predict: Option<u32>,
    /// Keep generating past the model's end-of-generation tokens.
    #[arg(long = "ignore-eos")]
    pub ignore_eos: bool,
    /// CPU threads (default: the physical cores).
    #[arg(short = 't', long, value_name = "N")]
    pub threads: Option<u32>,
    /// Stop when the output contains this text (repeatable; not printed).
    #[arg(long, value_name = "TEXT")]
    pub stop: Vec<String>,
    /// Chat template: a llama.cpp built-in name (chatml, llama3, gemma, …) or a Jinja file.
    #[arg(long = "chat-template", value_name = "NAME|FILE")]
    pub chat_template: Option<String>,
    /// System prompt.
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// Load even when the plan says it does not fit.
    #[arg(long)]
    pub force: bool,
    /// Ask the kernel's OOM killer to prefer (positive) or spare (negative, needs privileges) this process: -1000…1000.
    #[arg(
        long = "oom-score-adj",
        value_name = "N",
        allow_negative_numbers = true
    )]
    pub oom_score_adj: Option<i32>,
}

impl GenArgs {
    /// Validate into generation options.
    ///
    /// # Errors
    /// Out-of-range values.
    pub fn options(&self) -> Result<crate::runner::GenOptions> {
        if !self.temp.is_finite() || self.temp < 0.0 {
            bail!("--temp must be 0 or more");
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            bail!("--top-p must be in (0, 1]");
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            bail!("--min-p must be in [0, 1]");
        }
        if !self.repeat_penalty.is_finite() || self.repeat_penalty <= 0.0 {
            bail!("--repeat-penalty must be more than 0");
        }
        if self.top_k < 0 || self.repeat_last_n < -1 {
            bail!("--top-k must be 0 or more, --repeat-last-n -1 or more");
        }
        if self
            .oom_score_adj
            .is_some_and(|n| !(-1000..=1000).contains(&n))
        {
            bail!("--oom-score-adj must be between -1000 and 1000");
        }
        if self.threads == Some(0) {
            bail!("--threads must be at least 1");
        }
        Ok(crate::runner::GenOptions {
            sampling: crate::runner::Sampling {
                temp: self.temp,
                top_k: self.top_k,
                top_p: self.top_p,
                min_p: self.min_p,
                repeat_penalty: self.repeat_penalty,
                repeat_last_n: self.repeat_last_n,
                seed: self.seed.unwrap_or(crate::runner::DEFAULT_SEED),
            },
            n_predict: self.n_predict,
            ignore_eos: self.ignore_eos,
            stop: self.stop.clone(),
            grammar: None,
            grammar_triggers: Vec::new(),
        })
    }
}

/// `headroom run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// GGUF file; `demo` or nothing: the instruct demo model; `demo-base`: the base one.
    #[arg(value_name = "MODEL")]
    pub model: Option<String>,
    /// The prompt.
    #[arg(short = 'p', long, value_name = "TEXT", conflicts_with = "file")]
    pub prompt: Option<String>,
    /// Read the prompt from a file.
    #[arg(short = 'f', long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Send the text as it is, without the chat template.
    #[arg(long)]
    pub raw: bool,
    /// Print one JSON object (text, token counts, speeds, planned and measured memory) instead of the text.
    #[arg(long)]
    pub json: bool,
    /// Context and placement options.
    #[command(flatten)]
    pub ctx: ContextArgs,
    /// Generation options.
    #[command(flatten)]
    pub sampling: GenArgs,
}

/// `headroom chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// GGUF file; `demo` or nothing: the instruct demo model; `demo-base`: the base one.
    #[arg(value_name = "MODEL")]
    pub model: Option<String>,
    /// Context and placement options.
    #[command(flatten)]
    pub ctx: ContextArgs,
    /// Generation options.
    #[command(flatten)]
    pub sampling: GenArgs,
}

/// `headroom serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// GGUF file; `demo` or nothing: the instruct demo model; `demo-base`: the base one.
    #[arg(value_name = "MODEL")]
    pub model: Option<String>,
    /// Address to listen on (only loopback unless you mean it: the API has no TLS).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0: any free port, printed at startup).
    #[arg(long, value_name = "N", default_value_t = 8080)]
    pub port: u16,
    /// Requests that may wait for a slot (default: 4 per slot); more get HTTP 503 with Retry-After.
    #[arg(long = "max-queue", value_name = "N")]
    pub max_queue: Option<usize>,
    /// Largest request body; larger ones get HTTP 413.
    #[arg(long = "max-body", value_name = "SIZE", default_value = "4MiB")]
    pub max_body: String,
    /// Require `Authorization: Bearer KEY` on every route but /health.
    #[arg(
        long = "api-key",
        value_name = "KEY",
        env = "HEADROOM_API_KEY",
        hide_env_values = true
    )]
    pub api_key: Option<String>,
    /// CPU threads (default: the physical cores).
    #[arg(short = 't', long, value_name = "N")]
    pub threads: Option<u32>,
    /// Chat template: a llama.cpp built-in name (chatml, llama3, gemma, …) or a Jinja file.
    #[arg(long = "chat-template", value_name = "NAME|FILE")]
    pub chat_template: Option<String>,
    /// Thinking in `<think>` tags (templates that mention them): `auto`/`deepseek` put it in `reasoning_content`, `none` leaves it in `content` (a request's `reasoning_format` can turn it off too).
    #[arg(long = "reasoning-format", value_name = "FORMAT", default_value = "auto", value_parser = ["auto", "deepseek", "none"])]
    pub reasoning_format: String,
    /// Top-k for every request (OpenAI's API has no such field; 0 = off).
    #[arg(long = "top-k", value_name = "N", default_value_t = crate::runner::Sampling::DEFAULT.top_k)]
    pub top_k: i32,
    /// Min-p for every request (0.0 = off).
    #[arg(long = "min-p", value_name = "P", default_value_t = crate::runner::Sampling::DEFAULT.min_p)]
    pub min_p: f32,
    /// Serve /v1/embeddings from a second context of TOKENS (the longest input; 512 when no value is given), planned beside the slots.
    #[arg(long, value_name = "TOKENS", num_args = 0..=1, default_missing_value = "512")]
    pub embeddings: Option<u32>,
    /// Load even when the plan says it does not fit.
    #[arg(long)]
    pub force: bool,
    /// Context and placement options.
    #[command(flatten)]
    pub ctx: ContextArgs,
}

/// `headroom fit`.
#[derive(Debug, Args)]
pub struct FitArgs {
    /// A catalog id: every quantization of that model side by side (default: rank the whole catalog).
    #[arg(value_name = "MODEL")]
    pub model: Option<String>,
    /// Only models with this use tag: chat, code, reasoning, small, moe, long-context, vision, base (repeatable: all of them). The first also sets the purpose: code (20 tok/s floor, 32k context), reasoning (15 tok/s, 16k), else chat (10 tok/s).
    #[arg(long = "use", value_name = "USE")]
    pub uses: Vec<String>,
    /// The decode speed a model must reach to rank among the usable ones, tokens/s (default: the purpose's).
    #[arg(long = "min-speed", value_name = "TOK/S")]
    pub min_speed: Option<f64>,
    /// Also list models whose successor is usable on this machine.
    #[arg(long)]
    pub all: bool,
    /// Only models trained for at least N tokens of context, each planned at N.
    #[arg(long = "min-ctx", value_name = "N")]
    pub min_ctx: Option<u32>,
    /// Only quantizations at most this large to download (e.g. 8GB, 6GiB).
    #[arg(long = "max-download", value_name = "SIZE")]
    pub max_download: Option<String>,
    /// Show only the first N models.
    #[arg(long = "top", value_name = "N")]
    pub top: Option<usize>,
    /// A catalog file to use instead of the built-in models.toml.
    #[arg(long, value_name = "FILE", env = "HEADROOM_CATALOG")]
    pub catalog: Option<PathBuf>,
    /// Print JSON: an array with one object per model (with MODEL: one object with every quantization).
    #[arg(long)]
    pub json: bool,
    /// Context and placement options (every model is planned with them).
    #[command(flatten)]
    pub ctx: ContextArgs,
}

/// `headroom hw`.
#[derive(Debug, Args)]
pub struct HwArgs {
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
    /// List the known GPUs instead (the names --gpu takes): memory, bandwidth, FP16, source.
    #[arg(long)]
    pub gpus: bool,
}

/// `headroom llama-accounting`.
#[derive(Debug, Args)]
pub struct LlamaAccountingArgs {
    /// GGUF file (`demo` or nothing: the instruct demo model; `demo-base`: the base one).
    #[arg(value_name = "MODEL")]
    pub model: Option<String>,
    /// Context and placement options.
    #[command(flatten)]
    pub ctx: ContextArgs,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
    /// Logits rows to account for.
    #[command(flatten)]
    pub logits: LogitsArg,
}

/// `headroom pull`.
#[derive(Debug, Args)]
pub struct PullArgs {
    /// org/repo[:QUANT], hf.co/org/repo[:QUANT], org/repo:FILE.gguf, or a catalog id[:QUANT].
    #[arg(value_name = "MODEL")]
    pub model: String,
    /// Plan and choose, print what would be downloaded, download nothing.
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// Print one JSON object (the choice, why, the plan, the path) instead of the path.
    #[arg(long)]
    pub json: bool,
    /// Context and placement options (the choice is planned with them).
    #[command(flatten)]
    pub ctx: ContextArgs,
}

/// `headroom list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Also list the GGUF files in this folder (repeatable).
    #[arg(long = "models-dir", value_name = "DIR")]
    pub models_dir: Vec<PathBuf>,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
    /// Context and placement options (each model is planned with them).
    #[command(flatten)]
    pub ctx: ContextArgs,
}

/// `headroom catalog`.
#[derive(Debug, Args)]
pub struct CatalogArgs {
    /// What to do with the catalog.
    #[command(subcommand)]
    pub command: CatalogCommand,
}

/// `headroom catalog` subcommands.
#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Read each entry's files on the hub (listing and GGUF header, no weights) and record them as verified.
    Refresh(RefreshArgs),
}

/// `headroom catalog refresh`.
#[derive(Debug, Args)]
pub struct RefreshArgs {
    /// Catalog ids or org/repo[:QUANT] (default: the whole catalog).
    #[arg(value_name = "MODEL")]
    pub models: Vec<String>,
}

/// Parse (already rewritten) arguments.
///
/// # Errors
/// clap's error, which knows how to print itself and its exit code.
pub fn parse(args: Vec<OsString>) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn multi_letter_flags_become_long_flags() {
        let out = rewrite_llama_flags(strs(&[
            "headroom", "plan", "m.gguf", "-ngl", "20", "-fa=off", "-ctk", "q8_0", "--", "-np",
        ]));
        assert_eq!(
            out,
            strs(&[
                "headroom",
                "plan",
                "m.gguf",
                "--n-gpu-layers",
                "20",
                "--flash-attn=off",
                "--cache-type-k",
                "q8_0",
                "--",
                "-np"
            ])
        );
    }

    #[test]
    fn rewritten_flags_parse() {
        let cli = parse(rewrite_llama_flags(strs(&[
            "headroom", "plan", "x.gguf", "-ngl", "7", "-fa", "off", "-c", "8192", "-ub", "256",
            "-np", "2",
        ])))
        .expect("parses");
        let Command::Plan(p) = cli.command else {
            panic!("not plan")
        };
        let s = p.ctx.settings().expect("valid");
        assert_eq!(s.n_gpu_layers, Some(7));
        assert_eq!(s.flash_attn, FlashAttn::Off);
        assert_eq!(s.n_ctx, Some(8192));
        assert_eq!(s.n_ubatch, 256);
        assert_eq!(s.n_parallel, 2);
    }

    #[test]
    fn bad_cache_type_is_an_error() {
        let cli = parse(strs(&[
            "headroom",
            "plan",
            "x.gguf",
            "--cache-type-k",
            "q4_k",
        ]))
        .expect("parses");
        let Command::Plan(p) = cli.command else {
            panic!("not plan")
        };
        let err = p.ctx.settings().expect_err("q4_k is not a cache type");
        assert!(format!("{err:#}").contains("--cache-type-k"));
    }

    #[test]
    fn link_rates_in_bits_or_bytes() {
        for (text, rate) in [
            ("1Gbit", 125e6),
            ("10gbit", 1.25e9),
            ("2.5Gbps", 312.5e6),
            ("100Mbit", 12.5e6),
            ("125MB/s", 125e6),
            ("1GiB/s", 1_073_741_824.0),
        ] {
            assert_eq!(parse_link_rate(text), Ok(rate), "{text}");
        }
        for bad in ["", "1", "fast", "0Gbit", "1Gb", "-1MB/s"] {
            assert!(parse_link_rate(bad).is_err(), "{bad}");
        }
    }
}
