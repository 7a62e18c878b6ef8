//! Writes a sparse synthetic model (see `headroom_planner::synth`) for manual
//! checks and calibration: `write_synth SHAPE MIX PATH` (e.g. `llama-1b Q4_K_M /tmp/m.gguf`).

use anyhow::{Context, Result};
use headroom_planner::synth::{self, Mix, Shape};

fn main() -> Result<()> {
    let a: Vec<String> = std::env::args().collect();
    let usage = "usage: write_synth SHAPE MIX PATH";
    let shape = Shape::from_name(a.get(1).context(usage)?).context("unknown shape")?;
    let mix = Mix::from_name(a.get(2).context(usage)?).context("unknown mix")?;
    let path = a.get(3).context(usage)?;
    synth::write_sparse(std::path::Path::new(path), shape, mix)?;
    println!("{path}");
    Ok(())
}
