//! `headroom hw --gpus`: the table of known GPUs, the names `--gpu` takes,
//! as text or JSON (with each row's source).

use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use comfy_table::presets::UTF8_BORDERS_ONLY;
use comfy_table::{CellAlignment, Table};
use headroom_planner::hw::gpus::{self, DEFAULT_GPU_CARD, KnownGpu, Segment};
use headroom_planner::hw::{DEFAULT_GPU_BANDWIDTH_BYTES_PER_S, GpuVendor};
use serde::Serialize;

/// Layout version of `hw --gpus --json`.
pub const GPUS_SCHEMA_VERSION: u32 = 1;

/// `hw --gpus --json`.
#[derive(Serialize)]
struct Doc<'a> {
    schema_version: u32,
    /// What plans assume for a GPU of unknown model.
    default: DefaultCard,
    gpus: Vec<Row<'a>>,
}

#[derive(Serialize)]
struct DefaultCard {
    card: &'static str,
    bandwidth_bytes_per_s: f64,
}

#[derive(Serialize)]
struct Row<'a> {
    /// With the vendor, as drivers report it.
    full_name: String,
    #[serde(flatten)]
    gpu: &'a KnownGpu,
}

fn segment(s: Segment) -> &'static str {
    match s {
        Segment::Desktop => "desktop",
        Segment::Laptop => "laptop",
        Segment::Workstation => "workstation",
        Segment::Datacenter => "data centre",
        Segment::Soc => "unified",
    }
}

fn vendor(v: GpuVendor) -> &'static str {
    match v {
        GpuVendor::Nvidia => "NVIDIA",
        GpuVendor::Amd => "AMD",
        GpuVendor::Intel => "Intel",
        GpuVendor::Apple => "Apple",
        GpuVendor::Other => "other",
        GpuVendor::Rpc => "RPC worker",
    }
}

/// The table as text.
#[must_use]
pub fn text() -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t.set_header(vec!["GPU", "vendor", "kind", "memory", "bandwidth", "FP16"]);
    for g in gpus::table() {
        let name = match &g.variant {
            Some(v) => format!("{} ({v})", g.name),
            None => g.name.clone(),
        };
        let memory = g
            .memory_gb
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join("/");
        t.add_row(vec![
            name,
            vendor(g.vendor).to_string(),
            segment(g.segment).to_string(),
            format!("{memory} GB"),
            format!("{} GB/s", g.bandwidth_gb_s),
            format!("{:.1} TFLOPS", g.fp16_tflops),
        ]);
    }
    for c in 3..6 {
        if let Some(col) = t.column_mut(c) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut s = format!("{t}\n");
    let _ = writeln!(
        s,
        "{} GPUs. --gpu NAME takes any of these names (case, spaces and the vendor's name don't matter; \
         add the memory where there are several: \"RTX 4060 Ti 16GB\", \"M4 Max 64GB\").",
        gpus::table().len()
    );
    let _ = writeln!(
        s,
        "A GPU of unknown model (--vram, or one the driver and this table don't know) is assumed to have \
         the {DEFAULT_GPU_CARD}'s {:.0} GB/s. FP16: peak dense, matrix units where there are any. \
         Sources: --json.",
        DEFAULT_GPU_BANDWIDTH_BYTES_PER_S / 1e9
    );
    s
}

/// Prints the table (text or JSON) to stdout.
///
/// # Errors
/// A closed stdout.
pub fn print(json: bool) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    if json {
        let doc = Doc {
            schema_version: GPUS_SCHEMA_VERSION,
            default: DefaultCard {
                card: DEFAULT_GPU_CARD,
                bandwidth_bytes_per_s: DEFAULT_GPU_BANDWIDTH_BYTES_PER_S,
            },
            gpus: gpus::table()
                .iter()
                .map(|gpu| Row {
                    full_name: gpu.full_name(),
                    gpu,
                })
                .collect(),
        };
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        write!(out, "{}", text())?;
    }
    Ok(ExitCode::SUCCESS)
}
