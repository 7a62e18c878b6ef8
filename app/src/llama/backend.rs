//! One llama.cpp backend per process.
//!
//! llama-cpp-2's [`LlamaBackend::init`] succeeds only once per process (a second
//! call returns `BackendAlreadyInitialized`), and dropping the handle frees the
//! backend. Every part of headroom that needs llama.cpp initialised goes
//! through [`shared`], which initialises it on first use and never drops it.

use llama_cpp_2::llama_backend::LlamaBackend;
use std::sync::OnceLock;

static SHARED: OnceLock<Option<LlamaBackend>> = OnceLock::new();

/// Whether [`shared`] has initialised llama.cpp's backend in this process.
#[must_use]
pub fn started() -> bool {
    SHARED.get().is_some()
}

/// Initialises llama.cpp's backend once for the whole process (thread-safe) and
/// returns the handle.
///
/// Returns `None` when code outside this function initialised the backend
/// first (llama-cpp-2 then refuses a second handle). llama.cpp IS initialised
/// in that case, so callers that only need initialisation — the accounting
/// shim — can proceed; callers that need the handle itself should make sure
/// every initialisation goes through here.
pub fn shared() -> Option<&'static LlamaBackend> {
    // `init` can only fail with BackendAlreadyInitialized, which means the
    // backend is already up: nothing to report beyond the `None`.
    SHARED.get_or_init(|| LlamaBackend::init().ok()).as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_returns_the_same_handle_every_time() {
        let a = shared().map(|b| b as *const LlamaBackend);
        let b = shared().map(|b| b as *const LlamaBackend);
        assert!(
            a.is_some(),
            "nothing else in this test binary initialises llama.cpp"
        );
        assert_eq!(a, b);
        // A direct init now must be refused: proof that `shared` really holds it.
        assert!(LlamaBackend::init().is_err());
    }
}
