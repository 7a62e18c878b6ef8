//! The hardware probe: what memory this process can really use (host RAM,
//! container cgroup, rlimits), which GPUs llama.cpp will see and how much
//! they hold, and how fast memory is.
//!
//! [`probe`] reads the live machine and never fails: whatever cannot be read
//! becomes a note in [`HardwareSnapshot::notes`]. [`load_profile`] and
//! [`apply_overrides`] replace the live machine with a described one, which
//! is how plans are made (and tested) for machines we are not on.
//!
//! Sources, by platform:
//! - RAM and swap: `sysinfo` (the host's figures, even in a container);
//! - cgroup limits (Linux, v1 and v2): [`cgroup`];
//! - `RLIMIT_AS`/`RLIMIT_DATA` (Unix): [`rlimit`];
//! - NVIDIA: NVML, behind the default `nvidia` feature: [`nvidia`];
//! - AMD (Linux): amdgpu sysfs: [`amd`];
//! - Apple Silicon: unified memory and the Metal wired limit: [`unified`];
//! - RAM bandwidth: measured once and cached: [`bandwidth`];
//! - GPU bandwidth and FP16 throughput that no driver reports: the table of
//!   named GPUs, [`gpus`] (also what `--gpu NAME` plans for).
//!
//! GPU numbering: NVIDIA devices first (after `CUDA_VISIBLE_DEVICES`), then
//! AMD devices (after `HIP_VISIBLE_DEVICES`, else `ROCR_VISIBLE_DEVICES`,
//! indices only), then the Apple GPU. A llama.cpp build uses one GPU backend,
//! and machines with GPUs of two vendors are rare, so this matches in
//! practice.

pub mod amd;
pub mod bandwidth;
pub mod cgroup;
pub mod cpu;
mod error;
pub mod gpus;
pub mod nvidia;
mod overrides;
mod profile;
pub mod registry;
pub mod rlimit;
mod size;
mod types;
pub mod unified;

pub use error::HwError;
pub use overrides::{Overrides, RpcDevice, add_rpc_devices, apply_named_gpus, apply_overrides};
pub use profile::{
    DEFAULT_PROFILE_CORES, DEFAULT_PROFILE_RAM_BYTES, load_profile, parse_profile, to_profile_toml,
};
pub use registry::{
    RegistryDevice, is_software_device, needs_measured_speed, use_measured_speeds,
    use_registry_devices,
};
pub use size::{format_size, parse_size};
pub use types::{
    BandwidthSource, CgroupMemory, CpuInfo, DEFAULT_GPU_BANDWIDTH_BYTES_PER_S,
    DEFAULT_RAM_BANDWIDTH_BYTES_PER_S, GpuInfo, GpuVendor, HardwareSnapshot, Host, LlamaDevice,
    MeasuredSpeed, ProbeOptions, RamInfo, Source, TYPICAL_DESKTOP_CHANNELS, TYPICAL_DESKTOP_CORES,
    TYPICAL_DESKTOP_MT_S, TYPICAL_DESKTOP_RAM_BANDWIDTH_BYTES_PER_S,
    TYPICAL_DESKTOP_STREAM_FRACTION, UnifiedMemory,
};

/// Reads this machine. Never fails: unreadable parts get safe values
/// (no limit, no GPU, default bandwidth) and a note saying why.
pub fn probe(opts: &ProbeOptions) -> HardwareSnapshot {
    let mut notes = Vec::new();

    let mut sys = sysinfo::System::new();
    sys.refresh_memory();
    let total = sys.total_memory();
    if total == 0 {
        notes.push("RAM size could not be read; assuming none is free".to_string());
    }
    let limits = rlimit::read();
    let mut ram = RamInfo {
        total_bytes: total,
        available_bytes: sys.available_memory().min(total),
        swap_total_bytes: sys.total_swap(),
        swap_free_bytes: sys.free_swap(),
        cgroup: probe_cgroup(&mut notes),
        rlimit_as_bytes: limits.address_space,
        rlimit_data_bytes: limits.data,
        bandwidth_bytes_per_s: DEFAULT_RAM_BANDWIDTH_BYTES_PER_S,
        bandwidth_measured: false,
        speed_calibration: None,
        runtime_bytes: None,
        runtime_virtual_bytes: None,
    };

    let cpu = cpu::probe(&mut notes);
    // A quarter of the budget at most, so measuring can never push a small
    // container into the OOM killer.
    let max_buffer = usize::try_from(ram.budget_bytes() / 4).unwrap_or(usize::MAX);
    (ram.bandwidth_bytes_per_s, ram.bandwidth_measured) =
        bandwidth::ram_bandwidth(opts, &cpu.model, max_buffer, &mut notes);

    let mut gpus = nvidia::probe(&mut notes);
    for g in &mut gpus {
        let memory = g.total_bytes;
        g.fill_from_table(memory);
    }
    // Integrated GPUs found, in GPU order; the first one's limit is the
    // machine's (two integrated GPUs in one machine do not exist in practice).
    #[allow(unused_mut)] // nothing adds to it on platforms without one
    let mut integrated: Vec<UnifiedMemory> = Vec::new();
    #[cfg(target_os = "linux")]
    probe_amd(&mut gpus, &mut integrated, ram.total_bytes, &mut notes);
    #[cfg(all(target_os = "macos", target_arch = "aarch64"))]
    {
        let (gpu, mem) = unified::probe_apple(ram.total_bytes, &cpu.model);
        gpus.push(gpu);
        integrated.push(mem);
    }
    let unified = integrated.into_iter().next();
    for (i, g) in gpus.iter_mut().enumerate() {
        g.index = u32::try_from(i).unwrap_or(u32::MAX);
    }

    HardwareSnapshot {
        ram,
        cpu,
        gpus,
        unified,
        source: Source::Probed,
        notes,
        rpc_link_bytes_per_s: None,
        host: Host::ThisMachine,
    }
}

/// The binding memory cgroup on Linux; `None` elsewhere or when there is
/// none.
fn probe_cgroup(notes: &mut Vec<String>) -> Option<CgroupMemory> {
    let fs = cgroup::CgroupFs::system()?;
    match fs.read_memory() {
        Ok(mem) => mem,
        Err(e) => {
            notes.push(format!("container memory limit unknown: {e}"));
            None
        }
    }
}

/// Adds amdgpu cards after the NVIDIA ones, honouring HIP/ROCR visibility.
#[cfg(target_os = "linux")]
fn probe_amd(
    gpus: &mut Vec<GpuInfo>,
    integrated: &mut Vec<UnifiedMemory>,
    ram_total: u64,
    notes: &mut Vec<String>,
) {
    let cards = amd::scan(std::path::Path::new("/sys/class/drm"), notes);
    if cards.is_empty() {
        return;
    }
    let visible_var = ["HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"]
        .into_iter()
        .find_map(|name| std::env::var(name).ok().map(|v| (name, v)));
    let indices: Vec<usize> = match &visible_var {
        None => (0..cards.len()).collect(),
        Some((name, spec)) => {
            let vis = nvidia::visible_devices(spec, &vec![None; cards.len()]);
            if let Some(entry) = vis.stopped_at {
                notes.push(format!(
                    "{name}={spec:?}: entry {entry:?} is not a usable device index; \
                     it and every entry after it are ignored"
                ));
            }
            vis.indices
        }
    };
    for i in indices {
        let Some(card) = cards.get(i) else { continue };
        let (mut gpu, mem) = card.to_gpu(0);
        // An APU's configuration is the machine's RAM; a card's, its own.
        let memory = if mem.is_some() {
            ram_total
        } else {
            gpu.total_bytes
        };
        gpu.fill_from_table(memory);
        integrated.extend(mem);
        gpus.push(gpu);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_of_this_machine_is_sane() {
        let s = probe(&ProbeOptions::default());
        assert_eq!(s.source, Source::Probed);
        assert!(s.ram.total_bytes > 0, "{:?}", s.notes);
        assert!(s.ram.available_bytes <= s.ram.total_bytes);
        assert!(s.ram.budget_bytes() <= s.ram.available_bytes);
        assert!(!s.ram.bandwidth_measured);
        assert_eq!(
            s.ram.bandwidth_bytes_per_s,
            DEFAULT_RAM_BANDWIDTH_BYTES_PER_S
        );
        for (i, g) in s.gpus.iter().enumerate() {
            assert_eq!(g.index as usize, i);
            assert!(g.free_bytes <= g.total_bytes, "{g:?}");
        }
        // Serialises for `headroom hw --json` and reads back.
        let json = serde_json::to_string(&s).expect("serialisable");
        let back: HardwareSnapshot = serde_json::from_str(&json).expect("deserialisable");
        assert_eq!(back, s);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn probe_sees_this_process_cgroup() {
        // Whatever /proc/self/cgroup says, the probe must agree with the
        // cgroup reader run directly (usage moves between two reads, so only
        // what identifies the limit is compared).
        let mut notes = Vec::new();
        let direct = cgroup::CgroupFs::system().and_then(|fs| fs.read_memory().ok().flatten());
        let key = |c: Option<CgroupMemory>| c.map(|c| (c.version, c.path, c.limit_bytes));
        assert_eq!(key(probe_cgroup(&mut notes)), key(direct));
    }
}
