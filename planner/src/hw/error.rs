//! Errors from the parts of the hardware module that take user input: sizes,
//! profiles and overrides. Probing itself never fails (it writes notes).

use std::path::PathBuf;

/// Something the user gave us about the hardware is wrong.
#[derive(Debug, thiserror::Error)]
pub enum HwError {
    /// A size such as `--ram 16GiB` did not parse.
    #[error("invalid size \"{input}\": {reason}")]
    InvalidSize {
        /// The text as the user wrote it.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A hardware profile could not be read from disk.
    // The I/O error is part of the message, not a `source`: printed as a
    // chain (`{:#}`) it would otherwise appear twice.
    #[error("cannot read hardware profile {}: {error}", path.display())]
    ProfileRead {
        /// The profile file.
        path: PathBuf,
        /// The underlying I/O error.
        error: std::io::Error,
    },
    /// A hardware profile is not valid TOML or has unknown/mistyped keys.
    #[error("hardware profile {} is malformed: {message}", path.display())]
    ProfileParse {
        /// The profile file.
        path: PathBuf,
        /// The TOML parser's message (names the key and line).
        message: String,
    },
    /// A hardware profile parses but describes an impossible machine.
    #[error("hardware profile {} is inconsistent: {reason}", path.display())]
    ProfileInvalid {
        /// The profile file.
        path: PathBuf,
        /// What is inconsistent.
        reason: String,
    },
    /// A snapshot could not be written as a profile.
    #[error("cannot write hardware profile: {reason}")]
    ProfileWrite {
        /// What the TOML writer objected to.
        reason: String,
    },
    /// `--ram`/`--vram` values that cannot describe a machine.
    #[error("invalid hardware override: {reason}")]
    InvalidOverride {
        /// What is wrong.
        reason: String,
    },
}
