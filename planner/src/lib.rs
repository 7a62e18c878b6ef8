//! headroom-planner: predicts, from a GGUF header alone, what llama.cpp will
//! allocate on each device and whether a model fits a machine.
//!
//! The data path is `gguf::Header` → [`profile::ModelProfile`] and
//! [`hw::HardwareSnapshot`] → [`plan::plan`] → [`plan::Plan`]. Everything but
//! the header reader and the hardware probe is a pure function, so any machine
//! can be simulated. This crate never links llama.cpp and never touches the
//! network or the terminal.

pub mod arch;
pub mod catalog;
pub mod gguf;
pub mod hw;
pub mod memory;
pub mod plan;
pub mod profile;
pub mod rank;
pub mod slots;
pub mod solve;
pub mod speed;
pub mod synth;
