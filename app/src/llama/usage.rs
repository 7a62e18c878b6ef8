//! What llama.cpp's memory accounting reports: bytes per backend buffer type,
//! split into weights, context (KV cache) and compute, plus the context facts
//! llama.cpp resolved. Plain data, produced by [`super::accounting`].

/// Memory one backend buffer type would hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferUse {
    /// Buffer type name as llama.cpp prints it: "CPU", "CPU_REPACK", "CUDA0", "CUDA_Host".
    pub name: String,
    /// Device of the buffer type ("CPU", "CUDA0"); empty when it has none.
    pub device: String,
    /// What kind of memory the device has: decides which budget (RAM or a
    /// GPU's VRAM) this row counts against.
    pub device_kind: DeviceKind,
    /// Weights, bytes.
    pub model: u64,
    /// KV cache / recurrent state, bytes.
    pub context: u64,
    /// Compute (scratch) buffers, bytes.
    pub compute: u64,
    /// ggml's `buft_is_host`: plain host memory the CPU reads directly. True for
    /// "CPU" and pinned "CUDA_Host"; FALSE for "CPU_REPACK" although it is in RAM
    /// (its layout is private) — use [`BufferUse::in_ram`] for budgeting.
    pub is_host: bool,
}

/// `enum ggml_backend_dev_type` of a buffer's device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    /// System memory.
    Cpu,
    /// Discrete GPU with its own memory.
    Gpu,
    /// Integrated GPU using system memory.
    IntegratedGpu,
    /// Accelerator working with the CPU backend (BLAS, AMX).
    Accel,
    /// Meta device wrapping several devices (tensor parallelism).
    Meta,
    /// No device, or a kind this code does not know.
    Unknown,
}

impl DeviceKind {
    pub(crate) fn from_raw(raw: i32) -> DeviceKind {
        match raw {
            0 => DeviceKind::Cpu,
            1 => DeviceKind::Gpu,
            2 => DeviceKind::IntegratedGpu,
            3 => DeviceKind::Accel,
            4 => DeviceKind::Meta,
            _ => DeviceKind::Unknown,
        }
    }
}

impl BufferUse {
    /// Whether these bytes come out of system RAM rather than dedicated GPU
    /// memory (CPU, CPU_REPACK, pinned host buffers, accelerators, iGPUs).
    pub fn in_ram(&self) -> bool {
        self.is_host
            || matches!(
                self.device_kind,
                DeviceKind::Cpu | DeviceKind::Accel | DeviceKind::IntegratedGpu
            )
    }

    /// `model + context + compute`, saturating.
    pub fn total(&self) -> u64 {
        self.model
            .saturating_add(self.context)
            .saturating_add(self.compute)
    }
}

/// Facts llama.cpp resolved while creating the context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ContextInfo {
    /// Context length actually created (0 resolved to the training length).
    pub n_ctx: u32,
    /// Training context length from the GGUF.
    pub n_ctx_train: u32,
    /// Logical batch actually used.
    pub n_batch: u32,
    /// Micro-batch actually used.
    pub n_ubatch: u32,
    /// Parallel sequences.
    pub n_seq_max: u32,
    /// Transformer blocks.
    pub n_layer: i32,
    /// Vocabulary size.
    pub n_vocab: i32,
    /// Parameter count.
    pub n_params: u64,
    /// Sum of tensor bytes in the file (`llama_model_size`).
    pub model_size: u64,
    /// Whether flash attention ended up on (`-fa auto` is decided by llama.cpp
    /// at context creation); `None` when llama.cpp did not say. Read from
    /// llama.cpp's log, as it has no API for it.
    pub flash_attn: Option<bool>,
}

/// Everything one query returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Breakdown {
    /// One row per buffer type, sorted by name (llama.cpp's own order is by
    /// buffer-type pointer, i.e. arbitrary).
    pub buffers: Vec<BufferUse>,
    /// Resolved context facts.
    pub info: ContextInfo,
}

impl Breakdown {
    /// Sum of every row's total.
    pub fn total(&self) -> u64 {
        self.buffers
            .iter()
            .fold(0u64, |acc, b| acc.saturating_add(b.total()))
    }

    /// Sum of the `model` column.
    pub fn model_total(&self) -> u64 {
        self.buffers
            .iter()
            .fold(0u64, |acc, b| acc.saturating_add(b.model))
    }

    /// The row for buffer type `name`, if llama.cpp used it.
    pub fn get(&self, name: &str) -> Option<&BufferUse> {
        self.buffers.iter().find(|b| b.name == name)
    }
}
