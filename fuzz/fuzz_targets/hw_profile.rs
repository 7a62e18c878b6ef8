//! Arbitrary text as a TOML hardware profile (`--hw FILE`): the parser, then
//! the profile written back and read again, then a plan of a small fixed
//! model on the machine it describes. Nothing may panic, whatever sizes,
//! bandwidths or core counts the file claims.

#![no_main]

use std::path::Path;
use std::sync::LazyLock;

use headroom_fuzz::Tiny;
use headroom_planner::hw::{self, HwError};
use headroom_planner::plan::Settings;
use headroom_planner::profile::{self, ModelProfile};
use headroom_planner::solve::{self, Build};
use libfuzzer_sys::fuzz_target;

/// A two-layer llama: plans in microseconds, yet the planner weighs layers,
/// KV cache and compute buffers against the machine.
static MODEL: LazyLock<ModelProfile> = LazyLock::new(|| {
    let header = Tiny::llama()
        .build()
        .expect("the fixed model header is valid");
    profile::profile(&header).expect("the fixed model profiles")
});

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz.toml");
    let Ok(machine) = hw::parse_profile(text, path) else {
        return;
    };
    // The writer describes the same machine (sizes over TOML's i64 aside,
    // which it refuses with an error).
    match hw::to_profile_toml(&machine) {
        Ok(written) => {
            let again = hw::parse_profile(&written, path).expect("a written profile reads back");
            let mut ram = machine.ram.clone();
            // Always written, so always "measured" after a round trip.
            ram.bandwidth_measured = again.ram.bandwidth_measured;
            assert_eq!(again.ram, ram);
            assert_eq!(again.cpu, machine.cpu);
            assert_eq!(again.gpus, machine.gpus);
            assert_eq!(again.unified, machine.unified);
        }
        Err(HwError::ProfileWrite { .. }) => {}
        Err(e) => panic!("unexpected write error: {e}"),
    }
    for build in [Build { gpu: true }, Build { gpu: false }] {
        let _ = solve::plan(&MODEL, "fuzz.gguf", &Settings::default(), &machine, build);
    }
});
