//! End-to-end tests of the `headroom` binary as a user runs it: `plan` (JSON
//! schema, exit codes, llama.cpp flags, curves, quantization choice, hostile
//! files) and `hw`. They check what a user or a script relies on — exit codes,
//! one-line errors, JSON fields and their arithmetic — never a machine's
//! exact numbers.
//!
//! Run with `cargo test --release -p headroom --test cli` (the release
//! profile shares llama.cpp's build with the other tests).

#[path = "support/accounting_cases.rs"]
mod accounting_cases;
#[path = "cli/accounting_quant.rs"]
mod accounting_quant;
#[path = "cli/accounting_smoke.rs"]
mod accounting_smoke;
#[path = "cli/catalog.rs"]
mod catalog;
#[path = "support/checks.rs"]
mod checks;
#[path = "cli/common.rs"]
mod common;
#[path = "cli/completions.rs"]
mod completions;
#[path = "cli/corpus.rs"]
mod corpus;
#[path = "cli/curve.rs"]
mod curve;
#[path = "cli/fit.rs"]
mod fit;
#[path = "cli/hostile.rs"]
mod hostile;
#[path = "cli/hw.rs"]
mod hw;
#[path = "cli/layers.rs"]
mod layers;
#[path = "cli/list.rs"]
mod list;
#[path = "support/models.rs"]
mod models;
#[path = "cli/plan.rs"]
mod plan;
#[path = "cli/planner_vs_llama.rs"]
mod planner_vs_llama;
#[path = "cli/quant.rs"]
mod quant;
#[path = "support/sandbox.rs"]
mod sandbox;
