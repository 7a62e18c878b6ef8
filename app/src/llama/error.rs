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
        "accounting shim ABI mismatch: {0} (rebuild headroom; app/shim/accounting.h and app/src/llama/ffi.rs disagree)"
    )]
    AbiMismatch(#[from] AbiError),
    /// The shim returned a status this code does not know.
    #[error("accounting shim returned unknown status {code}: {detail}")]
    Unknown {
        /// Raw status.
        code: i32,
        /// Message from the shim.
        detail: String,
    },
}

/// How the linked C++ shim and the Rust mirrors of its structs
/// (`app/src/llama/ffi.rs`) disagree. Checked once per process and cached,
/// hence `Clone`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AbiError {
    /// `HR_ABI_VERSION` differs: a stale shim object or an unsynced bump.
    #[error("shim ABI version {shim}, Rust expects {rust}")]
    Version {
        /// What the shim reports.
        shim: i32,
        /// What ffi.rs declares.
        rust: i32,
    },
    /// Some struct size or field offset differs, or exists on one side only.
    #[error("struct layouts differ: {}", list(.0))]
    Layout(Vec<LayoutMismatch>),
}

/// One `sizeof` or `offsetof` that the two sides disagree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutMismatch {
    /// `"hr_params"` (its size) or `"hr_params.path"` (that field's offset).
    pub item: String,
    /// The C++ compiler's value; `None` when the C++ table lacks the item.
    pub c: Option<usize>,
    /// Rust's value; `None` when the Rust mirror lacks the item.
    pub rust: Option<usize>,
}

impl std::fmt::Display for LayoutMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.c, self.rust) {
            (Some(c), Some(r)) => write!(f, "{} is {c} in C, {r} in Rust", self.item),
            (Some(_), None) => write!(f, "{} is in C only", self.item),
            (None, Some(_)) => write!(f, "{} is in Rust only", self.item),
            (None, None) => write!(f, "{}", self.item),
        }
    }
}

fn list(items: &[LayoutMismatch]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
