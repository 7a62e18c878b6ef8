//! The real test model (the demo model), shared by the test binaries.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// `HEADROOM_TEST_MODEL` when set, else what `headroom demo-model` prints
/// (fetching and verifying it first); asked once per test binary.
pub fn demo_model() -> PathBuf {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            if let Some(p) = std::env::var_os("HEADROOM_TEST_MODEL") {
                return PathBuf::from(p);
            }
            let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
                .arg("demo-model")
                .output()
                .expect("run headroom demo-model");
            assert!(
                out.status.success(),
                "headroom demo-model failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        })
        .clone()
}
