//! The `headroom` application: command-line front end, llama.cpp glue and
//! output rendering around the pure `headroom-planner` library.
//!
//! Kept as a library beside the thin `main.rs` so integration tests and
//! benchmarks can reach the llama.cpp accounting shim and the demo-model cache.

pub mod calibration;
pub mod catalog;
pub mod chat;
pub mod cli;
pub mod commands;
pub mod demo;
pub mod files;
pub mod hub;
pub mod llama;
pub mod measure;
pub mod modelref;
pub mod pull;
pub mod remote;
pub mod render;
pub mod runner;
pub mod split;
pub mod template;
