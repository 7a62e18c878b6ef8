//! `headroom chat`: the screen as snapshots of plain state (`chat_view`) and
//! the real binary in a real terminal under tmux (`chat_tmux`).
//!
//! One test binary for both: each binary links llama.cpp, and linking
//! dominates the build on two cores.
#[path = "../benches/common/mod.rs"]
mod bench_common;
#[path = "chat/chat_tmux.rs"]
mod chat_tmux;
#[path = "chat/chat_view.rs"]
mod chat_view;
#[path = "support/demo.rs"]
mod demo;
#[path = "support/rpc_worker.rs"]
mod rpc_worker;
#[path = "support/tmux.rs"]
mod tmux;
