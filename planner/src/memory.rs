//! The memory model: what llama.cpp allocates on each device for a given
//! placement and context, and what the process will hold resident.
//!
//! Every formula mirrors the vendored llama.cpp (llama-cpp-sys-2 0.1.160) and
//! was checked against its own `no_alloc` accounting (`llama_get_memory_breakdown`);
//! the source of each rule is named beside it. The unit tests
//! (`memory/tests.rs`) hold each piece to figures recorded from that
//! accounting (`memory/fixtures/`, by `examples/record_memory_fixtures.rs`).
//!
//! Two views are kept apart on purpose: *allocated* (what each backend asks
//! for, what GPU memory and `RLIMIT_AS` see) and *resident* (what RAM really
//! holds: llama.cpp's CPU compute buffer is mostly the logits of a full
//! ubatch, which is allocated but almost never touched).

use crate::arch;
use crate::gguf::GgmlType;
use crate::hw::LlamaDevice;
use crate::plan::{BufferUse, DeviceKind, DeviceUse, FlashAttn, FrontEnd, Settings};
use crate::profile::{ModelProfile, Tensor};

mod galloc;
mod rules;

pub use rules::kv_rules;

const MIB: u64 = 1 << 20;

// Byte counts add and multiply saturating. Hostile hyper-parameters (a
// header's widths near 2^32, `--ctx-size` and `--parallel` at their maxima)
// make sizes past 2^64: they end at `u64::MAX`, which no budget holds
// (`solve::fits`), instead of wrapping to a small number that would make a
// huge model look like it fits.

/// The sum of byte counts, `u64::MAX` if it does not fit.
pub(crate) fn sum<const N: usize>(parts: [u64; N]) -> u64 {
    parts.into_iter().fold(0, u64::saturating_add)
}

/// The product of counts, `u64::MAX` if it does not fit (0 if any is 0).
pub(crate) fn product<const N: usize>(factors: [u64; N]) -> u64 {
    factors.into_iter().fold(1, u64::saturating_mul)
}

/// Cache types llama.cpp accepts for `--cache-type-k/v` (`common/arg.cpp` `kv_cache_types`).
#[must_use]
pub fn is_valid_cache_type(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::F32
            | GgmlType::F16
            | GgmlType::BF16
            | GgmlType::Q8_0
            | GgmlType::Q4_0
            | GgmlType::Q4_1
            | GgmlType::IQ4_NL
            | GgmlType::Q5_0
            | GgmlType::Q5_1
    )
}

fn pad(x: u64, n: u64) -> u64 {
    x.div_ceil(n).saturating_mul(n)
}

/// The context llama.cpp will really create from the user's numbers
/// (`llama_context` constructor, `llama-context.cpp:135-307`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Context {
    /// Total cells, padded to 256 and to a multiple of the sequences.
    pub n_ctx: u32,
    /// Cells per sequence (per KV stream).
    pub n_ctx_seq: u32,
    /// Sequences (`n_seq_max`), each its own KV stream (`kv_unified` off, the CLI default).
    pub n_seq: u32,
    /// Logical batch, capped at the (unpadded) context.
    pub n_batch: u32,
    /// Physical batch.
    pub n_ubatch: u32,
    /// Tokens of the reserved worst-case graph.
    pub n_tokens: u32,
    /// Outputs (logit rows) of the reserved graph.
    pub n_outputs: u32,
    /// Flash attention as llama.cpp resolves it.
    pub flash_attn: bool,
    /// Full-size sliding-window cache.
    pub swa_full: bool,
    /// K cache type.
    pub type_k: GgmlType,
    /// V cache type.
    pub type_v: GgmlType,
}

impl Context {
    /// Resolve the user's settings for a requested context size.
    #[must_use]
    pub fn resolve(settings: &Settings, n_ctx: u32) -> Self {
        let n_seq = settings.n_parallel.clamp(1, 256);
        let n_batch = settings.n_batch.min(n_ctx).max(1);
        let n_ubatch = settings.n_ubatch.min(n_batch).max(1);
        let padded = pad(u64::from(n_ctx.max(1)), 256);
        let n_ctx_seq = pad(padded / u64::from(n_seq), 256).max(256);
        let total = n_ctx_seq * u64::from(n_seq);
        let total = u32::try_from(total).unwrap_or(u32::MAX);
        let n_ctx_seq = u32::try_from(n_ctx_seq).unwrap_or(u32::MAX);
        // The reserve graph: T = min(n_ctx, n_ubatch), rounded up to a multiple of n_seq
        // (`sched_reserve`, `graph_reserve`); outputs = min(T, n_outputs_max), which
        // is n_batch unless the runner sets it to one row per sequence.
        let t = total.min(n_ubatch);
        let t = u32::try_from(u64::from(t).div_ceil(u64::from(n_seq)) * u64::from(n_seq))
            .unwrap_or(u32::MAX);
        // Auto resolves to on for the CPU and CUDA backends (`resolve_fused_ops`,
        // `llama-context.cpp:513-562`); a quantized V cache with it forced off is
        // refused by llama.cpp (`:3843`), and by the CLI before it gets here.
        let flash_attn = !matches!(settings.flash_attn, FlashAttn::Off);
        Self {
            n_ctx: total,
            n_ctx_seq,
            n_seq,
            n_batch,
            n_ubatch,
            n_tokens: t,
            n_outputs: if settings.logits_per_sequence {
                t.min(n_seq)
            } else {
                t.min(n_batch)
            },
            flash_attn,
            swa_full: settings.swa_full,
            type_k: settings.cache_type_k,
            type_v: settings.cache_type_v,
        }
    }

    /// Cells of the sliding-window cache per stream (`llama-kv-cache-iswa.cpp:73-81`).
    #[must_use]
    pub fn swa_cells(&self, window: u32) -> u64 {
        if self.swa_full {
            return u64::from(self.n_ctx_seq);
        }
        let want = u64::from(window) + u64::from(self.n_ubatch);
        pad(u64::from(self.n_ctx_seq).min(want), 256)
    }
}

/// KV cache bytes per cell for layer `il` (`llama-kv-cache.cpp:210-234`): K and V rows of
/// `head_dim × n_head_kv`; a transposed V (flash attention off) uses the widest layer's V
/// (`n_embd_v_gqa_max`, over every block); a latent (MLA) cache has no V.
#[must_use]
pub fn kv_bytes_per_cell(p: &ModelProfile, ctx: &Context, il: usize) -> u64 {
    let kv_heads = u64::from(p.n_head_kv.get(il).copied().unwrap_or(0));
    if kv_heads == 0 || !p.is_attention_layer(il) {
        return 0;
    }
    let (k, _) = kv_rows(p, ctx, il);
    if p.mla.is_some() {
        // `has_v = !is_mla`: V is read from the latent K rows.
        return k;
    }
    let v = if ctx.flash_attn {
        u64::from(p.head_dims(il).1) * kv_heads
    } else {
        (0..p.n_head_kv.len())
            .map(|l| u64::from(p.head_dims(l).1) * u64::from(p.n_head_kv[l]))
            .max()
            .unwrap_or(0)
    };
    sum([k, row_bytes(ctx.type_v, v)])
}

/// One cell's K row and V row of layer `il`, each of the layer's own width
/// (what a view of the layer's cache spans per cell).
fn kv_rows(p: &ModelProfile, ctx: &Context, il: usize) -> (u64, u64) {
    let kv_heads = u64::from(p.n_head_kv.get(il).copied().unwrap_or(0));
    let (head_k, head_v) = p.head_dims(il);
    (
        row_bytes(ctx.type_k, u64::from(head_k) * kv_heads),
        row_bytes(ctx.type_v, u64::from(head_v) * kv_heads),
    )
}

fn row_bytes(ty: GgmlType, n: u64) -> u64 {
    // A width that is not a multiple of the block is refused by llama.cpp; count it
    // as the next whole block so the estimate stays an upper bound.
    ty.row_bytes(n)
        .unwrap_or_else(|| product([n.div_ceil(ty.block_size()), ty.type_size()]))
}

/// KV cache (or recurrent state) bytes of layer `il`, by what llama.cpp keeps
/// for it ([`crate::profile::LayerKind`]): a cell per context token (full, latent), a window of
/// cells (sliding, chunked), a state per sequence (recurrent), both
/// (falcon-h1's parallel layers), or nothing (MTP blocks, shared caches).
#[must_use]
pub fn kv_bytes_layer(p: &ModelProfile, ctx: &Context, il: usize) -> u64 {
    let kind = p.layer_kind(il);
    let state = if kind.has_state() {
        recurrent_bytes_layer(p, ctx)
    } else {
        0
    };
    if !kind.has_kv() {
        return state;
    }
    let per_cell = kv_bytes_per_cell(p, ctx, il);
    sum([
        product([per_cell, cache_cells(p, ctx, il), u64::from(ctx.n_seq)]),
        state,
    ])
}

/// Cells of layer `il`'s cache per sequence: the window's for a sliding or
/// chunked layer, the context's otherwise.
fn cache_cells(p: &ModelProfile, ctx: &Context, il: usize) -> u64 {
    match &p.swa {
        Some(swa) if p.layer_kind(il).is_windowed() => ctx.swa_cells(swa.window),
        _ => u64::from(ctx.n_ctx_seq),
    }
}

/// The widest V row (KV heads × V head size) among the attention layers of
/// one cache (`swa`: the sliding-window one); Gemma 4's sliding and full
/// layers differ in both.
fn widest_v_row(p: &ModelProfile, swa: bool) -> u64 {
    let head = u64::from(if swa { p.head_dim_v_swa } else { p.head_dim_v });
    (0..p.n_head_kv.len())
        .filter(|&il| p.is_attention_layer(il) && p.is_swa_layer(il) == swa)
        .map(|il| u64::from(p.n_head_kv[il]).saturating_mul(head))
        .max()
        .unwrap_or(0)
}

/// Recurrent state of one layer for all sequences (`llama-memory-recurrent.cpp`):
/// f32 conv and ssm states, one set per sequence, independent of context.
fn recurrent_bytes_layer(p: &ModelProfile, ctx: &Context) -> u64 {
    let Some(r) = p.recurrent else { return 0 };
    let floats = if r.rwkv_state_floats > 0 {
        r.rwkv_state_floats
    } else {
        let d_inner = u64::from(r.d_inner);
        let d_state = u64::from(r.d_state);
        let conv = product([
            u64::from(r.d_conv.saturating_sub(1)),
            sum([d_inner, product([2, u64::from(r.n_group), d_state])]),
        ]);
        sum([conv, product([d_state, d_inner])])
    };
    product([floats, 4, u64::from(ctx.n_seq)])
}

/// Total KV cache and recurrent state bytes.
#[must_use]
pub fn kv_bytes_total(p: &ModelProfile, ctx: &Context) -> u64 {
    (0..p.layers.len())
        .map(|il| kv_bytes_layer(p, ctx, il))
        .fold(0, u64::saturating_add)
}

/// Which weight types the CPU backend of this build repacks, and the row
/// multiple each needs (`ggml_repack_get_optimal_repack_type`, `repack.cpp:4925`).
/// The checks there are compile-time: llama-cpp-sys-2 builds x86 with AVX2
/// (not AVX-512) and ARM with the host's NEON features.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepackRules {
    /// (type, required multiple of `ne[1]`).
    pub types: Vec<(GgmlType, u64)>,
}

impl RepackRules {
    /// The rules for a CPU with these features (`avx2`, `neon`, `dotprod`, `i8mm`, ...).
    #[must_use]
    pub fn for_cpu(arch: &str, features: &[String]) -> Self {
        let has = |f: &str| features.iter().any(|x| x == f);
        let mut types = Vec::new();
        if arch == "x86_64" && has("avx2") {
            types = vec![
                (GgmlType::Q4_0, 8),
                (GgmlType::Q4_K, 8),
                (GgmlType::IQ4_NL, 8),
                (GgmlType::MXFP4, 8),
            ];
        } else if arch == "aarch64" && has("neon") && (has("i8mm") || has("dotprod")) {
            // NEON with i8mm or dot-product kernels (4x8/8x8 or 4x4/8x4 layouts): the
            // same types and row multiples either way.
            types = vec![
                (GgmlType::Q4_0, 4),
                (GgmlType::Q4_K, 8),
                (GgmlType::Q5_K, 8),
                (GgmlType::Q6_K, 8),
                (GgmlType::Q8_0, 4),
                (GgmlType::IQ4_NL, 4),
                (GgmlType::MXFP4, 4),
            ];
        }
        Self { types }
    }

    /// Whether a weight goes to `CPU_REPACK`: a 2-D matrix (or 3-D expert stack)
    /// used by a matrix product, of a repackable type and row count. The token
    /// embedding is read with GET_ROWS and never repacks; norms and biases neither.
    #[must_use]
    pub fn repacks(&self, t: &Tensor) -> bool {
        let is_matrix = if t.is_expert() {
            t.dims.len() == 3
        } else {
            t.dims.len() == 2
        };
        // Token embeddings (gemma3n's per-layer ones too) are read with
        // GET_ROWS, which the repacked buffer does not take.
        let embedding = t.name == "token_embd.weight" || t.name == "per_layer_token_embd.weight";
        if !is_matrix || embedding || t.name.ends_with(".bias") {
            return false;
        }
        let rows = t.dims.get(1).copied().unwrap_or(0);
        self.types
            .iter()
            .any(|&(ty, m)| ty == t.ty && rows % m == 0)
    }
}

/// Where layers go. Mirrors llama.cpp's `-ngl` semantics: the last
/// `n_gpu_layers` of the `n_layer + 1` "layers" (the output layer counts as
/// the last) are offloaded (`llama-model.cpp:1555-1616`).
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// llama.cpp's `--n-gpu-layers` (0..=n_layer+1).
    pub n_gpu_layers: u32,
    /// Share of offloaded layers per GPU (`--tensor-split`), need not be normalised.
    pub split: Vec<f64>,
    /// Keep the expert tensors of the first N layers in RAM (`--n-cpu-moe`).
    pub n_cpu_moe: u32,
}

impl Placement {
    /// Everything on the CPU.
    #[must_use]
    pub fn cpu_only() -> Self {
        Self {
            n_gpu_layers: 0,
            split: Vec::new(),
            n_cpu_moe: 0,
        }
    }

    /// The GPU of layer `il` (`il == n_layer` is the output layer), or `None` for the CPU.
    #[must_use]
    pub fn device_of(&self, n_layer: u32, il: u32) -> Option<usize> {
        let total: f64 = self.split.iter().sum();
        if self.split.is_empty() || total <= 0.0 {
            return None;
        }
        let n = self.n_gpu_layers.min(n_layer + 1);
        let start = n_layer + 1 - n;
        if n == 0 || il < start {
            return None;
        }
        let frac = f64::from(il - start) / f64::from(n);
        let mut cum = 0.0;
        for (g, s) in self.split.iter().enumerate() {
            cum += s / total;
            if frac < cum {
                return Some(g);
            }
        }
        Some(self.split.len() - 1)
    }

    /// Repeating layers on each GPU.
    #[must_use]
    pub fn layers_per_gpu(&self, n_layer: u32) -> Vec<u32> {
        let mut counts = vec![0u32; self.split.len()];
        for il in 0..n_layer {
            if let Some(g) = self.device_of(n_layer, il) {
                counts[g] += 1;
            }
        }
        counts
    }
}

/// A GPU as the memory model needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSpec {
    /// Name.
    pub name: String,
    /// Dedicated or unified.
    pub kind: DeviceKind,
    /// Memory the plan may use (free memory, or the unified limit).
    pub budget_bytes: u64,
    /// The free memory the device reports to llama.cpp, which splits
    /// offloaded layers between devices in proportion to it.
    pub split_bytes: u64,
    /// The device as llama.cpp's registry listed it (its backend, buffer
    /// names, whether its memory is RAM); `None`: a GPU known from a driver
    /// library, a profile or `--gpu`, planned with CUDA's rules.
    pub llama: Option<LlamaDevice>,
}

/// The llama.cpp backend whose rules apply to a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// CUDA (and ROCm, built from the same sources): the default for a GPU
    /// not read from the registry.
    Cuda,
    /// Vulkan (`ggml-vulkan`).
    Vulkan,
    /// An RPC worker.
    Rpc,
}

impl GpuSpec {
    /// The backend whose rules apply.
    #[must_use]
    pub fn backend(&self) -> Backend {
        if self.kind == DeviceKind::Rpc {
            return Backend::Rpc;
        }
        match self.llama.as_ref().map(|l| l.backend.as_str()) {
            Some("Vulkan") => Backend::Vulkan,
            _ => Backend::Cuda,
        }
    }

    /// The name of the device's buffers in llama.cpp's breakdown: the
    /// registry's name (`Vulkan0`), a worker's `RPC<n>[HOST:PORT]`, else
    /// `CUDA<g>` for the `g`-th GPU.
    #[must_use]
    pub fn buffer_name(&self, g: usize) -> String {
        match (&self.llama, self.kind) {
            (_, DeviceKind::Rpc) => self.name.clone(),
            (Some(l), _) => l.name.clone(),
            (None, _) => format!("CUDA{g}"),
        }
    }

    /// Whether what is placed here is this machine's RAM too.
    #[must_use]
    pub fn host_memory(&self) -> bool {
        self.kind == DeviceKind::Unified || self.llama.as_ref().is_some_and(|l| l.host_memory)
    }

    /// Bytes a weight tensor takes in this device's buffer: CUDA pads a
    /// quantized row count to 512 and every tensor to 128 bytes (RPC
    /// workers are held to the same); Vulkan allocates `ggml_nbytes`
    /// aligned to the device's storage-buffer offset alignment (16 bytes on
    /// lavapipe; 256 taken as the most any device asks).
    fn alloc_bytes(&self, t: &Tensor) -> u64 {
        match self.backend() {
            Backend::Vulkan => pad(t.bytes, VULKAN_ALIGN),
            Backend::Cuda | Backend::Rpc => cuda_alloc_bytes(t),
        }
    }

    /// Whether the device takes a weight of this size. Vulkan refuses a
    /// tensor above its largest storage buffer (`supports_op`), and
    /// llama.cpp then keeps it on the CPU.
    fn takes(&self, t: &Tensor) -> bool {
        t.bytes <= self.max_tensor_bytes()
    }

    /// The largest tensor the device takes (`u64::MAX`: no limit known).
    fn max_tensor_bytes(&self) -> u64 {
        self.llama
            .as_ref()
            .and_then(|l| l.max_tensor_bytes)
            .unwrap_or(u64::MAX)
    }
}

/// The alignment assumed for a tensor in a Vulkan buffer.
const VULKAN_ALIGN: u64 = 256;

/// The alignment of a CUDA buffer's tensors (`ggml_backend_cuda_buffer_type_get_alignment`).
const CUDA_ALIGN: u64 = 128;

/// An RPC worker's buffer alignment: its CPU backend's (`TENSOR_ALIGNMENT`).
const RPC_ALIGN: u64 = 32;

/// The largest piece of a Vulkan buffer (`GGML_VK_SUBALLOCATION_BLOCK_SIZE`):
/// ggml-alloc starts a new chunk past it.
const VULKAN_CHUNK: u64 = 1 << 30;

/// The machine, reduced to what the memory model needs.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineSpec {
    /// GPUs usable by this plan (in llama.cpp's device order).
    pub gpus: Vec<GpuSpec>,
    /// CPU repacking rules of this build.
    pub repack: RepackRules,
    /// RAM budget for resident anonymous memory.
    pub ram_budget_bytes: u64,
    /// Process address-space / data limit, if any (counts allocated memory).
    pub alloc_limit_bytes: Option<u64>,
    /// CPU threads the runner will use.
    pub threads: u32,
    /// Resident bytes the build's backends take once initialised, as
    /// measured on this machine ([`crate::hw::RamInfo::runtime_bytes`]).
    pub runtime_bytes: u64,
    /// The address space that start adds (what `RLIMIT_AS` counts).
    pub runtime_virtual_bytes: u64,
}

/// Constants that are ours, not llama.cpp's: documented estimates.
pub mod overhead {
    use super::MIB;
    /// Resident baseline of a headroom process running llama.cpp on the CPU:
    /// binary, libc/libstdc++/OpenMP, thread stacks touched, allocator slack.
    pub const CPU_BASE: u64 = 12 * MIB;
    /// Resident bytes per vocabulary entry for llama.cpp's tokenizer tables
    /// (`id_to_token` strings and attributes, `token_to_id` hash map), measured
    /// from no_alloc processes: 262k tokens → 45 MB, 128k → 23 MB.
    pub const PER_TOKEN: u64 = 170;
    /// Resident bytes per BPE merge (`bpe_ranks` map of string pairs).
    pub const PER_MERGE: u64 = 128;
    /// Host memory the CUDA runtime maps once a GPU is used (driver, libcudart,
    /// cuBLAS): an estimate from CUDA builds of llama.cpp, not measured here.
    pub const CUDA_HOST: u64 = 256 * MIB;
    /// GPU memory a process takes on a CUDA device beyond llama.cpp's
    /// buffers: the CUDA context, cuBLAS's workspace, the kernels loaded
    /// (lazily, as used) and CUDA's memory pool. Measured on an NVIDIA H200
    /// (CUDA 13.0, driver 580.159, `scripts/gpu-check.sh`): llama.cpp's own
    /// "unaccounted" figure and the used memory nvidia-smi reports, which
    /// agree to 2 MiB, were 597–637 MiB for dense models after a prompt of
    /// 1000–4000 tokens in batches of 512 and 32 generated tokens. Smaller
    /// cards keep a smaller context (it grows with the multiprocessors), so
    /// this errs on the safe side there.
    pub const CUDA_CONTEXT: u64 = 640 * MIB;
    /// What a model with experts adds to [`CUDA_CONTEXT`]: the
    /// expert-product kernels (measured beside it: 707–732 MiB in all).
    pub const CUDA_EXPERT_KERNELS: u64 = 96 * MIB;
    /// Device memory a Vulkan device takes beyond llama.cpp's buffers: the
    /// scratch buffers (`prealloc_x/y/split_k`) and staging buffers it
    /// allocates lazily at the first decode, outside
    /// `llama_get_memory_breakdown`. An estimate until measured.
    pub const VULKAN_CONTEXT: u64 = 128 * MIB;
    /// Staging and pipeline memory a software Vulkan device (lavapipe)
    /// takes beside its scratch buffers (see [`super::vulkan_scratch`]).
    pub const VULKAN_SOFTWARE_STAGING: u64 = 8 * MIB;
    /// Overhead of a unified-memory GPU backend (Metal, APU): estimate.
    pub const UNIFIED_CONTEXT: u64 = 64 * MIB;
    /// Address space a process maps beyond its buffers (libraries, heap arenas,
    /// stacks): what `RLIMIT_AS` sees on top of the allocations.
    pub const VIRTUAL_BASE: u64 = 256 * MIB;
    /// Address space per thread (stack plus a glibc malloc arena reservation).
    pub const VIRTUAL_PER_THREAD: u64 = 72 * MIB;
    /// Default GPU margin against fragmentation.
    pub const GPU_MARGIN: u64 = 512 * MIB;
    /// Smallest RAM margin.
    pub const RAM_MARGIN_MIN: u64 = 128 * MIB;
    /// Resident bytes `serve` adds for its HTTP runtime: tokio's threads, the
    /// per-connection buffers and tasks. Measured against `run`'s plan of the
    /// same settings: with 4 clients (`app/benches/serve_speed.rs`, base demo
    /// model) the peak stayed 1–3 MiB under it (434.4–436.4 MiB against
    /// 437.6); with 2,000 connections at once (`app/tests/run/serve.rs`,
    /// instruct demo model) it went 15.6 MiB over (234.7 against 219.1).
    pub const SERVER: u64 = 8 * MIB;
    /// Threads `serve` adds (2 tokio workers, at most 4 blocking threads for
    /// templates and tokenizing, the scheduler), for the address space.
    pub const SERVER_THREADS: u64 = 7;
}

/// Everything the memory model computes for one placement.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// The context llama.cpp will create.
    pub ctx: Context,
    /// What the embedding context adds (`serve --embeddings`), on every
    /// device together; 0 without one.
    pub embeddings_bytes: u64,
    /// Per device, CPU first.
    pub devices: Vec<DeviceUse>,
    /// Resident anonymous bytes at the peak.
    pub anonymous_bytes: u64,
    /// Resident file-mapped bytes at the peak.
    pub mapped_bytes: u64,
    /// The mapped bytes read on every token (weights used in place, not the
    /// file pages of repacked ones): what must stay in RAM to avoid paging.
    pub mapped_working_bytes: u64,
    /// Allocated (virtual) bytes, what process limits count.
    pub allocated_bytes: u64,
    /// Bytes of weights each device reads per generated token (CPU first).
    pub active_bytes: Vec<u64>,
    /// Of the CPU's `active_bytes[0]`, those it reads in their file layout
    /// (not repacked): llama.cpp's CPU products over them are slower
    /// ([`crate::speed::CPU_DECODE_FLOPS_PER_CORE_PLAIN`]).
    pub cpu_active_plain_bytes: u64,
    /// The devices a token passes through, in order (0 is the CPU, `g + 1`
    /// GPU `g`): the CPU's embedding lookup, each layer's device, the
    /// output layer's device; each change is a boundary.
    pub chain: Vec<usize>,
}

/// Compute-buffer sizes: the high-water mark of llama.cpp's graph allocator for the
/// reserved prompt graph (`sched_reserve`), in the analytic form checked against
/// llama.cpp's own numbers (see the research notes in the planner README).
struct Compute {
    /// Graph inputs plus the residual-stream tensors live throughout.
    inputs: u64,
    /// One f32 row of the residual stream per token: `n_embd × n_tokens × 4`.
    et4: u64,
    /// What every device running layers is sent besides the residual: the
    /// attention masks and the V cache's indices (part of `inputs`).
    sent: u64,
    /// The attention stage on a device, beyond `inputs` (with and without
    /// the KQ matrix, which a device whose largest tensor is smaller
    /// refuses).
    attn_stage: u64,
    /// `attn_stage` without the KQ matrix.
    attn_stage_no_kq: u64,
    /// The dense FFN stage on a device, beyond `inputs`.
    dense_stage: u64,
    /// The expert FFN stage on a device, beyond `inputs` (0: no experts).
    moe_stage: u64,
    /// The same on a local GPU (Vulkan, CUDA), which keeps three residual
    /// rows fewer than an RPC worker.
    moe_stage_local: u64,
    /// One FFN-wide f32 activation: `n_ff × n_tokens × 4` (widest layer).
    ffn_rows: u64,
    /// What is live beside a stacked expert weight while its product runs:
    /// the used experts' activations and the router's rows.
    expert_op: u64,
    /// The query rows: `n_head × head_dim × n_tokens × 4`.
    q: u64,
    /// One attention mask over the whole cache.
    mask: u64,
    /// Every attention mask (part of `inputs` and `sent`).
    masks: u64,
    /// Largest per-layer intermediate (attention or FFN stage) beyond `inputs`.
    layer_peak: u64,
    /// Logits of the reserved outputs.
    logits: u64,
    /// Without flash attention, one layer's KQ matrix (its softmax is the
    /// same size): a device whose largest tensor is smaller refuses the
    /// product, and the CPU computes it.
    kq: u64,
}

fn compute_parts(p: &ModelProfile, ctx: &Context) -> Compute {
    // In f64: exact for every value below 2^53 bytes (8 PiB), and `as u64`
    // saturates, so hostile hyper-parameters give a huge size (that does not
    // fit) instead of wrapping to a small one.
    let f = |x: u64| x as f64;
    let t = f(u64::from(ctx.n_tokens));
    let e = f(u64::from(p.n_embd));
    let et4 = e * t * 4.0;
    let mask_elem = if ctx.flash_attn { 2.0 } else { 4.0 };
    let mut masks = f(u64::from(ctx.n_ctx_seq)) * t * mask_elem;
    if let Some(swa) = &p.swa {
        masks += f(ctx.swa_cells(swa.window)) * t * mask_elem;
    }
    // The V cache's row indices; without flash attention V is stored
    // transposed and indexed per element, as wide as the cache's widest V
    // row. A sliding-window model has two caches, each with its own
    // indices.
    let v_row = |swa: bool| f(widest_v_row(p, swa));
    let caches: &[bool] = if p.swa.is_some() {
        &[false, true]
    } else {
        &[false]
    };
    let v_idxs: f64 = caches
        .iter()
        .map(|&swa| {
            if ctx.flash_attn {
                t * 8.0
            } else {
                t * v_row(swa) * 8.0
            }
        })
        .sum();
    let inputs = 2.0 * et4 + masks + v_idxs + t * 36.0;

    let n_head = f(u64::from(p.n_head.iter().copied().max().unwrap_or(0)));
    let q = n_head * f(u64::from(p.head_dim_k)) * t * 4.0;
    let n_seq = u64::from(ctx.n_seq.max(1));
    let mut kq_bytes = 0.0;
    let attn = if ctx.flash_attn {
        3.0 * et4 + q + n_head * f(u64::from(p.head_dim_v)) * t * 4.0
    } else {
        let kq = f(u64::from(ctx.n_ctx_seq))
            * f((u64::from(ctx.n_tokens) / n_seq).max(1))
            * n_head
            * 4.0
            * f(n_seq);
        // Latent attention without flash attention (`build_attn_mha`): V is
        // a view of the K rows, copied transposed (`ggml_cont`) for the KQV
        // product, whose latent result is then decompressed per head.
        let latent = p.mla.map_or(0.0, |m| {
            let v_copy = row_bytes(ctx.type_k, u64::from(m.kv_lora_rank));
            f(v_copy) * f(u64::from(ctx.n_ctx_seq)) * f(n_seq)
                + n_head * f(u64::from(m.kv_lora_rank) + u64::from(m.v_head_dim)) * t * 4.0
        });
        kq_bytes = kq;
        3.0 * et4 + q + kq + latent
    };
    // The widest dense FFN (Gemma 4's KV-shared layers are twice as wide
    // as the first ones: `use_double_wide_mlp`).
    let widest_ff = p
        .layers
        .iter()
        .flat_map(|l| &l.tensors)
        .filter(|t| t.name.ends_with(".ffn_down.weight"))
        .filter_map(|t| t.dims.first().copied())
        .fold(u64::from(p.n_ff), u64::max);
    let dense_ff = 3.0 * et4 + 3.0 * f(widest_ff) * t * 4.0;
    let moe_ff = match p.experts {
        Some(ex) => {
            let n_ff_exp = f(expert_ff(p).unwrap_or(u64::from(p.n_ff)));
            let k = f(u64::from(ex.used));
            // `build_moe_ffn`: the up and gate products and their SwiGLU are
            // live together (3 × n_ff per used expert), then the product with
            // the down projection beside two of them; few large experts
            // (Mixtral) peak at the first, many small ones at the second.
            let per_expert = (3.0 * n_ff_exp).max(2.0 * n_ff_exp + e);
            3.0 * et4 + per_expert * k * t * 4.0 + f(u64::from(ex.count)) * t * 4.0
        }
        None => 0.0,
    };
    // Expert routing keeps three more residual rows live than the dense
    // stage (measured: 12 MiB under at 512 tokens of Qwen3-30B-A3B, the
    // same at every context). On a device that is sent its residual the
    // dense and attention stages need three rows fewer, the expert stage
    // one more (RPC workers against llama.cpp, `app/tests/run/rpc.rs`).
    let moe_ff = if moe_ff > 0.0 {
        moe_ff + 3.0 * et4
    } else {
        0.0
    };
    // Per-layer token embeddings (gemma3n, gemma4): every layer's slice of
    // them, projected and normed before the first layer, stays live through
    // all the layers.
    let per_layer_inputs = p
        .globals
        .iter()
        .find(|t| t.name == "per_layer_token_embd.weight")
        .and_then(|t| t.dims.first().copied())
        .map_or(0.0, |width| f(width) * t * 4.0);
    Compute {
        inputs: inputs as u64,
        et4: et4 as u64,
        sent: (masks + v_idxs) as u64,
        masks: masks as u64,
        layer_peak: (attn.max(dense_ff).max(moe_ff) + per_layer_inputs) as u64,
        attn_stage: (attn - 3.0 * et4).max(0.0) as u64,
        attn_stage_no_kq: (attn - kq_bytes - 3.0 * et4).max(0.0) as u64,
        dense_stage: (dense_ff - 3.0 * et4).max(0.0) as u64,
        moe_stage: if moe_ff > 0.0 { moe_ff + et4 } else { 0.0 } as u64,
        // Subtracted before the conversion: a saturated stage less three
        // rows would shrink as the rows grow.
        moe_stage_local: if moe_ff > 0.0 {
            (moe_ff - 2.0 * et4).max(0.0)
        } else {
            0.0
        } as u64,
        ffn_rows: (f(widest_ff) * t * 4.0) as u64,
        expert_op: match p.experts {
            Some(ex) => {
                let n_ff_exp = f(expert_ff(p).unwrap_or(u64::from(p.n_ff)));
                let per_expert = (3.0 * n_ff_exp).max(2.0 * n_ff_exp + e);
                (per_expert * f(u64::from(ex.used)) * t * 4.0 + f(u64::from(ex.count)) * t * 4.0)
                    as u64
            }
            None => 0,
        },
        q: q as u64,
        mask: (f(u64::from(ctx.n_ctx_seq)) * t * mask_elem) as u64,
        logits: (f(p.n_vocab) * f(u64::from(ctx.n_outputs)) * 4.0) as u64,
        kq: kq_bytes as u64,
    }
}

/// The largest layer stage on a device that runs layers, beyond the inputs:
/// a KQ matrix larger than the device takes is computed on the CPU, and so
/// are the products of stacked experts it refuses (all of them: one it
/// takes, the up or gate product, is the stage's peak).
fn device_stage(p: &ModelProfile, c: &Compute, max_tensor: u64, local: bool) -> u64 {
    let attn = if c.kq > max_tensor {
        c.attn_stage_no_kq
    } else {
        c.attn_stage
    };
    // (Every evaluation of a placement asks: no scan for a dense model.)
    let experts_taken = p.experts.is_some()
        && p.layers
            .iter()
            .flat_map(|l| &l.tensors)
            .filter(|t| t.is_expert())
            .any(|t| t.bytes <= max_tensor);
    // A local GPU's expert stage (Vulkan's, CUDA's) keeps three residual
    // rows fewer than an RPC worker's (measured on lavapipe against two RPC
    // workers, and on an H200).
    let moe = match (experts_taken, local) {
        (false, _) => 0,
        (true, false) => c.moe_stage,
        (true, true) => c.moe_stage_local,
    };
    attn.max(c.dense_stage).max(moe)
}

/// The smallest batch whose products a GPU backend takes from the CPU
/// (`op_offload_min_batch_size` in ggml-cuda and ggml-vulkan): the output
/// product of one logits row per sequence stays on the CPU.
const OP_OFFLOAD_MIN_BATCH: u32 = 32;

/// What the device that offloads the CPU layers' big-batch products holds
/// (Vulkan's `offload_op`, `ggml-backend.cpp` `split_graph`): every product
/// with a weight left on the CPU starts a split of its own, whose copy of
/// the weight lives in the device's compute buffer beside that product's
/// activations; the attention between them (no weight: the scheduler
/// extends the device's ops over it) runs there too, on copies of the
/// layer's K and V, unless its KQ matrix is larger than the device takes.
/// Weights the device refuses stay on the CPU with their products. Measured
/// on lavapipe (`app/tests/run/vulkan.rs`): the allocator places the
/// largest weight beside the attention's copies at long contexts.
fn offload_stage(
    p: &ModelProfile,
    ctx: &Context,
    c: &Compute,
    lay: &Layout,
    max_tensor: u64,
    vulkan: bool,
) -> u64 {
    let on_cpu = p
        .layers
        .iter()
        .take(lay.cpu_layers as usize)
        .flat_map(|l| &l.tensors)
        .filter(|t| t.dims.len() >= 2 && t.bytes <= max_tensor);
    let mut products = 0;
    let mut largest = 0;
    for t in on_cpu {
        let live = if t.name.contains("_exps.") {
            sum([c.expert_op, c.et4])
        } else if t.name.contains(".ffn_gate") || t.name.contains(".ffn_up") {
            // CUDA keeps one more FFN-wide activation there than Vulkan
            // (recorded on an H200: `tests_cuda.rs`).
            if vulkan {
                c.dense_stage
            } else {
                sum([c.dense_stage, c.ffn_rows])
            }
        } else if t.name.contains(".ffn_down") {
            sum([c.ffn_rows, c.et4])
        } else {
            sum([c.q, c.et4])
        };
        products = products.max(sum([t.bytes, live]));
        largest = largest.max(t.bytes);
    }
    // The output product too, when the output layer stays on the CPU and
    // the device takes its matrix: the logits are then the device's.
    if lay.out_dev.is_none()
        && ctx.n_outputs >= OP_OFFLOAD_MIN_BATCH
        && let Some(t) = p.output.as_ref().or(p.token_embd.as_ref())
        && t.bytes <= max_tensor
    {
        products = products.max(sum([t.bytes, c.logits, c.et4]));
    }
    let attention = if ctx.flash_attn || c.kq <= max_tensor {
        let kv = (0..lay.cpu_layers as usize)
            .map(|il| kv_bytes_layer(p, ctx, il))
            .max()
            .unwrap_or(0);
        let kq = if ctx.flash_attn { 0 } else { c.kq };
        sum([kv, c.mask, c.q, c.et4, kq, largest])
    } else {
        0
    };
    sum([product([2, c.et4]), products.max(attention)])
}

/// The expert FFN width, from the first stacked expert tensor's shape.
fn expert_ff(p: &ModelProfile) -> Option<u64> {
    p.layers.iter().flat_map(|l| &l.tensors).find_map(|t| {
        let rows = t.dims.get(1).copied()?;
        if t.name.contains("ffn_up_exps") {
            Some(rows)
        } else if t.name.contains("ffn_gate_up_exps") {
            // Gemma 4's fused gate and up experts: twice an expert's width.
            Some(rows / 2)
        } else {
            None
        }
    })
}

/// Bytes a CUDA buffer allocates for a tensor: a quantized tensor whose rows are
/// not a multiple of 512 elements gets one row's worth of padding at its end, so
/// kernels may read past the last row (`ggml_backend_cuda_buffer_type_get_alloc_size`).
fn cuda_alloc_bytes(t: &Tensor) -> u64 {
    let ne0 = t.dims.first().copied().unwrap_or(0);
    let mut bytes = t.bytes;
    if t.ty.is_quantized() && ne0 % 512 != 0 {
        bytes = sum([bytes, row_bytes(t.ty, 512 - ne0 % 512)]);
    }
    pad(bytes, 128)
}

/// Which device runs each stage of the graph for one placement: what every
/// piece of the estimate needs to agree on, computed once.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Layout {
    /// GPUs of the machine (a split longer than this has no device behind
    /// its extra shares: their layers' buffers stay on the CPU).
    n_gpu: usize,
    /// Some layer is offloaded: llama.cpp then uses the pinned `CUDA_Host`
    /// buffer for the CPU's compute and maps the CUDA runtime.
    uses_gpu: bool,
    /// The GPU of the output layer (`None`: the CPU) whose logits it
    /// computes: not one that refuses the output matrix.
    out_dev: Option<usize>,
    /// The GPU the output layer is placed on, whether or not it takes the
    /// output matrix: it holds the output norm either way.
    out_layer: Option<usize>,
    /// Repeating layers on each share of the split.
    layers_gpu: Vec<u32>,
    /// Repeating layers left on the CPU.
    cpu_layers: u32,
    /// llama.cpp's pipeline parallelism is on (see [`SCHED_COPIES`]).
    pipeline: bool,
    /// The first GPU runs the big-batch products of layers left on the CPU
    /// (the scheduler's op offload, `offload_op`: CUDA and Vulkan offer it for
    /// batches of 32 or more), so its compute buffer holds a layer's stage
    /// even when no layer is placed on it. `None`: no such device (RPC
    /// workers do not offer it; unified-memory GPUs are not measured).
    op_offload: Option<usize>,
    /// Per GPU, the largest tensor it takes (`u64::MAX`: no limit).
    max_tensor: Vec<u64>,
    /// Per GPU, the backend whose rules apply.
    backend: Vec<Backend>,
    /// Some layers' experts stay on the CPU (`--n-cpu-moe`): a graph no
    /// replay was read from.
    experts_on_cpu: bool,
}

/// Copies of every split's inputs and of the graph inputs that llama.cpp's
/// scheduler keeps with pipeline parallelism (`GGML_SCHED_MAX_COPIES`), so
/// that consecutive ubatches overlap across devices. `llama-context.cpp`
/// turns it on with more than one device, every layer and the output
/// offloaded, no tensor overrides (`--n-cpu-moe`), and devices that compute
/// asynchronously with events: CUDA and ROCm GPUs and RPC workers do
/// (`ggml-rpc.cpp` `get_props`); for the others (Metal, Vulkan) it is
/// assumed off, as for a unified-memory GPU.
const SCHED_COPIES: u64 = 4;

impl Layout {
    /// Whether GPU `g` is a local GPU (Vulkan or CUDA, whose compute stages
    /// were measured alike), not an RPC worker.
    fn is_local(&self, g: usize) -> bool {
        self.backend.get(g).is_some_and(|&b| b != Backend::Rpc)
    }

    fn new(p: &ModelProfile, placement: &Placement, m: &MachineSpec) -> Self {
        let n_gpu = m.gpus.len();
        let layers_gpu = placement.layers_per_gpu(p.n_layer);
        let cpu_layers = p.n_layer - layers_gpu.iter().sum::<u32>();
        let out_dev = placement.device_of(p.n_layer, p.n_layer);
        let pipeline = n_gpu > 1
            && placement.n_gpu_layers > p.n_layer
            && out_dev.is_some()
            && placement.n_cpu_moe == 0
            && m.gpus
                .iter()
                .all(|g| matches!(g.kind, DeviceKind::Gpu | DeviceKind::Rpc));
        // A device that refuses the output matrix (larger than its largest
        // tensor) leaves it on the CPU, and the logits are computed there.
        let out_matrix = p.output.as_ref().or(p.token_embd.as_ref());
        let out_layer = out_dev;
        let out_dev = out_dev.filter(|&g| {
            m.gpus
                .get(g)
                .zip(out_matrix)
                .is_none_or(|(spec, t)| spec.takes(t))
        });
        // The scheduler asks the devices in order, and RPC workers (first
        // in llama.cpp's list) never offer it.
        // CUDA's rule was recorded on a dedicated card (an H200); a
        // unified-memory part (Metal, an APU) is left as before.
        let op_offload = m.gpus.iter().position(|g| match g.backend() {
            Backend::Vulkan => true,
            Backend::Cuda => g.kind == DeviceKind::Gpu,
            Backend::Rpc => false,
        });
        let max_tensor = m.gpus.iter().map(GpuSpec::max_tensor_bytes).collect();
        let backend = m.gpus.iter().map(GpuSpec::backend).collect();
        Self {
            n_gpu,
            uses_gpu: n_gpu > 0 && placement.n_gpu_layers > 0,
            out_dev,
            out_layer,
            layers_gpu,
            cpu_layers,
            pipeline,
            op_offload,
            max_tensor,
            backend,
            experts_on_cpu: placement.n_cpu_moe > 0,
        }
    }
}

/// Where the weights land: bytes per buffer, the file range the CPU maps, and
/// the bytes each device reads per generated token.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Weights {
    /// The plain `CPU` buffer (each tensor padded to the CPU buffer's 32 bytes).
    cpu_plain: u64,
    /// The `CPU_REPACK` buffer (repacked weights, a tied output counted again).
    cpu_repack: u64,
    /// File range `[map_lo, map_hi)` of the weights in the plain CPU buffer:
    /// with mmap that range stays mapped (and populated) after the load
    /// (`unmap_fragment`). `map_lo > map_hi` when there are none.
    map_lo: u64,
    /// End of that range.
    map_hi: u64,
    /// Each GPU's weights buffer (`CUDA<g>`), CUDA's padding included.
    gpu: Vec<u64>,
    /// Weight bytes the CPU reads per token (routed experts by their share).
    cpu_active: u64,
    /// Of those, the ones read from the plain buffer (not repacked).
    cpu_active_plain: u64,
    /// Weight bytes each GPU reads per token.
    gpu_active: Vec<u64>,
}

impl Weights {
    /// Bytes of the file that stay mapped: the plain CPU weights' span, with mmap.
    fn mapped_bytes(&self, mmap: bool) -> u64 {
        if mmap && self.map_hi > self.map_lo {
            self.map_hi - self.map_lo
        } else {
            0
        }
    }
}

/// Weights placement: which tensor's bytes land in which device's buffer
/// (`llama-model.cpp` `load_tensors`). A repeating layer's tensors go to the
/// layer's device, except the experts of the first `n_cpu_moe` layers
/// (`--n-cpu-moe`); the output matrix and the other global tensors go with the
/// output layer; the token embedding always stays on the CPU. On the CPU a
/// tensor is repacked (`CPU_REPACK`) when the build's rules take it and no GPU
/// backend is present, else it is held in the plain `CPU` buffer.
fn place_weights(
    p: &ModelProfile,
    placement: &Placement,
    lay: &Layout,
    m: &MachineSpec,
    repack_active: bool,
) -> Weights {
    let n_gpu = lay.n_gpu;
    let out_dev = lay.out_dev;
    let mut w = Weights {
        cpu_plain: 0,
        cpu_repack: 0,
        map_lo: u64::MAX,
        map_hi: 0,
        gpu: vec![0; n_gpu],
        cpu_active: 0,
        cpu_active_plain: 0,
        gpu_active: vec![0; n_gpu],
    };
    let mut place = |t: &Tensor, dev: Option<usize>, active_share: f64| {
        let active = (t.bytes as f64 * active_share) as u64;
        match dev {
            Some(g) if g < n_gpu && m.gpus[g].takes(t) => {
                w.gpu[g] = sum([w.gpu[g], m.gpus[g].alloc_bytes(t)]);
                w.gpu_active[g] = sum([w.gpu_active[g], active]);
            }
            _ => {
                if repack_active && m.repack.repacks(t) {
                    w.cpu_repack = sum([w.cpu_repack, t.bytes]);
                } else {
                    w.cpu_plain = sum([w.cpu_plain, pad(t.bytes, 32)]);
                    w.map_lo = w.map_lo.min(t.offset);
                    w.map_hi = w.map_hi.max(sum([t.offset, t.bytes]));
                    w.cpu_active_plain = sum([w.cpu_active_plain, active]);
                }
                w.cpu_active = sum([w.cpu_active, active]);
            }
        }
    };
    let expert_share = p
        .experts
        .map_or(1.0, |e| f64::from(e.used) / f64::from(e.count.max(1)));
    for (il, layer) in p.layers.iter().enumerate() {
        let il = il as u32;
        let dev = placement.device_of(p.n_layer, il);
        for t in &layer.tensors {
            let expert = t.is_expert();
            let d = if expert && il < placement.n_cpu_moe {
                None
            } else {
                dev
            };
            place(t, d, if expert { expert_share } else { 1.0 });
        }
    }
    // The input layer (token embedding) always stays on the CPU; the logits read the
    // output matrix, or the tied embedding when there is none.
    if let Some(t) = &p.token_embd {
        place(t, None, if p.output.is_none() { 1.0 } else { 0.0 });
    }
    if let Some(t) = &p.output {
        place(t, out_dev, 1.0);
    }
    for t in &p.globals {
        // gemma3n's per-layer token embeddings are an input layer's (on the
        // CPU, a row read per token); its per-layer projection and norm are
        // created as block 0's (`LLM_TENSOR_LAYER_REPEATING`).
        match t.name.as_str() {
            "per_layer_token_embd.weight" => place(t, None, 0.0),
            "per_layer_model_proj.weight" | "per_layer_proj_norm.weight" => {
                place(t, placement.device_of(p.n_layer, 0), 1.0);
            }
            _ => place(t, lay.out_layer, 1.0),
        }
    }
    if p.output.is_none() && out_dev.is_some() {
        // A tied output on the GPU: llama.cpp loads a GPU copy of the embedding for the logits.
        if let Some(t) = &p.token_embd
            && let Some(g) = out_dev
            && m.gpus.get(g).is_some_and(|spec| spec.takes(t))
        {
            w.gpu[g] = sum([w.gpu[g], m.gpus[g].alloc_bytes(t)]);
            w.gpu_active[g] = sum([w.gpu_active[g], t.bytes]);
            w.cpu_active -= t.bytes.min(w.cpu_active);
            w.cpu_active_plain -= t.bytes.min(w.cpu_active_plain);
        }
    }

    // A tied output is a second tensor over the same data; as a matrix-product weight
    // it may repack, and then it is held twice (CPU for GET_ROWS, CPU_REPACK for logits).
    let tied_repack = match (&p.output, &p.token_embd, out_dev) {
        (None, Some(t), None) if repack_active => {
            let as_output = Tensor {
                name: "output.weight".into(),
                ..t.clone()
            };
            if m.repack.repacks(&as_output) {
                t.bytes
            } else {
                0
            }
        }
        _ => 0,
    };
    w.cpu_repack = sum([w.cpu_repack, tied_repack]);
    // The logits then read the repacked copy.
    w.cpu_active_plain -= tied_repack.min(w.cpu_active_plain);
    // An architecture that creates the tied output before the embedding
    // finds no tensor to share in the CPU buffer (`create_tensor`'s
    // `TENSOR_DUPLICATED` lookup) and holds the output as a second one.
    if arch::TIED_OUTPUT_CREATED_FIRST.contains(&p.arch.as_str())
        && p.output.is_none()
        && out_dev.is_none()
        && tied_repack == 0
        && let Some(t) = &p.token_embd
    {
        w.cpu_plain = sum([w.cpu_plain, pad(t.bytes, 32)]);
    }
    w
}

/// KV cache bytes on each device.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KvCache {
    /// In the CPU buffer.
    cpu: u64,
    /// In each GPU's buffer.
    gpu: Vec<u64>,
}

/// KV cache per device: each layer's cache (or recurrent state) on that
/// layer's device, as llama.cpp does with `offload_kqv` on (its default);
/// the output layer has none.
fn kv_per_device(p: &ModelProfile, ctx: &Context, placement: &Placement, lay: &Layout) -> KvCache {
    let mut kv = KvCache {
        cpu: 0,
        gpu: vec![0; lay.n_gpu],
    };
    for il in 0..p.layers.len() {
        let b = kv_bytes_layer(p, ctx, il);
        match placement.device_of(p.n_layer, il as u32) {
            Some(g) if g < lay.n_gpu => kv.gpu[g] = sum([kv.gpu[g], b]),
            _ => kv.cpu = sum([kv.cpu, b]),
        }
    }
    kv
}

/// Compute buffers and the other per-context host buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ComputeBuffers {
    /// The CPU's compute buffer as llama.cpp allocates it (`CPU`, or
    /// `CUDA_Host` when a GPU is used).
    cpu: u64,
    /// The part of it a real batch touches (resident).
    cpu_touched: u64,
    /// Each GPU's compute buffer.
    gpu: Vec<u64>,
    /// The host output buffer: logits for `n_seq` outputs at start (not in
    /// llama.cpp's breakdown).
    output: u64,
    /// The CPU's work buffer (`ggml_graph_plan`), outside every llama.cpp buffer.
    work: u64,
}

/// Everything one placement and context allocate, per device: the weights,
/// the KV cache and the compute buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Buffers {
    weights: Weights,
    kv: KvCache,
    compute: ComputeBuffers,
}

/// Compute buffers per device (`sched_reserve`). The CPU, with layers,
/// holds the graph inputs and its largest stage, and the output stage when
/// the output layer stays there; without layers, the inputs and the two
/// token-embedding lookups it still runs. A GPU or RPC device holds its
/// largest layer stage (the split-input copies take the place of the
/// residual rows the CPU keeps) or, on the output layer's device, the logits
/// and one residual row, whichever is larger; the first device, when the
/// CPU runs no layer, also keeps the embedding rows and the masks it was
/// sent. With pipeline parallelism the CPU keeps [`SCHED_COPIES`] copies of
/// the inputs, and every device copies of what it is sent. Checked per
/// device against llama.cpp with two RPC workers (`app/tests/run/rpc.rs`).
fn compute_buffers(p: &ModelProfile, ctx: &Context, lay: &Layout) -> ComputeBuffers {
    let c = compute_parts(p, ctx);
    let uses_gpu = lay.uses_gpu;
    let out_dev = lay.out_dev;
    // The output stage: the last layer's residual tensors and the logits.
    let output_stage = sum([product([3, c.et4]), c.logits]);
    let copies = if lay.pipeline { SCHED_COPIES } else { 1 };
    let cpu = if let Some(og) = lay
        .op_offload
        .filter(|_| !(lay.cpu_layers == 0 && out_dev.is_some()))
    {
        // The CPU layers' products run on the device, and so does their
        // attention unless the device refuses its KQ matrix, or their
        // experts' products when it refuses the stacked experts: what
        // stays on the CPU (two residual rows, or those stages, or the
        // output stage) shares one buffer (measured on lavapipe, alone and
        // beside two RPC workers).
        let max_tensor = lay.max_tensor.get(og).copied().unwrap_or(u64::MAX);
        let attn = if !ctx.flash_attn && c.kq > max_tensor {
            c.attn_stage
        } else {
            product([2, c.et4])
        };
        // A device without a tensor limit (CUDA) refuses none: no scan.
        let experts_refused = max_tensor != u64::MAX
            && p.experts.is_some()
            && p.layers
                .iter()
                .flat_map(|l| &l.tensors)
                .any(|t| t.is_expert() && t.bytes > max_tensor);
        let moe = if experts_refused { c.moe_stage } else { 0 };
        let layers = if lay.cpu_layers > 0 { attn.max(moe) } else { 0 };
        let output_taken = p
            .output
            .as_ref()
            .or(p.token_embd.as_ref())
            .is_some_and(|t| t.bytes <= max_tensor);
        let output = if out_dev.is_none() && !output_taken {
            output_stage
        } else {
            0
        };
        if copies == 1 {
            // The masks are copied to the device at their first use and
            // their last consumer on the CPU runs before the output stage:
            // ggml-alloc frees them, and the logits take their place
            // (measured on lavapipe: Gemma 3 270M at 32k, whose 32-64 MiB of
            // masks the 512 MiB of logits do not add to).
            let during = sum([c.inputs, layers]);
            let after = sum([c.inputs.saturating_sub(c.masks), output]);
            during.max(after)
        } else {
            // Pipeline parallelism keeps every copy of the inputs.
            sum([product([copies, c.inputs]), layers.max(output)])
        }
    } else if !uses_gpu {
        sum([c.inputs, c.layer_peak.max(output_stage)])
    } else if lay.cpu_layers == 0 && out_dev.is_some() {
        sum([product([copies, c.inputs]), product([2, c.et4])])
    } else {
        let layers = if lay.cpu_layers > 0 { c.layer_peak } else { 0 };
        let output = if out_dev.is_none() { output_stage } else { 0 };
        sum([c.inputs, layers, output])
    };
    // A device that refuses the KQ matrix leaves its layers' attention
    // products to the CPU, which computes them on copies of the layer's K
    // and V (measured on lavapipe, `app/tests/run/vulkan.rs`).
    let refuses_kq = !ctx.flash_attn
        && (0..lay.n_gpu).any(|g| {
            lay.layers_gpu.get(g).copied().unwrap_or(0) > 0
                && c.kq > lay.max_tensor.get(g).copied().unwrap_or(u64::MAX)
        });
    let cpu = if refuses_kq {
        let kv = (0..p.n_layer as usize)
            .map(|il| kv_bytes_layer(p, ctx, il))
            .max()
            .unwrap_or(0);
        // With a Vulkan device the CPU's buffer is the pinned Vulkan_Host
        // one, which ggml-alloc cuts into chunks of at most 1 GiB
        // (`ggml_backend_vk_host_buffer_type_get_max_size`): a KQ matrix
        // larger than that gets a chunk of its own, and when the CPU also
        // runs its own layers' attention, the device layers' copies of K, Q
        // and V land in the chunk the first matrix left, so the second
        // takes another (replayed from llama.cpp's graph: Qwen3-30B-A3B at
        // 32k with half its layers on lavapipe, 4178 MiB; Gemma 3 4B at 32k
        // and Llama 8B at 4k, whose matrices fit a chunk, take one place).
        let vulkan_host = lay.uses_gpu && lay.backend.contains(&Backend::Vulkan);
        let own_attention = lay.cpu_layers > 0
            && lay
                .op_offload
                .is_none_or(|og| c.kq > lay.max_tensor.get(og).copied().unwrap_or(u64::MAX));
        let places = if vulkan_host && own_attention && c.kq > VULKAN_CHUNK {
            2
        } else {
            1
        };
        cpu.max(sum([c.inputs, product([places, c.kq]), kv, c.q, c.et4]))
    } else {
        cpu
    };
    // The device the CPU's embedding rows go to, when the CPU runs no layer.
    let first = (lay.cpu_layers == 0)
        .then(|| {
            (0..lay.n_gpu)
                .find(|&g| lay.layers_gpu.get(g).copied().unwrap_or(0) > 0)
                .or(out_dev)
        })
        .flatten();
    let gpu = (0..lay.n_gpu)
        .map(|g| {
            let layers = lay.layers_gpu.get(g).copied().unwrap_or(0);
            let offloads_ops = lay.op_offload == Some(g) && (lay.cpu_layers > 0 || !uses_gpu);
            if layers == 0 && out_dev != Some(g) && !offloads_ops {
                // The output layer's device that refuses the output matrix
                // still normalises the last residual (measured on lavapipe
                // beside two RPC workers: five residual rows).
                return if lay.out_layer == Some(g) {
                    product([5, c.et4])
                } else {
                    0
                };
            }
            let max_tensor = lay.max_tensor.get(g).copied().unwrap_or(u64::MAX);
            // One Vulkan device that runs every layer the CPU does not (and
            // the CPU layers' products), the output layer with them or on
            // the CPU: its graph is replayed through ggml-alloc whole, when
            // it is one whose allocations were read from llama.cpp (on
            // lavapipe, to the byte). CUDA keeps the stage rule for its own
            // layers: replayed, the H200's full offloads matched to the MiB
            // with flash attention (1% under without it at 32k), against
            // 0-9% over by the rule, but `fit` took a third more CPU.
            let vulkan = lay.backend.get(g) == Some(&Backend::Vulkan);
            let runs_the_rest = layers > 0
                && layers == p.n_layer.saturating_sub(lay.cpu_layers)
                && (lay.cpu_layers == 0 || lay.op_offload == Some(g))
                && out_dev.is_none_or(|o| o == g)
                && lay.out_layer.is_none_or(|o| o == g);
            if vulkan
                && runs_the_rest
                && !lay.pipeline
                && !lay.experts_on_cpu
                && let Some(b) = galloc::device_buffer(
                    p,
                    ctx,
                    lay.cpu_layers,
                    lay.out_layer == Some(g),
                    max_tensor,
                    VULKAN_ALIGN,
                    VULKAN_CHUNK,
                )
            {
                return b;
            }
            // An RPC worker whose layers follow another worker's is
            // replayed too, where its graph was read.
            let after_a_worker = || {
                (0..g)
                    .rev()
                    .find(|&d| lay.layers_gpu.get(d).copied().unwrap_or(0) > 0)
                    .is_some_and(|d| lay.backend.get(d) == Some(&Backend::Rpc))
            };
            if lay.backend.get(g) == Some(&Backend::Rpc)
                && layers > 0
                && !lay.experts_on_cpu
                && lay.out_layer != Some(g)
                && out_dev != Some(g)
                && after_a_worker()
            {
                let first = lay.cpu_layers as usize
                    + lay.layers_gpu[..g]
                        .iter()
                        .map(|&n| n as usize)
                        .sum::<usize>();
                let own = first..first + layers as usize;
                if let Some(b) =
                    galloc::rpc_follower_buffer(p, ctx, own, copies, max_tensor, RPC_ALIGN)
                {
                    return b;
                }
            }
            // The masks go where the softmax runs: to the CPU, with the
            // KQ matrix a device refuses.
            let masks = if !ctx.flash_attn && c.kq > max_tensor {
                c.masks
            } else {
                0
            };
            let inputs = c.inputs.saturating_sub(masks);
            let stage = if layers > 0 {
                sum([inputs, device_stage(p, &c, max_tensor, lay.is_local(g))])
            } else {
                0
            };
            let offload = if offloads_ops {
                // The graphs whose allocations were read from llama.cpp are
                // replayed through its allocator; others keep the stage rule.
                let (align, chunk) = if vulkan {
                    (VULKAN_ALIGN, VULKAN_CHUNK)
                } else {
                    (CUDA_ALIGN, u64::MAX)
                };
                galloc::op_offload_buffer(
                    p,
                    ctx,
                    lay.cpu_layers,
                    layers == 0,
                    max_tensor,
                    align,
                    chunk,
                )
                .unwrap_or_else(|| offload_stage(p, ctx, &c, lay, max_tensor, vulkan))
            } else {
                0
            };
            let stage = stage.max(offload);
            let out = if out_dev == Some(g) {
                sum([c.logits, c.et4])
            } else {
                0
            };
            let b = stage.max(out);
            match (lay.pipeline, first == Some(g)) {
                (false, false) => b,
                // A local GPU (Vulkan, CUDA) keeps the masks it is sent
                // among its inputs, in the stage already, and beside the
                // logits when it computes them (measured on lavapipe: the
                // instruct demo's 32 MiB mask at 32k; on an H200, every
                // dense model's full offload); an RPC worker copies them.
                (false, true) if lay.is_local(g) => {
                    let out = if out > 0 {
                        sum([out, c.sent.saturating_sub(masks)])
                    } else {
                        0
                    };
                    sum([stage.max(out), product([3, c.et4])])
                }
                (false, true) => sum([b, product([3, c.et4]), c.sent.saturating_sub(masks)]),
                (true, true) => sum([b, product([3, c.sent]), product([14, c.et4])]),
                (true, false) => sum([b, product([4, c.sent]), product([8, c.et4])]),
            }
        })
        .collect();
    // The compute buffer is touched only as far as a real batch reaches: the
    // activations of a full ubatch, and one logits row per sequence.
    let cpu_runs_layers = lay.cpu_layers > 0 || !uses_gpu;
    let cpu_touched = if cpu_runs_layers {
        sum([c.inputs, c.layer_peak])
    } else {
        c.inputs
    };
    // Without flash attention the CPU converts the whole KQ matrix to f16 in its work
    // buffer (`ggml_graph_plan`): half the KQ tensor, outside every llama.cpp buffer.
    let n_head = u64::from(p.n_head.iter().copied().max().unwrap_or(0));
    let work = if !ctx.flash_attn && cpu_runs_layers {
        product([u64::from(ctx.n_ctx_seq), u64::from(ctx.n_tokens), n_head, 2])
    } else {
        0
    };
    ComputeBuffers {
        cpu,
        cpu_touched: cpu_touched.min(cpu),
        gpu,
        output: product([p.n_vocab, u64::from(ctx.n_seq), 4]),
        work,
    }
}

/// What the process holds, in the two views the module docs keep apart.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Residency {
    /// Our baseline (runtime, tokenizer tables, CUDA host runtime): resident.
    base: u64,
    /// Resident anonymous bytes at the peak.
    anonymous: u64,
    /// Resident file-mapped bytes at the peak.
    mapped: u64,
    /// Mapped bytes read on every token.
    mapped_working: u64,
    /// Allocated (virtual) bytes, what `RLIMIT_AS`/`RLIMIT_DATA` count.
    allocated: u64,
}

/// Process residency: which host bytes are anonymous (repacked weights, plain
/// weights read without mmap, the CPU's KV cache, the touched part of the
/// compute buffers, our baseline) and which are file-mapped (the plain CPU
/// weights' span, with mmap); and the allocated total process limits count,
/// the whole file mapping and the untouched compute buffer included.
fn residency(
    p: &ModelProfile,
    settings: &Settings,
    m: &MachineSpec,
    lay: &Layout,
    b: &Buffers,
) -> Residency {
    let Buffers {
        weights: w,
        kv,
        compute: c,
    } = b;
    let mapped = w.mapped_bytes(settings.mmap);
    let vocab_overhead = product([p.n_vocab, overhead::PER_TOKEN]);
    // The CUDA runtime's host side: only a local CUDA GPU brings it (an RPC
    // worker's runtime lives in the worker; Vulkan's is this build's
    // backend initialisation, which every plan of this machine counts).
    let local_gpu = m.gpus.iter().any(|g| g.backend() == Backend::Cuda);
    let cuda_host = if lay.uses_gpu && local_gpu {
        overhead::CUDA_HOST
    } else {
        0
    };
    let (server, server_threads) = match settings.front_end {
        FrontEnd::Cli => (0, 0),
        FrontEnd::Server => (overhead::SERVER, overhead::SERVER_THREADS),
    };
    let base = sum([
        overhead::CPU_BASE,
        vocab_overhead,
        cuda_host,
        server,
        m.runtime_bytes,
    ]);
    let cpu_plain_anon = if settings.mmap { 0 } else { w.cpu_plain };
    let anonymous = sum([
        w.cpu_repack,
        cpu_plain_anon,
        kv.cpu,
        c.cpu_touched,
        c.work,
        c.output,
        base,
    ]);
    let threads = u64::from(m.threads.max(1)) + server_threads;
    let allocated = sum([
        p.file_bytes(),
        w.cpu_repack,
        cpu_plain_anon,
        kv.cpu,
        c.cpu,
        c.work,
        c.output,
        overhead::VIRTUAL_BASE,
        product([threads, overhead::VIRTUAL_PER_THREAD]),
        m.runtime_virtual_bytes,
    ]);
    Residency {
        base,
        anonymous,
        mapped,
        // Repacked weights are read from the mapping once, at load; only the
        // weights used in place must stay in the page cache while it runs.
        mapped_working: if settings.mmap {
            w.cpu_plain.min(mapped)
        } else {
            0
        },
        allocated,
    }
}

/// The memory a Vulkan device allocates at the first decode, outside
/// llama.cpp's accounting. On a software device (lavapipe, which has no
/// matrix pipeline for quantized weights), every product of a quantized
/// weight dequantizes it to f16 in `prealloc_x` (`ggml_vk_mul_mat_q_f16`),
/// which grows to the largest such weight, and converts its input in
/// `prealloc_y` (a ubatch of the widest rows); plus staging. Measured on
/// lavapipe: the instruct demo with every layer there peaks within a few
/// percent of the plan (`app/tests/run/vulkan.rs`). Other Vulkan devices
/// keep [`overhead::VULKAN_CONTEXT`], an estimate until one is measured.
fn vulkan_scratch(
    p: &ModelProfile,
    ctx: &Context,
    placement: &Placement,
    lay: &Layout,
    spec: &GpuSpec,
    g: usize,
) -> u64 {
    let software = spec
        .llama
        .as_ref()
        .is_some_and(|l| crate::hw::is_software_device(&l.description));
    if !software {
        return overhead::VULKAN_CONTEXT;
    }
    let elements = |t: &Tensor| t.dims.iter().copied().fold(1u64, u64::saturating_mul);
    let on_device = p
        .layers
        .iter()
        .enumerate()
        .filter(|&(il, _)| placement.device_of(p.n_layer, il as u32) == Some(g))
        .flat_map(|(_, l)| &l.tensors)
        .chain(
            (lay.out_dev == Some(g))
                .then_some(p.output.as_ref().or(p.token_embd.as_ref()))
                .flatten(),
        )
        .filter(|t| t.dims.len() >= 2 && t.ty.is_quantized() && spec.takes(t));
    let x = on_device
        .map(|t| product([elements(t), 2]))
        .max()
        .unwrap_or(0)
        .min(spec.max_tensor_bytes());
    let widest = p
        .layers
        .iter()
        .flat_map(|l| &l.tensors)
        .filter_map(|t| t.dims.first().copied())
        .fold(u64::from(p.n_embd), u64::max);
    let y = product([u64::from(ctx.n_tokens), widest, 4]);
    sum([x, y, overhead::VULKAN_SOFTWARE_STAGING])
}

/// The per-device table (CPU first, then each GPU) with the buffers as
/// llama.cpp names them, our overheads and the margins.
fn device_uses(
    settings: &Settings,
    m: &MachineSpec,
    lay: &Layout,
    b: &Buffers,
    base: u64,
    scratch: &[u64],
    cuda_context: u64,
) -> Vec<DeviceUse> {
    let Buffers {
        weights: w,
        kv,
        compute: c,
    } = b;
    let uses_gpu = lay.uses_gpu;
    // The CPU's compute buffer is in the first device's pinned host memory
    // when it has one (`llama-context.cpp`); RPC devices come first in
    // llama.cpp's list and have none, so with a worker it is plain "CPU".
    let pinned = uses_gpu && m.gpus.first().is_some_and(|g| g.kind != DeviceKind::Rpc);
    let host_buffer = m
        .gpus
        .first()
        .and_then(|g| g.llama.as_ref())
        .map_or_else(|| "CUDA_Host".to_string(), LlamaDevice::host_buffer);
    let margin_ram = settings
        .margin_bytes
        .unwrap_or_else(|| (m.ram_budget_bytes / 20).max(overhead::RAM_MARGIN_MIN));
    let mut devices = Vec::with_capacity(1 + lay.n_gpu);
    let mut cpu_buffers = vec![BufferUse {
        name: "CPU".into(),
        model_bytes: w.cpu_plain,
        context_bytes: kv.cpu,
        compute_bytes: if pinned { 0 } else { c.cpu },
    }];
    if pinned {
        cpu_buffers.push(BufferUse {
            name: host_buffer,
            model_bytes: 0,
            context_bytes: 0,
            compute_bytes: c.cpu,
        });
    }
    if w.cpu_repack > 0 {
        cpu_buffers.push(BufferUse {
            name: "CPU_REPACK".into(),
            model_bytes: w.cpu_repack,
            context_bytes: 0,
            compute_bytes: 0,
        });
    }
    let cpu_weights = sum([w.cpu_plain, w.cpu_repack]);
    let cpu_compute = sum([c.cpu, c.output]);
    devices.push(DeviceUse {
        name: "CPU".into(),
        kind: DeviceKind::Cpu,
        budget_bytes: m.ram_budget_bytes,
        weights_bytes: cpu_weights,
        kv_bytes: kv.cpu,
        compute_bytes: cpu_compute,
        overhead_bytes: base,
        margin_bytes: margin_ram,
        total_bytes: sum([cpu_weights, kv.cpu, cpu_compute, base, margin_ram]),
        n_layers: lay.cpu_layers,
        buffers: cpu_buffers,
    });
    for (g, spec) in m.gpus.iter().enumerate() {
        let overhead = match (spec.kind, spec.backend()) {
            (DeviceKind::Unified, _) => overhead::UNIFIED_CONTEXT,
            // The worker's backend context is in the worker, not here; what
            // it allocates is exactly its buffers.
            (DeviceKind::Rpc, _) | (_, Backend::Rpc) => 0,
            (_, Backend::Vulkan) => scratch.get(g).copied().unwrap_or(overhead::VULKAN_CONTEXT),
            (_, Backend::Cuda) => cuda_context,
        };
        let used = sum([w.gpu[g], kv.gpu[g], c.gpu[g]]);
        // A GPU the plan leaves empty is never initialised: no context, no margin.
        let (overhead, margin) = if used == 0 {
            (0, 0)
        } else {
            (
                overhead,
                settings.margin_bytes.unwrap_or(overhead::GPU_MARGIN),
            )
        };
        devices.push(DeviceUse {
            name: spec.name.clone(),
            kind: spec.kind,
            budget_bytes: spec.budget_bytes,
            weights_bytes: w.gpu[g],
            kv_bytes: kv.gpu[g],
            compute_bytes: c.gpu[g],
            overhead_bytes: overhead,
            margin_bytes: margin,
            total_bytes: sum([used, overhead, margin]),
            n_layers: lay.layers_gpu.get(g).copied().unwrap_or(0),
            buffers: vec![BufferUse {
                name: spec.buffer_name(g),
                model_bytes: w.gpu[g],
                context_bytes: kv.gpu[g],
                compute_bytes: c.gpu[g],
            }],
        });
    }
    devices
}

/// `serve --embeddings`: a second llama.cpp context of `n_ctx` tokens on
/// the same weights, one sequence, its physical batch the whole context (an
/// input is pooled from one batch), every token an output: its KV cache and
/// compute buffers on the devices the layers use, and its host output
/// buffer, which holds logits and an embedding row for every token of the
/// batch (`llama_context::output_reserve`). Added into `b`; returns their
/// sum.
fn add_embedding_context(
    p: &ModelProfile,
    settings: &Settings,
    n_ctx: u32,
    placement: &Placement,
    lay: &Layout,
    b: &mut Buffers,
) -> u64 {
    let s = Settings {
        n_ctx: Some(n_ctx),
        n_batch: n_ctx,
        n_ubatch: n_ctx,
        n_parallel: 1,
        logits_per_sequence: false,
        embeddings: None,
        ..settings.clone()
    };
    let ctx = Context::resolve(&s, n_ctx);
    let kv = kv_per_device(p, &ctx, placement, lay);
    let c = compute_buffers(p, &ctx, lay);
    let output = product([
        sum([p.n_vocab, u64::from(p.n_embd)]),
        u64::from(ctx.n_tokens),
        4,
    ]);
    b.kv.cpu = sum([b.kv.cpu, kv.cpu]);
    b.compute.cpu = sum([b.compute.cpu, c.cpu]);
    // Every token is an output there: the batch reaches the logits of all
    // of them, so the whole buffer is touched (measured: the instruct demo
    // at 512 tokens grew 205 MiB resident).
    b.compute.cpu_touched = sum([b.compute.cpu_touched, c.cpu]);
    b.compute.output = sum([b.compute.output, output]);
    // Each context plans its own work buffer.
    b.compute.work = sum([b.compute.work, c.work]);
    for (g, (k, cg)) in kv.gpu.iter().zip(&c.gpu).enumerate() {
        if let (Some(bk), Some(bc)) = (b.kv.gpu.get_mut(g), b.compute.gpu.get_mut(g)) {
            *bk = sum([*bk, *k]);
            *bc = sum([*bc, *cg]);
        }
    }
    let on_gpus: u64 = kv
        .gpu
        .iter()
        .chain(&c.gpu)
        .copied()
        .fold(0, |a, x| sum([a, x]));
    sum([kv.cpu, c.cpu, output, c.work, on_gpus])
}

/// Estimate allocation and residency for one placement and context: the
/// weights placement, the KV cache and the compute buffers per device, then
/// what the process holds resident and allocated.
#[must_use]
pub fn estimate(
    p: &ModelProfile,
    settings: &Settings,
    ctx: &Context,
    placement: &Placement,
    m: &MachineSpec,
) -> Estimate {
    let lay = Layout::new(p, placement, m);
    // A CUDA build puts the CUDA_Host buffer type ahead of the CPU's extra types,
    // and with mmap such weights land in plain CPU memory: no repacking when a GPU
    // backend is present (`make_cpu_buft_list`, `llama-model-loader.cpp:1271`).
    let repack_active = settings.repack && lay.n_gpu == 0;
    let mut b = Buffers {
        weights: place_weights(p, placement, &lay, m, repack_active),
        kv: kv_per_device(p, ctx, placement, &lay),
        compute: compute_buffers(p, ctx, &lay),
    };
    let embeddings_bytes = settings.embeddings.map_or(0, |n| {
        add_embedding_context(p, settings, n, placement, &lay, &mut b)
    });
    let r = residency(p, settings, m, &lay, &b);
    let scratch: Vec<u64> = m
        .gpus
        .iter()
        .enumerate()
        .map(|(g, spec)| vulkan_scratch(p, ctx, placement, &lay, spec, g))
        .collect();
    let cuda_context = if p.experts.is_some() {
        sum([overhead::CUDA_CONTEXT, overhead::CUDA_EXPERT_KERNELS])
    } else {
        overhead::CUDA_CONTEXT
    };
    let devices = device_uses(settings, m, &lay, &b, r.base, &scratch, cuda_context);
    let mut active_bytes = vec![b.weights.cpu_active];
    active_bytes.extend(b.weights.gpu_active);
    let mut chain = vec![0];
    for il in 0..=p.n_layer {
        let d = placement
            .device_of(p.n_layer, il)
            .filter(|&g| g < lay.n_gpu)
            .map_or(0, |g| g + 1);
        if chain.last() != Some(&d) {
            chain.push(d);
        }
    }
    Estimate {
        ctx: *ctx,
        embeddings_bytes,
        devices,
        anonymous_bytes: r.anonymous,
        mapped_bytes: r.mapped,
        mapped_working_bytes: r.mapped_working,
        allocated_bytes: r.allocated,
        active_bytes,
        cpu_active_plain_bytes: b.weights.cpu_active_plain,
        chain,
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod tests_zoo;

#[cfg(test)]
mod tests_cuda;
