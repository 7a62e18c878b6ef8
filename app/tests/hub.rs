//! Everything that talks to a Hugging Face hub: `pull`, header-only planning
//! of remote models, the demo model's download, hostile names and links in the
//! cache, and the token's secrecy. Each test starts its own hub on 127.0.0.1.
//!
//! One test binary for all of them: each binary links llama.cpp, and linking
//! dominates the build on two cores.
#[path = "support/demo.rs"]
mod demo;
#[path = "hub/demo_hub.rs"]
mod demo_hub;
#[path = "support/hf_server.rs"]
mod hf_server;
#[path = "support/models.rs"]
mod models;
#[path = "hub/paths.rs"]
mod paths;
#[path = "hub/pull.rs"]
mod pull;
#[path = "hub/remote_plan.rs"]
mod remote_plan;
#[path = "support/sandbox.rs"]
mod sandbox;
#[path = "hub/secrets.rs"]
mod secrets;
#[path = "support/tmux.rs"]
mod tmux;
