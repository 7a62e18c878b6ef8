//! The plan: settings in, a serialisable verdict out.
//!
//! [`Settings`] is what the user asked for (llama.cpp's options and defaults);
//! [`Plan`] is what the solver chose and what it costs on each device. Both are
//! plain data: rendering them as a table or JSON is the app's job.

use serde::Serialize;

use crate::gguf::GgmlType;

/// Version of the `plan --json` object layout.
pub const SCHEMA_VERSION: u32 = 1;

/// Flash attention, as llama.cpp's `--flash-attn` takes it: the one type for
/// it, from the command line through the plan to llama.cpp's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FlashAttn {
    /// llama.cpp decides at context creation, fused where every layer's
    /// attention can run fused on its device (its default).
    #[default]
    Auto,
    /// Forced on (required for a quantized V cache).
    On,
    /// Forced off: the compute graph materialises the KQ matrix.
    Off,
}

impl FlashAttn {
    /// Every value, in the order `--help` lists them.
    pub const ALL: [FlashAttn; 3] = [FlashAttn::Auto, FlashAttn::On, FlashAttn::Off];

    /// llama.cpp's spelling (`-fa auto|on|off`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            FlashAttn::Auto => "auto",
            FlashAttn::On => "on",
            FlashAttn::Off => "off",
        }
    }
}

/// A `--flash-attn` value that is not auto, on or off.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: flash attention is auto, on or off")]
pub struct UnknownFlashAttn(pub String);

impl std::str::FromStr for FlashAttn {
    type Err = UnknownFlashAttn;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|f| f.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownFlashAttn(s.to_string()))
    }
}

/// What the user asked for. Defaults are llama.cpp's command-line defaults.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Settings {
    /// `--ctx-size`; `None` lets the solver choose.
    pub n_ctx: Option<u32>,
    /// `--batch-size`.
    pub n_batch: u32,
    /// `--ubatch-size`.
    pub n_ubatch: u32,
    /// `--parallel` (sequences sharing the context).
    pub n_parallel: u32,
    /// `--n-gpu-layers`; `None` lets the solver choose.
    pub n_gpu_layers: Option<u32>,
    /// `--cache-type-k`.
    pub cache_type_k: GgmlType,
    /// `--cache-type-v`.
    pub cache_type_v: GgmlType,
    /// `--flash-attn`.
    pub flash_attn: FlashAttn,
    /// `--swa-full`.
    pub swa_full: bool,
    /// Memory-map the weights (llama.cpp's default) rather than read them.
    pub mmap: bool,
    /// Let the CPU backend repack weights (`use_extra_bufts`).
    pub repack: bool,
    /// `--margin`: overrides the default margins (per GPU, and for RAM).
    pub margin_bytes: Option<u64>,
    /// The program that holds the model (`serve` adds an HTTP runtime).
    pub front_end: FrontEnd,
    /// Reserve one logits row per sequence (llama.cpp's `n_outputs_max` =
    /// `n_seq_max`), all headroom's runner asks for, instead of a row per
    /// token of the physical batch (llama.cpp's default, its tools' only
    /// choice): 262k vocabulary × 512 tokens × 4 bytes is 512 MiB of
    /// compute buffer for Gemma 3.
    pub logits_per_sequence: bool,
    /// `serve --embeddings`: a second context of this many tokens computes
    /// embeddings beside the slots (one input at a time, in one batch, with
    /// llama.cpp's output rows for every token of it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embeddings: Option<u32>,
}

/// The program that holds the model: what it keeps resident beside
/// llama.cpp's buffers differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FrontEnd {
    /// `run` and `chat`: one conversation in a terminal.
    #[default]
    Cli,
    /// `serve`: an HTTP runtime (threads, connection buffers) beside the model.
    Server,
}

/// llama.cpp's default logical batch (`-b`, `common/common.h`): defined once
/// here for the planner, the command line and the load.
pub const DEFAULT_N_BATCH: u32 = 2048;
/// llama.cpp's default physical batch (`-ub`).
pub const DEFAULT_N_UBATCH: u32 = 512;

impl Default for Settings {
    fn default() -> Self {
        Self {
            n_ctx: None,
            n_batch: DEFAULT_N_BATCH,
            n_ubatch: DEFAULT_N_UBATCH,
            n_parallel: 1,
            n_gpu_layers: None,
            cache_type_k: GgmlType::F16,
            cache_type_v: GgmlType::F16,
            flash_attn: FlashAttn::Auto,
            swa_full: false,
            mmap: true,
            repack: true,
            margin_bytes: None,
            front_end: FrontEnd::Cli,
            logits_per_sequence: false,
            embeddings: None,
        }
    }
}

/// What `serve --embeddings` adds: a second context on the same weights.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EmbeddingsUse {
    /// Its tokens: the longest input it takes.
    pub n_ctx: u32,
    /// Its KV cache, compute and output buffers on every device together
    /// (already in each device's figures and the RAM peak).
    pub bytes: u64,
}

/// The verdict, in the words `plan` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Verdict {
    /// Everything fits, all layers where the plan wants them.
    #[serde(rename = "fits")]
    Fits,
    /// Fits, with some layers kept in system RAM.
    #[serde(rename = "fits with offload")]
    FitsWithOffload,
    /// Some budget is exceeded.
    #[serde(rename = "does not fit")]
    DoesNotFit,
}

impl Verdict {
    /// The words used in text output and JSON.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fits => "fits",
            Self::FitsWithOffload => "fits with offload",
            Self::DoesNotFit => "does not fit",
        }
    }

    /// Whether the model can start.
    #[must_use]
    pub fn fits(self) -> bool {
        self != Self::DoesNotFit
    }
}

/// What kind of memory a device has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// System RAM used by the CPU backend.
    Cpu,
    /// Dedicated GPU memory.
    Gpu,
    /// A GPU drawing on system RAM (Apple Silicon, APUs).
    Unified,
    /// A llama.cpp RPC worker: a device in another process (or machine)
    /// that llama.cpp places layers, KV cache and compute on like a GPU.
    Rpc,
}

/// One llama.cpp buffer type's share, in the shape of llama.cpp's own
/// `llama_get_memory_breakdown` rows, so the two can be compared directly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BufferUse {
    /// Buffer type name (`CPU`, `CPU_REPACK`, `CUDA0`, `CUDA_Host`).
    pub name: String,
    /// Model weights.
    pub model_bytes: u64,
    /// Context: KV cache, recurrent state, output buffer.
    pub context_bytes: u64,
    /// Compute buffer.
    pub compute_bytes: u64,
}

/// Allocation on one device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceUse {
    /// Device name (`CPU`, the GPU's name).
    pub name: String,
    /// Device kind.
    pub kind: DeviceKind,
    /// Memory the plan may use on this device.
    pub budget_bytes: u64,
    /// Weights placed here.
    pub weights_bytes: u64,
    /// KV cache (and recurrent state) here.
    pub kv_bytes: u64,
    /// Compute buffers (and the output buffer).
    pub compute_bytes: u64,
    /// Runtime overhead (backend context, allocator slack).
    pub overhead_bytes: u64,
    /// Safety margin against fragmentation.
    pub margin_bytes: u64,
    /// Sum of the five before.
    pub total_bytes: u64,
    /// Repeating layers placed on this device.
    pub n_layers: u32,
    /// llama.cpp buffer types on this device.
    pub buffers: Vec<BufferUse>,
}

impl DeviceUse {
    /// The five parts `total_bytes` adds up (saturating at `u64::MAX`):
    /// weights, KV cache, compute, overhead, margin.
    #[must_use]
    pub fn parts(&self) -> [u64; 5] {
        [
            self.weights_bytes,
            self.kv_bytes,
            self.compute_bytes,
            self.overhead_bytes,
            self.margin_bytes,
        ]
    }
}

/// What the process will hold in RAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RamUse {
    /// RAM the plan may use (smallest of available memory, cgroup and process limits).
    pub budget_bytes: u64,
    /// Predicted peak resident set size.
    pub peak_bytes: u64,
    /// The anonymous part of the peak: must fit, or the kernel kills the process.
    pub anonymous_bytes: u64,
    /// Memory-mapped weight pages (page cache; paged from disk when short).
    pub mapped_bytes: u64,
    /// Allocated (not necessarily touched) bytes: what `RLIMIT_AS`/`RLIMIT_DATA` count.
    pub allocated_bytes: u64,
}

/// What a warning is about: a stable code, serialised as the snake_case
/// strings `plan --json` has always used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningCode {
    /// Some layers run from system RAM, several times slower.
    OffloadSlow,
    /// A GPU is there but this build or plan cannot use it.
    GpuUnusable,
    /// Mapped weights do not all stay resident: pages are read back from disk.
    PagesFromDisk,
    /// A budget is exceeded.
    DoesNotFit,
    /// The context was lowered below what was asked for or trained.
    ContextLimited,
    /// The architecture has no synthetic test against llama.cpp's own
    /// accounting: its plan follows the generic rules and may be off.
    UnverifiedArchitecture,
    /// The GPUs decode slower than the CPU (a software device such as
    /// lavapipe, measured): the plan keeps every layer in RAM unless
    /// `-ngl` says otherwise.
    GpuSlowerThanCpu,
}

/// A warning attached to a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// Stable machine-readable code.
    pub code: WarningCode,
    /// One line for a person.
    pub message: String,
}

/// The model a plan is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelInfo {
    /// Where it was read from.
    pub path: String,
    /// `general.architecture`.
    pub architecture: String,
    /// `general.name`.
    pub name: Option<String>,
    /// Parameters.
    pub n_params: u64,
    /// File size (header plus tensor data).
    pub file_bytes: u64,
    /// Training context.
    pub n_ctx_train: u64,
    /// The planner was held to llama.cpp's accounting on this architecture
    /// (`headroom_planner::arch::VERIFIED`).
    pub verified: bool,
}

/// The cache rule llama.cpp applies to one kind of layer, and what it costs:
/// why the KV cache is what it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KvRule {
    /// The kind of layer: `full`, `sliding`, `chunked`, `mla`, `recurrent`,
    /// `parallel`, `mtp`, `shared` or `no_attention`.
    pub kind: crate::profile::LayerKind,
    /// Layers of this kind.
    pub n_layers: u32,
    /// KV cells each such layer keeps per sequence (none for a recurrent state).
    pub cells_per_sequence: Option<u64>,
    /// Bytes of cache (and state) of these layers, all sequences, all devices.
    pub bytes: u64,
    /// The rule in words, with the source it mirrors.
    pub rule: String,
}

/// The settings the plan resolved (what the runner will pass to llama.cpp).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolved {
    /// Logical batch, after llama.cpp caps it at the context.
    pub n_batch: u32,
    /// Physical batch.
    pub n_ubatch: u32,
    /// K cache type.
    pub cache_type_k: String,
    /// V cache type.
    pub cache_type_v: String,
    /// Whether flash attention ends up on.
    pub flash_attn: bool,
    /// `--swa-full`.
    pub swa_full: bool,
    /// Weights memory-mapped.
    pub mmap: bool,
    /// CPU repacking enabled.
    pub repack: bool,
    /// Layers per GPU, in device order (llama.cpp's `--tensor-split`).
    pub tensor_split: Vec<u32>,
    /// Logits rows the compute buffer reserves: one per sequence (headroom's
    /// runner, llama-server) or a whole physical batch (llama.cpp's library
    /// default: llama-completion, llama-fit-params).
    pub logits: Logits,
}

/// How many logits rows llama.cpp reserves in the compute buffer
/// (`n_outputs_max`, `llama-context.cpp`: 0 means `n_batch`, and the
/// reserve graph takes min(n_ubatch, n_outputs_max) rows of n_vocab f32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Logits {
    /// One row per sequence (`n_outputs_max` = `n_seq_max`): what
    /// headroom's runner and llama-server (`server_output_limits`) ask for.
    Sequence,
    /// A row per token of the physical batch (n_vocab × n_ubatch × 4
    /// bytes): llama.cpp's default, which llama-completion and
    /// llama-fit-params keep.
    Batch,
}

impl Logits {
    /// The setting of [`Settings::logits_per_sequence`].
    #[must_use]
    pub fn of(s: &Settings) -> Self {
        if s.logits_per_sequence {
            Self::Sequence
        } else {
            Self::Batch
        }
    }

    /// The llama.cpp tool that reserves this many rows, so that the
    /// printed command allocates what the plan shows.
    #[must_use]
    pub fn llama_tool(self) -> &'static str {
        match self {
            Self::Sequence => "llama-server",
            Self::Batch => "llama-completion",
        }
    }
}

/// A plan for one model file on one machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// Layout version of this object.
    pub schema_version: u32,
    /// The headroom version that made it.
    pub headroom_version: String,
    /// The llama.cpp build the runner uses (filled in by the app).
    pub llama_cpp: String,
    /// The model.
    pub model: ModelInfo,
    /// The verdict.
    pub verdict: Verdict,
    /// Quantization label.
    pub quant: String,
    /// Repeating layers on GPUs (llama.cpp counts the output layer as one more).
    pub n_gpu_layers: u32,
    /// Context size in tokens (as llama.cpp will pad it).
    pub n_ctx: u32,
    /// Parallel sequences.
    pub n_parallel: u32,
    /// Layers whose MoE expert tensors stay in RAM (llama.cpp's `--n-cpu-moe`).
    pub n_cpu_moe: u32,
    /// The embedding context (`serve --embeddings`), when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embeddings: Option<EmbeddingsUse>,
    /// Resolved settings.
    pub settings: Resolved,
    /// The KV cache rule of each kind of layer, in layer order.
    pub kv_rules: Vec<KvRule>,
    /// Allocation per device (CPU first).
    pub devices: Vec<DeviceUse>,
    /// Process residency.
    pub ram: RamUse,
    /// Estimated decode speed.
    pub est_decode_tokens_per_s: f64,
    /// Estimated prompt-processing speed.
    pub est_prompt_tokens_per_s: f64,
    /// Decode speed with every layer on the GPU, when there is one.
    pub est_full_gpu_decode_tokens_per_s: Option<f64>,
    /// What the speed estimates assume: each device's bandwidth, where it
    /// came from, and the bytes it reads per token.
    pub speed_basis: crate::speed::SpeedBasis,
    /// Warnings.
    pub warnings: Vec<Warning>,
    /// llama.cpp arguments that reproduce the plan.
    pub llama_args: Vec<String>,
    /// Runner-up plans, when several files were compared.
    pub alternatives: Vec<Plan>,
}
