//! headroom's direct line into llama.cpp, beyond what llama-cpp-2 wraps.
//!
//! * [`accounting`]: llama.cpp's own per-buffer memory accounting for a model
//!   and context (through the C++ shim in `app/shim/`), without reading weights —
//!   the ground truth the header-only planner is calibrated against.
//! * [`params`], [`usage`], [`error`]: its inputs, outputs and failures.
//! * [`quant`]: llama.cpp's quantization type choices, to check synthetic models.
//! * [`backend`]: the one process-wide llama.cpp backend handle.
//! * [`devices`]: the GPUs of llama.cpp's backend registry, and what starting
//!   the backends cost; [`device_speed`]: how fast one the GPU table does
//!   not know really is, measured on it.
//! * [`log`]: llama.cpp's last error lines, for messages about failed loads,
//!   and why the shim's own log captures cannot cross threads.
//! * [`vocab`]: tokenizing through the shim, so a tokenizer that throws is an error.
//! * [`grammar`]: JSON schemas as grammars, by llama.cpp's own converter.

pub mod accounting;
pub mod backend;
pub mod decode;
pub mod device_speed;
pub mod devices;
pub mod error;
mod ffi;
pub mod grammar;
pub mod log;
pub mod params;
pub mod quant;
pub mod rpc;
pub mod template;
pub mod usage;
pub mod vocab;

pub use accounting::{breakdown, memory_breakdown};
pub use error::{AbiError, AccountingError, LayoutMismatch};
pub use params::{AccountingParams, FlashAttn, SplitMode, TensorOverride};
pub use quant::{QuantModel, QuantTensor, quant_types};
pub use usage::{Breakdown, BufferUse, ContextInfo, DeviceKind};

/// The llama.cpp build this binary links, as `app/build.rs` read it from that
/// build (llama-cpp-sys-2's manifest, llama.cpp's generated version header,
/// ggml's package version), e.g. `llama-cpp-sys-2 0.1.160 (llama.cpp
/// 0.6.0-dev, ggml 0.26.0)`. Generated, so it cannot go stale when the pin moves.
#[must_use]
pub fn llama_cpp_version() -> String {
    env!("HEADROOM_LLAMA_CPP_VERSION").to_string()
}

/// Whether this build can use GPUs.
#[must_use]
pub fn gpu_build() -> bool {
    cfg!(any(feature = "cuda", feature = "vulkan", feature = "metal"))
}
