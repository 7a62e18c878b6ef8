//! Every way a GGUF header can be unreadable, with the facts needed to act.
//!
//! The checks mirror what the vendored llama.cpp `ggml/src/gguf.cpp` (and the
//! model loader's file-bounds check) refuse, so a header this crate accepts is
//! one llama.cpp will open. `Truncated` is special: it carries the prefix
//! length that would let parsing progress, so a caller holding only the start
//! of a file (an HTTP range, a partial download) knows how much more to fetch.

use super::types::GgmlType;
use super::value::ValueType;

/// An error reading or writing a GGUF header.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GgufError {
    /// The input ended before the header did.
    #[error("GGUF header is truncated: need at least {needed} bytes, only {have} available")]
    Truncated {
        /// Smallest total input length that lets parsing get further.
        needed: u64,
        /// Bytes that were available.
        have: u64,
    },
    /// The file does not start with `GGUF`.
    #[error("not a GGUF file: it starts with bytes {found:02x?}, expected \"GGUF\"")]
    BadMagic {
        /// The first four bytes.
        found: [u8; 4],
    },
    /// A GGUF version llama.cpp does not read (0, 1 or newer than 3).
    #[error("GGUF version {version} is not supported (llama.cpp reads versions 2 and 3)")]
    UnsupportedVersion {
        /// The version field.
        version: u32,
    },
    /// The version field only makes sense byte-swapped.
    #[error(
        "GGUF version field {version:#010x} looks byte-swapped: big-endian GGUF files are not supported"
    )]
    BigEndian {
        /// The version field as read little-endian.
        version: u32,
    },
    /// A metadata value (or array element) has a type id outside 0..=12.
    #[error("metadata key {key:?} has unknown value type id {id}")]
    UnknownValueType {
        /// The key whose value is bad.
        key: String,
        /// The type id found.
        id: u32,
    },
    /// A tensor has a ggml type id that is unused or no longer supported.
    #[error("tensor {name:?} has unknown or removed ggml type id {id}")]
    UnknownTensorType {
        /// The tensor.
        name: String,
        /// The type id found.
        id: u32,
    },
    /// A size or offset does not fit 64-bit arithmetic.
    #[error("{what} overflows 64-bit arithmetic")]
    Overflow {
        /// What was being computed.
        what: String,
    },
    /// Two metadata entries share a key.
    #[error("duplicate metadata key {key:?}")]
    DuplicateKey {
        /// The repeated key.
        key: String,
    },
    /// A metadata key is the empty string.
    #[error("metadata key number {index} is empty")]
    EmptyKey {
        /// Position of the entry (0-based).
        index: u64,
    },
    /// Two tensors share a name.
    #[error("duplicate tensor name {name:?}")]
    DuplicateTensor {
        /// The repeated name.
        name: String,
    },
    /// A count or length is above what this reader (or llama.cpp) accepts.
    #[error("{what} is {len}, above the limit of {cap}")]
    TooLarge {
        /// What was counted.
        what: String,
        /// The value found.
        len: u64,
        /// The largest value accepted.
        cap: u64,
    },
    /// A key or tensor name is not UTF-8.
    #[error("{what} at byte offset {offset} is not valid UTF-8")]
    InvalidUtf8 {
        /// Which string.
        what: String,
        /// File offset of the string's bytes.
        offset: u64,
    },
    /// `general.alignment` is stored with a type other than `u32`.
    #[error("general.alignment must be a u32 but is a {found}")]
    AlignmentType {
        /// The type found.
        found: ValueType,
    },
    /// `general.alignment` is zero or not a power of two.
    #[error("general.alignment is {value}; it must be a non-zero power of two")]
    BadAlignment {
        /// The alignment found.
        value: u64,
    },
    /// A tensor's shape is not one llama.cpp accepts.
    #[error("tensor {name:?} has bad dimensions {dims:?}: {reason}")]
    BadDims {
        /// The tensor.
        name: String,
        /// The dimensions read so far.
        dims: Vec<u64>,
        /// Why they are refused.
        reason: &'static str,
    },
    /// A tensor's row length is not a whole number of quantization blocks.
    #[error(
        "tensor {name:?}: a row of {ne0} elements is not a multiple of the {ty} block size {block}"
    )]
    PartialBlock {
        /// The tensor.
        name: String,
        /// Its type.
        ty: GgmlType,
        /// Elements per row.
        ne0: u64,
        /// Elements per block of `ty`.
        block: u64,
    },
    /// A tensor's data offset is not a multiple of the alignment.
    #[error(
        "tensor {name:?} starts at data offset {offset}, not a multiple of the alignment {alignment}"
    )]
    MisalignedTensor {
        /// The tensor.
        name: String,
        /// Its offset within the data section.
        offset: u64,
        /// The file's alignment.
        alignment: u64,
    },
    /// A tensor starts before the previous one (plus padding) ends.
    #[error("tensor {b:?} overlaps or precedes tensor {a:?} in the data section")]
    OverlappingTensors {
        /// The tensor listed first.
        a: String,
        /// The tensor listed next, starting too early.
        b: String,
    },
    /// A tensor does not start right after the previous one (llama.cpp
    /// requires tensors packed in order, each padded to the alignment).
    #[error("tensor {name:?} starts at data offset {offset}, but llama.cpp expects {expected}")]
    UnexpectedTensorOffset {
        /// The tensor.
        name: String,
        /// Its offset within the data section.
        offset: u64,
        /// Where packing puts it.
        expected: u64,
    },
    /// A tensor's data extends past the end of the file.
    #[error("tensor {name:?} ends at byte {end} but the file has only {file_len} bytes")]
    TensorOutsideFile {
        /// The tensor.
        name: String,
        /// Absolute file offset of its end.
        end: u64,
        /// The file length.
        file_len: u64,
    },
    /// The writer was given an array whose items were not kept.
    #[error("metadata key {key:?} holds an array whose items were skipped; it cannot be written")]
    SkippedArray {
        /// The key.
        key: String,
    },
    /// Reading or writing failed.
    #[error("I/O error on GGUF file: {0}")]
    Io(#[from] std::io::Error),
}
