//! GGUF header reading and writing, and the ggml tensor type table.
//!
//! The planner predicts llama.cpp's memory use from a model's GGUF header
//! alone, so this module is its only view of a model: hyper-parameters come
//! from the metadata, weight sizes from tensor shapes and types. The reader
//! accepts exactly what the vendored llama.cpp `gguf.cpp` accepts and is safe
//! on hostile files; the writer makes synthetic models and test fixtures.
//!
//! ```
//! use headroom_planner::gguf::{parse_header, writer::{HeaderBuilder, to_bytes}, GgmlType};
//! let h = HeaderBuilder::new()
//!     .kv("general.architecture", "llama")
//!     .tensor("token_embd.weight", &[4096, 32000], GgmlType::Q4_K)
//!     .build()?;
//! assert_eq!(parse_header(&to_bytes(&h)?)?, h);
//! # Ok::<(), headroom_planner::gguf::GgufError>(())
//! ```

mod error;
mod header;
mod read_value;
mod reader;
mod source;
mod types;
mod value;
pub mod writer;

pub use error::GgufError;
pub use header::{Header, TensorInfo};
pub use reader::{
    DEFAULT_ALIGNMENT, MAX_ARRAY_LEN, MAX_DIMS, MAX_STRING_LEN, MAX_TENSOR_NAME, MAX_VERSION,
    ParseLimits, parse_header, parse_header_with, read_header, read_header_from_file,
    read_header_with,
};
pub use types::GgmlType;
pub use value::{Array, ArrayItems, Value, ValueType};
