//! The knobs of a llama.cpp memory-accounting query.
//!
//! These mirror the subset of `llama_model_params` / `llama_context_params`
//! that changes how much memory llama.cpp allocates. Defaults follow the
//! llama.cpp CLI (`common/common.h`), except where noted on the field.

use llama_cpp_2::context::params::KvCacheType;
use std::path::PathBuf;

pub use headroom_planner::plan::FlashAttn;

/// `enum llama_flash_attn_type`.
pub(crate) fn flash_attn_raw(fa: FlashAttn) -> i32 {
    match fa {
        FlashAttn::Auto => -1,
        FlashAttn::Off => 0,
        FlashAttn::On => 1,
    }
}

/// How layers/rows are spread over several GPUs (`enum llama_split_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SplitMode {
    /// Everything on `main_gpu`.
    None,
    /// Whole layers per GPU (llama.cpp's default).
    #[default]
    Layer,
    /// Rows of each matrix split across GPUs.
    Row,
    /// Tensor parallelism (requires flash attention).
    Tensor,
}

impl SplitMode {
    pub(crate) fn raw(self) -> i32 {
        match self {
            SplitMode::None => 0,
            SplitMode::Layer => 1,
            SplitMode::Row => 2,
            SplitMode::Tensor => 3,
        }
    }
}

/// One `-ot PATTERN=BUFFER_TYPE` tensor placement override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorOverride {
    /// Regular expression matched (std::regex_search) against tensor names,
    /// e.g. `"ffn_.*_exps"`.
    pub pattern: String,
    /// Buffer type name as llama.cpp prints it: `"CPU"`, `"CUDA0"`, `"CUDA_Host"`.
    pub buffer_type: String,
}

/// What to ask llama.cpp: the model, where its layers go, and the context.
#[derive(Debug, Clone, PartialEq)]
pub struct AccountingParams {
    /// GGUF file (the first shard of a split model).
    pub path: PathBuf,
    /// Layers to offload to GPUs; negative = all. Default 0: this build is
    /// CPU-only, and llama.cpp's own default (-1) means nothing without a GPU.
    pub n_gpu_layers: i32,
    /// GPU used with [`SplitMode::None`].
    pub main_gpu: i32,
    /// Multi-GPU split.
    pub split_mode: SplitMode,
    /// Proportions per GPU (`--tensor-split`); empty = by free memory.
    pub tensor_split: Vec<f32>,
    /// Tensor placement overrides (`-ot`).
    pub tensor_overrides: Vec<TensorOverride>,
    /// Let the CPU backend put weights in "extra" buffer types (CPU_REPACK,
    /// AMX, ...) that re-lay them out for faster kernels. Default true, as
    /// llama.cpp (`--no-extra-bufts` turns it off).
    pub use_extra_bufts: bool,
    /// Bypass pinned host buffers (`--no-host`).
    pub no_host: bool,
    /// Memory-map the file for a real load. Ignored when `no_alloc` is set:
    /// a simulated load never maps (llama.cpp asserts that).
    pub use_mmap: bool,
    /// Simulate: read only metadata, allocate nothing, and report the sizes
    /// llama.cpp WOULD allocate. Default true. Set false to really load (and
    /// read!) the weights, e.g. to check the simulation against reality.
    pub no_alloc: bool,
    /// Pass llama.cpp's log lines on to the logger installed before the call
    /// (stderr by default). Default false: quiet, but warnings and errors are
    /// still captured and put into the error on failure.
    pub forward_logs: bool,
    /// Context length in tokens; 0 = the model's training context. Default
    /// 4096 (llama.cpp's CLI now defaults to 0).
    pub n_ctx: u32,
    /// Logical batch (`-b`), default 2048.
    pub n_batch: u32,
    /// Physical micro-batch (`-ub`), default 512: sizes the compute graph.
    pub n_ubatch: u32,
    /// Parallel sequences (`-np`), default 1.
    pub n_seq_max: u32,
    /// Most outputs (logit rows) per batch; 0 = `n_batch` (llama.cpp default).
    pub n_outputs_max: u32,
    /// K cache element type, default F16.
    pub type_k: KvCacheType,
    /// V cache element type, default F16 (quantized V requires flash attention).
    pub type_v: KvCacheType,
    /// Flash attention mode, default auto.
    pub flash_attn: FlashAttn,
    /// Full-size cache for sliding-window layers. Default false as the CLI
    /// (note: `llama_context_default_params`, which llama-cpp-2 uses, says true).
    pub swa_full: bool,
    /// One KV buffer shared by all sequences.
    pub kv_unified: bool,
    /// Put the KV cache and attention on the GPU with its layer (default true).
    pub offload_kqv: bool,
    /// Offload host tensor ops to the GPU (default true).
    pub op_offload: bool,
    /// Threads for the CPU backend; 0 = llama.cpp's default.
    pub n_threads: i32,
}

impl Default for AccountingParams {
    fn default() -> Self {
        AccountingParams {
            path: PathBuf::new(),
            n_gpu_layers: 0,
            main_gpu: 0,
            split_mode: SplitMode::default(),
            tensor_split: Vec::new(),
            tensor_overrides: Vec::new(),
            use_extra_bufts: true,
            no_host: false,
            use_mmap: true,
            no_alloc: true,
            forward_logs: false,
            n_ctx: 4096,
            n_batch: headroom_planner::plan::DEFAULT_N_BATCH,
            n_ubatch: headroom_planner::plan::DEFAULT_N_UBATCH,
            n_seq_max: 1,
            n_outputs_max: 0,
            type_k: KvCacheType::F16,
            type_v: KvCacheType::F16,
            flash_attn: FlashAttn::default(),
            swa_full: false,
            kv_unified: false,
            offload_kqv: true,
            op_offload: true,
            n_threads: 0,
        }
    }
}

impl AccountingParams {
    /// The parameters that reproduce the planner's settings at a context size
    /// (what `headroom plan` assumes llama.cpp will be given).
    ///
    /// # Errors
    /// A cache type llama.cpp cannot use.
    pub fn from_settings(
        path: &std::path::Path,
        s: &headroom_planner::plan::Settings,
        n_ctx: u32,
        n_gpu_layers: i32,
    ) -> anyhow::Result<Self> {
        Ok(AccountingParams {
            n_ctx,
            n_batch: s.n_batch,
            n_ubatch: s.n_ubatch,
            n_seq_max: s.n_parallel,
            type_k: kv_type(s.cache_type_k)?,
            type_v: kv_type(s.cache_type_v)?,
            flash_attn: s.flash_attn,
            swa_full: s.swa_full,
            use_extra_bufts: s.repack,
            n_gpu_layers,
            n_outputs_max: if s.logits_per_sequence {
                s.n_parallel
            } else {
                0
            },
            ..AccountingParams::for_model(path)
        })
    }

    /// Defaults for the model at `path`.
    pub fn for_model(path: impl Into<PathBuf>) -> Self {
        AccountingParams {
            path: path.into(),
            ..AccountingParams::default()
        }
    }
}

/// llama.cpp's name for a planner cache type.
fn kv_type(ty: headroom_planner::gguf::GgmlType) -> anyhow::Result<KvCacheType> {
    use headroom_planner::gguf::GgmlType as G;
    Ok(match ty {
        G::F32 => KvCacheType::F32,
        G::F16 => KvCacheType::F16,
        G::BF16 => KvCacheType::BF16,
        G::Q8_0 => KvCacheType::Q8_0,
        G::Q4_0 => KvCacheType::Q4_0,
        G::Q4_1 => KvCacheType::Q4_1,
        G::IQ4_NL => KvCacheType::IQ4_NL,
        G::Q5_0 => KvCacheType::Q5_0,
        G::Q5_1 => KvCacheType::Q5_1,
        other => anyhow::bail!("{other} cannot be a KV cache type"),
    })
}
