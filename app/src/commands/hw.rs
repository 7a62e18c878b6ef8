//! `headroom hw`: what was detected (or simulated), as text or JSON; with
//! `--gpus`, the table of known GPUs that `--gpu` names.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use headroom_planner::hw::{BandwidthSource, GpuVendor, format_size};

use super::hardware;
use crate::cli::{HwArgs, MachineArgs};

/// Run `headroom hw`.
///
/// # Errors
/// A bad hardware profile or override.
pub fn run(args: &HwArgs, machine: &MachineArgs) -> Result<ExitCode> {
    if args.gpus {
        return crate::render::gpus::print(args.json);
    }
    let hw = hardware(machine)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut v = serde_json::to_value(&hw)?;
        if let Some(obj) = v.as_object_mut() {
            obj.insert("ram_budget_bytes".into(), hw.ram.budget_bytes().into());
            obj.insert("gpu_build".into(), crate::llama::gpu_build().into());
            obj.insert("schema_version".into(), 1.into());
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let r = &hw.ram;
    writeln!(
        out,
        "RAM      {} total, {} available, budget {}",
        format_size(r.total_bytes),
        format_size(r.available_bytes),
        format_size(r.budget_bytes())
    )?;
    if let Some(cg) = &r.cgroup {
        let limit = cg
            .limit_bytes
            .map_or_else(|| "no limit".to_string(), format_size);
        writeln!(
            out,
            "cgroup   v{} {}: limit {limit}, using {} ({} reclaimable)",
            cg.version,
            cg.path,
            format_size(cg.usage_bytes),
            format_size(cg.reclaimable_bytes)
        )?;
    }
    for (name, lim) in [
        ("RLIMIT_AS", r.rlimit_as_bytes),
        ("RLIMIT_DATA", r.rlimit_data_bytes),
    ] {
        if let Some(l) = lim {
            writeln!(out, "limit    {name} {}", format_size(l))?;
        }
    }
    writeln!(
        out,
        "swap     {} total, {} free",
        format_size(r.swap_total_bytes),
        format_size(r.swap_free_bytes)
    )?;
    writeln!(
        out,
        "memory   bandwidth {:.1} GB/s ({})",
        r.bandwidth_bytes_per_s / 1e9,
        if r.bandwidth_measured {
            "measured"
        } else {
            "assumed"
        }
    )?;
    let c = &hw.cpu;
    writeln!(
        out,
        "CPU      {} ({}, {} cores, {} threads) {}",
        c.model,
        c.arch,
        c.physical_cores,
        c.logical_cores,
        c.features.join(" ")
    )?;
    if hw.gpus.is_empty() {
        writeln!(out, "GPU      none")?;
    }
    if let Some(r) = hw.ram.runtime_bytes {
        writeln!(
            out,
            "runtime  llama.cpp's backends took {} of RAM and {} of address space to start (measured; plans count them)",
            format_size(r),
            format_size(hw.ram.runtime_virtual_bytes.unwrap_or(0))
        )?;
    }
    for g in &hw.gpus {
        let (b, source) = g.planned_bandwidth();
        if g.vendor == GpuVendor::Rpc {
            writeln!(
                out,
                "RPC{}     {}: {} free of {} (as the worker reports it), {:.0} GB/s assumed (this machine's RAM){}",
                g.index,
                g.name,
                format_size(g.free_bytes),
                format_size(g.total_bytes),
                b / 1e9,
                g.budget_bytes.map_or_else(String::new, |m| format!(
                    ", budget {} (--rpc-mem)",
                    format_size(m)
                ))
            )?;
            continue;
        }
        let hint = crate::render::basis::unnamed_gpu_hint(&g.name);
        let bw = match source {
            BandwidthSource::Assumed if g.bandwidth_bytes_per_s.is_none() => format!(
                ", bandwidth unknown (plans assume {:.0} GB/s: {hint})",
                b / 1e9,
            ),
            BandwidthSource::Assumed => format!(", {:.0} GB/s assumed ({hint})", b / 1e9),
            BandwidthSource::Measured => format!(
                ", {:.2} GB/s measured on this device ({})",
                b / 1e9,
                g.llama
                    .as_ref()
                    .and_then(|l| l.speed.as_ref())
                    .map_or_else(String::new, crate::render::basis::measured_words)
            ),
            _ => format!(", {:.0} GB/s ({})", b / 1e9, source.as_words()),
        };
        // The registry's device: its llama.cpp name, and whether what is
        // placed on it is this machine's RAM.
        let dev = g.llama.as_ref().map_or_else(String::new, |l| {
            format!(
                " [{}{}{}]",
                l.name,
                if l.host_memory {
                    ", its memory is this machine's RAM"
                } else {
                    ""
                },
                l.max_tensor_bytes.map_or_else(String::new, |m| format!(
                    ", tensors up to {}",
                    format_size(m)
                ))
            )
        });
        writeln!(
            out,
            "GPU{}     {} ({:?}){dev}: {} free of {}{bw}",
            g.index,
            g.name,
            g.vendor,
            format_size(g.free_bytes),
            format_size(g.total_bytes)
        )?;
    }
    if let Some(u) = &hw.unified {
        writeln!(
            out,
            "unified  GPU may use up to {} ({})",
            format_size(u.gpu_limit_bytes),
            u.source
        )?;
    }
    writeln!(
        out,
        "build    {}",
        if cfg!(feature = "vulkan") {
            "Vulkan, CPU, RPC workers (--rpc)"
        } else if crate::llama::gpu_build() {
            "GPU backends available, RPC workers (--rpc)"
        } else {
            "CPU, RPC workers (--rpc)"
        }
    )?;
    for n in &hw.notes {
        writeln!(out, "note     {n}")?;
    }
    Ok(ExitCode::SUCCESS)
}
