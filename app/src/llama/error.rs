//! Errors of the llama.cpp shim calls ([`super::accounting`], [`super::quant`]),
//! each carrying what llama.cpp said when it refused.

use std::path::PathBuf;

/// Why llama.cpp could not account for a model.
#[derive(Debug, thiserror::Error)]
pub enum AccountingError {
    /// The path cannot be passed to C (it contains a NUL byte).
    #[error("model path {path:?} contains a NUL byte")]
    NulInPath {
        /// The offending path.
        path: PathBuf,
    },
    /// A tensor override pattern or buffer type contains a NUL byte.
    #[error("tensor override {0:?} contains a NUL byte")]
    NulInOverride(String),
    /// llama.cpp rejected the file (unreadable, unknown architecture, missing key, bad tensor...).
    #[error("llama.cpp could not load {path}: {detail}")]
    ModelLoad {
        /// The model file.
        path: PathBuf,
        /// Our summary plus llama.cpp's last warning/error log lines.
        detail: String,
    },
    /// The model loaded but llama.cpp could not create a context with these parameters.
    #[error("llama.cpp could not create a context for {path}: {detail}")]
    ContextInit {
        /// The model file.
        path: PathBuf,
        /// Our summary plus llama.cpp's last warning/error log lines.
        detail: String,
    },
    /// A tensor override names a buffer type no device offers.
    #[error("{0}")]
    UnknownBufferType(String),
    /// A parameter was out of range for this llama.cpp build.
    #[error("invalid accounting parameter: {0}")]
    BadArgument(String),
    /// llama.cpp threw a C++ exception (caught in the shim).
    #[error("llama.cpp failed: {0}")]
    Exception(String),
    /// The compiled shim does not match the Rust declarations (a build problem).
    #[error(
        "accounting shim ABI mismatch: {what} (rebuild headroom; app/shim/accounting.h and app/src/llama/ffi.rs disagree)"
    )]
    AbiMismatch {
        /// Which check failed.
        what: String,
    },
    /// The shim returned a status this code does not know.
    #[error("accounting shim returned unknown status {code}: {detail}")]
    Unknown {
        /// Raw status.
        code: i32,
        /// Message from the shim.
        detail: String,
    },
}
