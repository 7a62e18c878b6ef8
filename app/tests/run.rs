//! End-to-end tests of `headroom run` on the real binary and the real test
//! model (issue #3's acceptance): the same text twice at `--temp 0`, the
//! `--json` object against `plan --json`, measured against planned RAM peaks
//! (the demo model and a synthetic 1B llama), refusals that read no weights,
//! Ctrl-C, bad usage, `--stop`, and the calibration `plan` shows afterwards;
//! and `headroom serve` driven by the official OpenAI client (`serve`).
//!
//! Every test gets its own `HEADROOM_DATA_DIR`, so the calibration log never
//! touches the user's. Model runs take a lock and run one at a time.
//!
//! Run with `cargo test --release -p headroom --test run` (`-- --nocapture`
//! prints the memory table).

#[path = "support/accounting_cases.rs"]
mod accounting_cases;
#[path = "../benches/common/mod.rs"]
mod bench_common;
#[path = "run/calibration.rs"]
mod calibration;
#[path = "support/checks.rs"]
mod checks;
#[path = "cli/corpus.rs"]
mod corpus;
#[path = "support/demo.rs"]
mod demo;
#[path = "run/hostile.rs"]
mod hostile;
#[path = "run/interrupt.rs"]
mod interrupt;
#[path = "run/memory.rs"]
mod memory;
#[path = "run/output.rs"]
mod output;
#[path = "run/refuse.rs"]
mod refuse;
#[path = "run/rpc.rs"]
mod rpc;
#[path = "support/rpc_worker.rs"]
mod rpc_worker;
#[path = "run/run_load.rs"]
mod run_load;
#[path = "run/serve.rs"]
mod serve;
#[path = "run/soak.rs"]
mod soak;
#[path = "run/support.rs"]
mod support;
#[path = "run/template.rs"]
mod template;
#[path = "run/usage.rs"]
mod usage;
#[path = "run/vulkan.rs"]
mod vulkan;
