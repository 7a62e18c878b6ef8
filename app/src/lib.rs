//! The `headroom` application, in folders that follow the data path:
//! `source` (MODEL → GGUF header → profile, the hub) and `catalog` feed the
//! planner; `runner` (preflight, the load, the engine, templates,
//! measurement) executes a plan on `llama` (llama.cpp and the C++ shim);
//! `render` and `tui` show results; `cli` is what was typed; `commands` is a
//! thin leaf that nothing imports.
//!
//! Kept as a library beside the thin `main.rs` so integration tests and
//! benchmarks can reach the llama.cpp accounting shim and the demo-model cache.

pub mod catalog;
pub mod cli;
pub mod commands;
pub mod error;
pub mod files;
pub mod llama;
pub mod render;
pub mod runner;
pub mod server;
pub mod source;
pub mod tui;
