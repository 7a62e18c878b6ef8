//! This machine's GPUs as llama.cpp's backend registry lists them: the
//! devices a load in this build will actually use. The app reads the
//! registry (it links llama.cpp; the planner does not) and hands the list
//! here, where it replaces the GPUs the driver libraries reported and is
//! enriched by them (bandwidth, UUID) and by the GPU table.
//!
//! Guards against what drivers are known to report: free memory above the
//! total (llama.cpp #29277) is clamped to the total.

use super::types::{
    BandwidthSource, GpuInfo, GpuVendor, HardwareSnapshot, LlamaDevice, MeasuredSpeed,
};

/// A GPU-type device of the registry (not the CPU, not an RPC worker).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryDevice {
    /// The device (backend, name, description, whether its memory is RAM).
    pub device: LlamaDevice,
    /// Memory the backend reports.
    pub total_bytes: u64,
    /// Free memory the backend reports: what llama.cpp splits layers by.
    pub free_bytes: u64,
}

/// Whether a device described so computes in this machine's RAM: a
/// CPU-type Vulkan implementation (Mesa's lavapipe reports itself as
/// `llvmpipe`; Google's SwiftShader), whatever type the backend gives it.
#[must_use]
pub fn is_software_device(description: &str) -> bool {
    let d = description.to_ascii_lowercase();
    ["llvmpipe", "lavapipe", "swiftshader"]
        .iter()
        .any(|s| d.contains(s))
}

fn vendor_of(description: &str) -> GpuVendor {
    let d = description.to_ascii_lowercase();
    if d.contains("nvidia") || d.contains("geforce") || d.contains("quadro") || d.contains("tesla")
    {
        GpuVendor::Nvidia
    } else if d.contains("amd") || d.contains("radeon") {
        GpuVendor::Amd
    } else if d.contains("intel") {
        GpuVendor::Intel
    } else if d.contains("apple") {
        GpuVendor::Apple
    } else {
        GpuVendor::Other
    }
}

/// Whether a driver library's GPU and a registry device are the same card:
/// one name contains the other (NVML's "NVIDIA GeForce RTX 4090" and
/// Vulkan's "NVIDIA GeForce RTX 4090"; ROCm's and Vulkan's AMD names differ
/// in suffixes).
fn same_card(probed: &str, description: &str) -> bool {
    let (a, b) = (
        probed.to_ascii_lowercase(),
        description.to_ascii_lowercase(),
    );
    !a.is_empty() && !b.is_empty() && (a.contains(&b) || b.contains(&a))
}

/// The snapshot's local GPUs become `devices`, in the registry's order.
/// Each takes what a driver library reported for the same card (bandwidth,
/// its source, FP16 throughput, UUID), else what the GPU table knows by its
/// name. A device whose memory is this machine's RAM (a software Vulkan
/// device, or one the registry calls integrated) with no bandwidth known
/// reads at the RAM's bandwidth, assumed. A card the driver reported that
/// the registry does not list gets a note: this build cannot use it.
/// RPC workers (added later, [`super::add_rpc_devices`]) are not touched;
/// neither is a unified-memory snapshot, whose integrated GPU the probe
/// already sized by the platform's own limit.
#[must_use]
pub fn use_registry_devices(
    mut s: HardwareSnapshot,
    devices: &[RegistryDevice],
) -> HardwareSnapshot {
    if s.unified.is_some() {
        return s;
    }
    let probed = std::mem::take(&mut s.gpus);
    let mut used = vec![false; probed.len()];
    let mut gpus = Vec::with_capacity(devices.len());
    for (i, d) in devices.iter().enumerate() {
        let total = d.total_bytes;
        let free = d.free_bytes.min(total);
        let matched = probed
            .iter()
            .enumerate()
            .find(|(j, g)| !used[*j] && same_card(&g.name, &d.device.description));
        let mut g = GpuInfo {
            index: u32::try_from(i).unwrap_or(u32::MAX),
            name: d.device.description.clone(),
            vendor: vendor_of(&d.device.description),
            total_bytes: total,
            free_bytes: free,
            bandwidth_bytes_per_s: None,
            bandwidth_source: BandwidthSource::Assumed,
            fp16_flops_per_s: None,
            uuid: None,
            budget_bytes: None,
            llama: Some(d.device.clone()),
        };
        if let Some((j, p)) = matched {
            used[j] = true;
            g.name = p.name.clone();
            g.vendor = p.vendor;
            g.bandwidth_bytes_per_s = p.bandwidth_bytes_per_s;
            g.bandwidth_source = p.bandwidth_source;
            g.fp16_flops_per_s = p.fp16_flops_per_s;
            g.uuid = p.uuid.clone();
        }
        if g.fp16_flops_per_s.is_none() && !d.device.host_memory {
            g.fill_from_table(total);
        }
        if g.bandwidth_bytes_per_s.is_none() && d.device.host_memory {
            g.bandwidth_bytes_per_s = Some(s.ram.bandwidth_bytes_per_s);
            g.bandwidth_source = BandwidthSource::Assumed;
        }
        gpus.push(g);
    }
    for (p, used) in probed.iter().zip(&used) {
        if !used && p.vendor != GpuVendor::Rpc {
            s.notes.push(format!(
                "GPU {} ({}): none of this build's llama.cpp backends lists it, so plans leave it out",
                p.index, p.name
            ));
        }
    }
    s.gpus = gpus;
    s
}

/// Whether `g` needs its speed measured: a device of this build's registry
/// whose bandwidth neither its driver nor the GPU table gave (it is only
/// assumed), not yet measured.
#[must_use]
pub fn needs_measured_speed(g: &GpuInfo) -> bool {
    g.vendor != GpuVendor::Rpc
        && g.bandwidth_source == BandwidthSource::Assumed
        && g.llama.as_ref().is_some_and(|l| l.speed.is_none())
}

/// Each GPU of `s` that [`needs_measured_speed`] takes what `measure` gives
/// for its registry device: its bandwidth becomes the measured one
/// ([`BandwidthSource::Measured`]) and the speed model prices it by the
/// measurement ([`crate::speed::measured_throughput`]). A device `measure`
/// has nothing for keeps its assumed figure. Only this machine's registry
/// devices carry a [`LlamaDevice`], so a profile's or `--gpu`'s cards are
/// never touched.
#[must_use]
pub fn use_measured_speeds(
    mut s: HardwareSnapshot,
    mut measure: impl FnMut(&LlamaDevice) -> Option<MeasuredSpeed>,
) -> HardwareSnapshot {
    for g in &mut s.gpus {
        if !needs_measured_speed(g) {
            continue;
        }
        let Some(l) = g.llama.as_mut() else { continue };
        let Some(m) = measure(l).filter(|m| m.bandwidth_bytes_per_s > 0) else {
            continue;
        };
        l.speed = Some(m);
        g.bandwidth_bytes_per_s = Some(m.bandwidth_bytes_per_s as f64);
        g.bandwidth_source = BandwidthSource::Measured;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::{HardwareSnapshot, parse_profile};

    fn machine() -> HardwareSnapshot {
        parse_profile(
            "[ram]\ntotal = \"32GiB\"\nbandwidth_bytes_per_s = 5e10\n\n[[gpu]]\nname = \"NVIDIA GeForce RTX 4060\"\nvendor = \"nvidia\"\ntotal = \"8GiB\"\n",
            std::path::Path::new("m.toml"),
        )
        .expect("profile")
    }

    fn dev(backend: &str, name: &str, description: &str, total: u64, free: u64) -> RegistryDevice {
        RegistryDevice {
            device: LlamaDevice {
                backend: backend.into(),
                name: name.into(),
                description: description.into(),
                host_memory: is_software_device(description),
                max_tensor_bytes: None,
                speed: None,
            },
            total_bytes: total,
            free_bytes: free,
        }
    }

    #[test]
    fn the_registry_s_device_takes_the_driver_s_figures_for_the_same_card() {
        let s = machine();
        let probed = s.gpus[0].clone();
        let out = use_registry_devices(
            s,
            &[dev(
                "Vulkan",
                "Vulkan0",
                "NVIDIA GeForce RTX 4060",
                8 << 30,
                7 << 30,
            )],
        );
        assert_eq!(out.gpus.len(), 1);
        let g = &out.gpus[0];
        assert_eq!(g.name, probed.name);
        assert_eq!(g.bandwidth_bytes_per_s, probed.bandwidth_bytes_per_s);
        assert_eq!((g.total_bytes, g.free_bytes), (8 << 30, 7 << 30));
        assert_eq!(g.llama.as_ref().map(|l| l.name.as_str()), Some("Vulkan0"));
        assert!(out.notes.iter().all(|n| !n.contains("leave it out")));
    }

    #[test]
    fn free_above_total_is_clamped_and_a_software_device_draws_on_ram() {
        let s = machine();
        let ram_bw = s.ram.bandwidth_bytes_per_s;
        let out = use_registry_devices(
            s,
            &[dev(
                "Vulkan",
                "Vulkan0",
                "llvmpipe (LLVM 15.0.6, 256 bits)",
                2 << 30,
                3 << 30,
            )],
        );
        let g = &out.gpus[0];
        assert_eq!(g.free_bytes, 2 << 30, "free clamped to total");
        assert!(g.llama.as_ref().is_some_and(|l| l.host_memory));
        assert_eq!(g.bandwidth_bytes_per_s, Some(ram_bw));
        assert_eq!(g.bandwidth_source, BandwidthSource::Assumed);
        // The RTX 4060 of the driver is not in the registry: said, and gone.
        assert!(
            out.notes
                .iter()
                .any(|n| n.contains("RTX 4060") && n.contains("leave it out")),
            "{:?}",
            out.notes
        );
    }

    #[test]
    fn no_registry_device_means_no_gpu() {
        let out = use_registry_devices(machine(), &[]);
        assert!(out.gpus.is_empty());
    }
}
