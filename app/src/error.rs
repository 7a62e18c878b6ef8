//! The kinds of failure that decide the exit code, typed once for every
//! command: bad usage (exit 2) and a plan that does not fit (exit 3); any
//! other error exits 1.

/// Exit code: the plan does not fit.
pub const EXIT_DOES_NOT_FIT: u8 = 3;
/// Exit code: bad usage.
pub const EXIT_USAGE: u8 = 2;

/// An error that is the user's way of calling us, not a failure (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl UsageError {
    /// Any error, reported as bad usage with its whole chain on one line.
    pub fn from_chain(e: &anyhow::Error) -> Self {
        Self(format!("{e:#}"))
    }
}

/// The exit code for an error.
#[must_use]
pub fn exit_code_for(err: &anyhow::Error) -> u8 {
    if err
        .chain()
        .any(|c| c.downcast_ref::<UsageError>().is_some())
    {
        EXIT_USAGE
    } else {
        1
    }
}
