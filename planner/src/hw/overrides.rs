//! `--ram`, `--vram`, `--gpu` and `--hw`: answer "would it fit on that
//! machine?" from this one.

use std::path::PathBuf;

use super::HwError;
use super::gpus::{KnownGpu, NamedGpu};
use super::profile::{DEFAULT_PROFILE_CORES, default_features, load_profile};
use super::size::format_size;
use super::types::{
    BandwidthSource, CpuInfo, DEFAULT_GPU_BANDWIDTH_BYTES_PER_S, GpuInfo, GpuVendor,
    HardwareSnapshot, Host, Source, TYPICAL_DESKTOP_CORES, TYPICAL_DESKTOP_MT_S,
    TYPICAL_DESKTOP_RAM_BANDWIDTH_BYTES_PER_S, TYPICAL_DESKTOP_STREAM_FRACTION, UnifiedMemory,
};
use super::unified;

/// What the user asked to pretend about the hardware.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--ram`: the machine's RAM, all of it free.
    pub ram_bytes: Option<u64>,
    /// `--vram`: one size per GPU; empty or all zeros means no GPU.
    pub vram_bytes: Option<Vec<u64>>,
    /// `--hardware-profile`: start from this profile instead of the probe.
    pub profile: Option<PathBuf>,
}

/// Applies overrides, in this order:
///
/// 1. `profile`: the snapshot is replaced by the loaded profile.
/// 2. `ram_bytes`: total = available = the given size; swap, cgroup and
///    rlimits are cleared, because they belong to this machine, not to the
///    one being simulated. On a unified-memory machine the GPU limit (and the
///    integrated GPU's total/free) scale with RAM, keeping its share, capped
///    at the new RAM size.
/// 3. `vram_bytes`: the GPU list is replaced by synthetic GPUs "GPU0",
///    "GPU1", … with free = total, vendor NVIDIA (the common discrete case)
///    and [`DEFAULT_GPU_BANDWIDTH_BYTES_PER_S`], marked assumed; these are
///    discrete, so `unified` is cleared. Empty or all-zero means a machine
///    without GPU. (`--gpu` names cards instead: [`apply_named_gpus`].)
///
/// The source becomes [`Source::Overridden`] when `ram_bytes` or
/// `vram_bytes` is given, and a note records each override. The host stays
/// what it was: `--ram` and `--vram` alone describe this machine (or the
/// profile's) with other memory sizes, so its CPU, RAM bandwidth, probed
/// per-layer cost and calibration still hold ([`Host`]).
///
/// # Errors
/// Profile errors from [`load_profile`]; [`HwError::InvalidOverride`] for a
/// RAM size of 0 or a GPU list mixing zero and non-zero sizes.
pub fn apply_overrides(
    snapshot: HardwareSnapshot,
    o: &Overrides,
) -> Result<HardwareSnapshot, HwError> {
    let mut s = match &o.profile {
        Some(path) => load_profile(path)?,
        None => snapshot,
    };
    let changed = o.ram_bytes.is_some() || o.vram_bytes.is_some();
    if changed && let Source::Profile(path) = &s.source {
        s.notes
            .push(format!("started from hardware profile {}", path.display()));
    }

    if let Some(ram) = o.ram_bytes {
        if ram == 0 {
            return Err(HwError::InvalidOverride {
                reason: "--ram is 0; a machine needs some RAM".into(),
            });
        }
        let old_total = s.ram.total_bytes;
        s.ram.total_bytes = ram;
        s.ram.available_bytes = ram;
        s.ram.swap_total_bytes = 0;
        s.ram.swap_free_bytes = 0;
        s.ram.cgroup = None;
        s.ram.rlimit_as_bytes = None;
        s.ram.rlimit_data_bytes = None;
        if let Some(u) = &mut s.unified {
            let scale = |b: u64| scale_to(b, old_total, ram).min(ram);
            u.gpu_limit_bytes = scale(u.gpu_limit_bytes);
            u.source = format!("{}, scaled to --ram", u.source);
            for g in &mut s.gpus {
                g.total_bytes = scale(g.total_bytes);
                g.free_bytes = scale(g.free_bytes).min(g.total_bytes);
            }
        }
        s.notes.push(format!(
            "RAM set to {} by --ram (all free; swap, cgroup and rlimits of this machine ignored)",
            format_size(ram)
        ));
    }

    if let Some(vram) = &o.vram_bytes {
        let all_zero = vram.iter().all(|&b| b == 0);
        if !all_zero && vram.contains(&0) {
            return Err(HwError::InvalidOverride {
                reason: format!(
                    "--vram mixes 0 with real sizes ({}); use 0 alone for \"no GPU\"",
                    vram.iter()
                        .map(|&b| format_size(b))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        s.unified = None;
        s.gpus = if all_zero {
            Vec::new()
        } else {
            synthetic_gpus(vram)
        };
        s.notes.push(if all_zero {
            "no GPU (--vram)".to_string()
        } else {
            format!(
                "GPUs replaced by --vram: {} (bandwidth assumed {:.0} GB/s; name the card with --gpu)",
                vram.iter()
                    .map(|&b| format_size(b))
                    .collect::<Vec<_>>()
                    .join(", "),
                DEFAULT_GPU_BANDWIDTH_BYTES_PER_S / 1e9
            )
        });
    }

    if changed {
        s.source = Source::Overridden;
    }
    Ok(s)
}

/// `b × new / old` without overflow; `b` itself when `old` is 0.
fn scale_to(b: u64, old: u64, new: u64) -> u64 {
    if old == 0 {
        return b;
    }
    u64::try_from(u128::from(b) * u128::from(new) / u128::from(old)).unwrap_or(u64::MAX)
}

fn synthetic_gpus(sizes: &[u64]) -> Vec<GpuInfo> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &bytes)| GpuInfo {
            index: u32::try_from(i).unwrap_or(u32::MAX),
            name: format!("GPU{i}"),
            vendor: GpuVendor::Nvidia,
            total_bytes: bytes,
            free_bytes: bytes,
            bandwidth_bytes_per_s: Some(DEFAULT_GPU_BANDWIDTH_BYTES_PER_S),
            bandwidth_source: BandwidthSource::Assumed,
            fp16_flops_per_s: None,
            uuid: None,
            budget_bytes: None,
            llama: None,
        })
        .collect()
}

/// A llama.cpp RPC worker's device as llama.cpp reported it on connecting.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcDevice {
    /// The name of its buffers in llama.cpp's breakdown (`RPC0[HOST:PORT]`).
    pub name: String,
    /// Free memory the worker reports: llama.cpp splits layers by it.
    pub free_bytes: u64,
    /// Total memory the worker reports.
    pub total_bytes: u64,
    /// What the plan may use there (`--rpc-mem`); `None` = `free_bytes`.
    pub budget_bytes: Option<u64>,
}

/// Adds RPC workers' devices to a snapshot, first, as llama.cpp orders its
/// devices (RPC servers at the front, then local GPUs). Their memory
/// bandwidth is not known: this machine's RAM bandwidth stands in (a CPU
/// worker on a like machine), marked assumed.
#[must_use]
pub fn add_rpc_devices(mut s: HardwareSnapshot, devices: &[RpcDevice]) -> HardwareSnapshot {
    let n = u32::try_from(devices.len()).unwrap_or(u32::MAX);
    for g in &mut s.gpus {
        g.index = g.index.saturating_add(n);
    }
    let rpc = devices.iter().enumerate().map(|(i, d)| GpuInfo {
        index: u32::try_from(i).unwrap_or(u32::MAX),
        name: d.name.clone(),
        vendor: GpuVendor::Rpc,
        total_bytes: d.total_bytes,
        free_bytes: d.free_bytes,
        bandwidth_bytes_per_s: Some(s.ram.bandwidth_bytes_per_s),
        bandwidth_source: BandwidthSource::Assumed,
        fp16_flops_per_s: None,
        uuid: None,
        budget_bytes: d.budget_bytes,
        llama: None,
    });
    s.gpus = rpc.chain(std::mem::take(&mut s.gpus)).collect();
    s
}

/// `--gpu NAME[,NAME…]`: the GPUs become these cards from the GPU table,
/// after [`apply_overrides`].
///
/// - Discrete cards replace the GPU list in the order given, each with its
///   memory free, its bandwidth and FP16 throughput (looked up by name);
///   `unified` is cleared.
/// - A unified part (Apple silicon, AMD Strix Halo) must be named alone: its
///   GPU shares the machine's RAM, which becomes its memory size (all free;
///   swap, cgroup and rlimits of this machine ignored, as `--ram` does)
///   unless `ram_given` (`--ram` already set it). The GPU may use the
///   vendor's default share: macOS's ([`unified::apple_default_gpu_limit`])
///   or Linux's GTT size for an AMD APU
///   ([`unified::amd_default_gpu_limit`]). The part is the machine: the
///   RAM bandwidth is the part's (the table's), the CPU is the part's
///   (`cpu_cores` from the table, else [`DEFAULT_PROFILE_CORES`], said in a
///   note; its architecture's default features), whatever the probe or a
///   profile said ([`Host::NamedPart`]).
/// - Discrete cards on this machine's probe imply a typical desktop host
///   ([`Host::TypicalDesktop`]: [`TYPICAL_DESKTOP_RAM_BANDWIDTH_BYTES_PER_S`],
///   [`TYPICAL_DESKTOP_CORES`] x86-64 cores with AVX2), not this machine,
///   whose CPU does not sit beside those cards. On a profile's machine
///   (`--hw`) they keep the profile's CPU and bandwidth: the profile states
///   the machine.
///
/// Whenever the host changes, what was measured or calibrated on this
/// machine (its measured bandwidth, the calibration factors) is dropped.
///
/// # Errors
/// [`HwError::InvalidOverride`] for no card, or a unified part named with
/// other cards.
pub fn apply_named_gpus(
    mut s: HardwareSnapshot,
    cards: &[NamedGpu],
    ram_given: bool,
) -> Result<HardwareSnapshot, HwError> {
    let names: Vec<String> = cards.iter().map(NamedGpu::display_name).collect();
    let [first, rest @ ..] = cards else {
        return Err(HwError::InvalidOverride {
            reason: "--gpu names no GPU".into(),
        });
    };
    if cards.iter().any(|c| c.gpu.unified) {
        if !rest.is_empty() {
            return Err(HwError::InvalidOverride {
                reason: format!(
                    "--gpu {}: an integrated GPU shares the machine's RAM, so it is named alone",
                    names.join(",")
                ),
            });
        }
        if !ram_given {
            let ram = first.memory_bytes();
            s.ram.total_bytes = ram;
            s.ram.available_bytes = ram;
            s.ram.swap_total_bytes = 0;
            s.ram.swap_free_bytes = 0;
            s.ram.cgroup = None;
            s.ram.rlimit_as_bytes = None;
            s.ram.rlimit_data_bytes = None;
        }
        let ram = s.ram.total_bytes;
        let (limit, source) = if first.gpu.vendor == GpuVendor::Apple {
            (
                unified::apple_default_gpu_limit(ram),
                "macOS default GPU share of RAM (approximate), for --gpu",
            )
        } else {
            (
                unified::amd_default_gpu_limit(ram),
                "Linux default GTT size (half of RAM), for --gpu",
            )
        };
        s.gpus = vec![named_gpu(0, first, limit)];
        s.unified = Some(UnifiedMemory {
            gpu_limit_bytes: limit,
            source: source.into(),
        });
        let cpu = part_cpu(first.gpu);
        s.notes.push(format!(
            "CPU and RAM bandwidth of the {}: {} cores{}, {:.0} GB/s (looked up, not this machine's)",
            names[0],
            cpu.physical_cores,
            if first.gpu.cpu_cores.is_some() {
                ""
            } else {
                " (assumed: the table does not list its cores)"
            },
            first.gpu.bandwidth_gb_s
        ));
        set_host(
            &mut s,
            Host::NamedPart,
            first.gpu.bandwidth_bytes_per_s(),
            cpu,
        );
        s.notes.push(format!(
            "GPU set by --gpu: {} ({:.0} GB/s), sharing {} of RAM{}; up to {} for the GPU",
            names[0],
            first.gpu.bandwidth_gb_s,
            format_size(ram),
            if ram_given { " (--ram)" } else { "" },
            format_size(limit)
        ));
    } else {
        s.unified = None;
        s.gpus = cards
            .iter()
            .enumerate()
            .map(|(i, c)| named_gpu(i, c, c.memory_bytes()))
            .collect();
        if s.host == Host::ThisMachine {
            set_host(
                &mut s,
                Host::TypicalDesktop,
                TYPICAL_DESKTOP_RAM_BANDWIDTH_BYTES_PER_S,
                typical_desktop_cpu(),
            );
            s.notes.push(TYPICAL_DESKTOP_NOTE.to_string());
        }
        s.notes.push(format!(
            "GPUs replaced by --gpu: {}",
            cards
                .iter()
                .zip(&names)
                .map(|(c, n)| format!(
                    "{n} ({}, {:.0} GB/s)",
                    format_size(c.memory_bytes()),
                    c.gpu.bandwidth_gb_s
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    s.source = Source::Overridden;
    Ok(s)
}

/// What the plan says of the typical desktop assumed for named discrete cards.
pub const TYPICAL_DESKTOP_NOTE: &str = "host assumed for the named cards: a typical desktop, \
8 x86-64 cores with AVX2 and dual-channel DDR5-5600 read at 67 GB/s (0.75 of its 89.6 GB/s \
peak); not this machine (give its profile with --hw to plan for a stated one)";

/// Makes `host` the snapshot's CPU and RAM: its bandwidth (not measured
/// here) and CPU, and nothing this machine measured or calibrated.
fn set_host(s: &mut HardwareSnapshot, host: Host, bandwidth: f64, cpu: CpuInfo) {
    s.host = host;
    s.ram.bandwidth_bytes_per_s = bandwidth;
    s.ram.bandwidth_measured = false;
    s.ram.speed_calibration = None;
    s.ram.runtime_bytes = None;
    s.ram.runtime_virtual_bytes = None;
    s.cpu = cpu;
}

/// The CPU of a unified part: Apple silicon is arm64, Strix Halo x86-64,
/// each with its architecture's default features; the table's cores, else
/// [`DEFAULT_PROFILE_CORES`].
fn part_cpu(g: &KnownGpu) -> CpuInfo {
    let arch = if g.vendor == GpuVendor::Apple {
        "aarch64"
    } else {
        "x86_64"
    };
    let cores = g.cpu_cores.unwrap_or(DEFAULT_PROFILE_CORES);
    CpuInfo {
        model: format!("{} (named part)", g.full_name()),
        physical_cores: cores,
        logical_cores: cores,
        arch: arch.into(),
        features: default_features(arch),
    }
}

/// The CPU of the typical desktop ([`Host::TypicalDesktop`]).
fn typical_desktop_cpu() -> CpuInfo {
    CpuInfo {
        model: format!(
            "typical desktop (assumed: {TYPICAL_DESKTOP_CORES} cores, DDR5-{:.0} at {TYPICAL_DESKTOP_STREAM_FRACTION} of peak)",
            TYPICAL_DESKTOP_MT_S / 1e6
        ),
        physical_cores: TYPICAL_DESKTOP_CORES,
        logical_cores: 2 * TYPICAL_DESKTOP_CORES,
        arch: "x86_64".into(),
        features: default_features("x86_64"),
    }
}

/// A named card as device `i` with `bytes` of memory, all free.
fn named_gpu(i: usize, c: &NamedGpu, bytes: u64) -> GpuInfo {
    GpuInfo {
        index: u32::try_from(i).unwrap_or(u32::MAX),
        name: c.display_name(),
        vendor: c.gpu.vendor,
        total_bytes: bytes,
        free_bytes: bytes,
        bandwidth_bytes_per_s: Some(c.gpu.bandwidth_bytes_per_s()),
        bandwidth_source: BandwidthSource::LookedUp,
        fp16_flops_per_s: Some(c.gpu.fp16_flops_per_s()),
        uuid: None,
        budget_bytes: None,
        llama: None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::profile::parse_profile;
    use super::*;

    const GIB: u64 = 1 << 30;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/hw")
            .join(name)
    }

    fn container() -> HardwareSnapshot {
        load_profile(&fixture("container-512m.toml")).expect("fixture")
    }

    #[test]
    fn ram_override_simulates_a_bare_machine() {
        let mut base = container();
        base.ram.rlimit_as_bytes = Some(GIB);
        let o = Overrides {
            ram_bytes: Some(32 * GIB),
            ..Overrides::default()
        };
        let s = apply_overrides(base, &o).expect("valid");
        assert_eq!(s.ram.total_bytes, 32 * GIB);
        assert_eq!(s.ram.budget_bytes(), 32 * GIB);
        assert_eq!(s.ram.cgroup, None);
        assert_eq!(s.ram.rlimit_as_bytes, None);
        assert_eq!(s.source, Source::Overridden);
        assert!(
            s.notes.iter().any(|n| n.contains("32.00 GiB")),
            "{:?}",
            s.notes
        );
    }

    #[test]
    fn vram_override_replaces_gpus() {
        let o = Overrides {
            vram_bytes: Some(vec![24 * GIB, 12 * GIB]),
            ..Overrides::default()
        };
        let s = apply_overrides(container(), &o).expect("valid");
        let got: Vec<(u32, &str, u64, u64)> = s
            .gpus
            .iter()
            .map(|g| (g.index, g.name.as_str(), g.total_bytes, g.free_bytes))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, "GPU0", 24 * GIB, 24 * GIB),
                (1, "GPU1", 12 * GIB, 12 * GIB)
            ]
        );
        assert!(s.gpus.iter().all(|g| {
            g.planned_bandwidth() == (DEFAULT_GPU_BANDWIDTH_BYTES_PER_S, BandwidthSource::Assumed)
        }));
        // RAM untouched without --ram.
        assert_eq!(s.ram.budget_bytes(), 362 << 20);
    }

    #[test]
    fn vram_zero_or_empty_means_no_gpu_and_no_unified() {
        for vram in [vec![], vec![0], vec![0, 0]] {
            let laptop = load_profile(&fixture("laptop-unified-32g.toml")).expect("fixture");
            let o = Overrides {
                vram_bytes: Some(vram.clone()),
                ..Overrides::default()
            };
            let s = apply_overrides(laptop, &o).expect("valid");
            assert!(s.gpus.is_empty(), "{vram:?}");
            assert_eq!(s.unified, None);
        }
    }

    #[test]
    fn bad_overrides_are_errors() {
        let zero_ram = Overrides {
            ram_bytes: Some(0),
            ..Overrides::default()
        };
        assert!(matches!(
            apply_overrides(container(), &zero_ram),
            Err(HwError::InvalidOverride { .. })
        ));
        let mixed = Overrides {
            vram_bytes: Some(vec![8 * GIB, 0]),
            ..Overrides::default()
        };
        let e = apply_overrides(container(), &mixed).expect_err("mixed");
        assert!(e.to_string().contains("8.00 GiB, 0 B"), "{e}");
    }

    #[test]
    fn profile_override_replaces_the_probe() {
        let o = Overrides {
            profile: Some(fixture("a100-80g.toml")),
            ..Overrides::default()
        };
        let s = apply_overrides(container(), &o).expect("valid");
        assert_eq!(s.gpus[0].name, "NVIDIA A100-SXM4-80GB");
        assert_eq!(s.source, Source::Profile(fixture("a100-80g.toml")));
        let missing = Overrides {
            profile: Some(fixture("nope.toml")),
            ..Overrides::default()
        };
        let e = apply_overrides(container(), &missing).expect_err("missing file");
        assert!(e.to_string().contains("nope.toml"), "{e}");
    }

    #[test]
    fn ram_override_scales_unified_limit() {
        let laptop = load_profile(&fixture("laptop-unified-32g.toml")).expect("fixture");
        let o = Overrides {
            ram_bytes: Some(16 * GIB),
            ..Overrides::default()
        };
        let s = apply_overrides(laptop, &o).expect("valid");
        let limit = s.unified.as_ref().map(|u| u.gpu_limit_bytes);
        assert_eq!(limit, Some(16 * GIB * 2 / 3));
        assert_eq!(s.gpus[0].total_bytes, 16 * GIB * 2 / 3);
        assert!(
            s.notes
                .iter()
                .any(|n| n.contains("laptop-unified-32g.toml"))
        );
    }

    #[test]
    fn overrides_on_a_parsed_profile_keep_cpu() {
        let base =
            parse_profile("[cpu]\nphysical_cores = 3\n", Path::new("p.toml")).expect("valid");
        let o = Overrides {
            ram_bytes: Some(GIB),
            vram_bytes: Some(vec![GIB]),
            profile: None,
        };
        let s = apply_overrides(base, &o).expect("valid");
        assert_eq!(s.cpu.physical_cores, 3);
        assert_eq!(s.gpus.len(), 1);
    }

    fn card(name: &str) -> NamedGpu {
        crate::hw::gpus::resolve(name).expect("in the table")
    }

    #[test]
    fn named_cards_replace_the_gpus_with_their_figures() {
        let cards = [card("rtx4060"), card("RTX 3090")];
        let s = apply_named_gpus(container(), &cards, false).expect("valid");
        let got: Vec<(&str, u64, Option<f64>, BandwidthSource)> = s
            .gpus
            .iter()
            .map(|g| {
                (
                    g.name.as_str(),
                    g.free_bytes,
                    g.bandwidth_bytes_per_s,
                    g.bandwidth_source,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "NVIDIA GeForce RTX 4060",
                    8 * GIB,
                    Some(272e9),
                    BandwidthSource::LookedUp
                ),
                (
                    "NVIDIA GeForce RTX 3090",
                    24 * GIB,
                    Some(936e9),
                    BandwidthSource::LookedUp
                ),
            ]
        );
        assert_eq!(s.gpus[1].index, 1);
        assert!(s.gpus.iter().all(|g| g.fp16_flops_per_s.is_some()));
        assert_eq!(s.unified, None);
        assert_eq!(s.source, Source::Overridden);
        // RAM is this machine's (the container's) without --ram.
        assert_eq!(s.ram.budget_bytes(), 362 << 20);
        assert!(s.notes.iter().any(|n| n.contains("--gpu")), "{:?}", s.notes);
    }

    #[test]
    fn a_named_unified_part_is_the_machine_memory() {
        let s = apply_named_gpus(container(), &[card("M4 Max 64GB")], false).expect("valid");
        assert_eq!(s.ram.total_bytes, 64 * GIB);
        assert_eq!(s.ram.budget_bytes(), 64 * GIB);
        let u = s.unified.as_ref().expect("unified");
        assert_eq!(u.gpu_limit_bytes, 48 * GIB);
        assert_eq!(s.gpus.len(), 1);
        assert_eq!(s.gpus[0].name, "Apple M4 Max 64GB");
        assert_eq!(s.gpus[0].vendor, GpuVendor::Apple);
        assert_eq!(s.gpus[0].total_bytes, 48 * GIB);
        assert_eq!(s.gpus[0].bandwidth_bytes_per_s, Some(546e9));

        // --ram already set the RAM: the GPU's share follows it.
        let ram32 = apply_overrides(
            container(),
            &Overrides {
                ram_bytes: Some(32 * GIB),
                ..Overrides::default()
            },
        )
        .expect("valid");
        let s = apply_named_gpus(ram32, &[card("Strix Halo 128GB")], true).expect("valid");
        assert_eq!(s.ram.total_bytes, 32 * GIB);
        assert_eq!(s.unified.map(|u| u.gpu_limit_bytes), Some(16 * GIB));
        assert_eq!(s.gpus[0].vendor, GpuVendor::Amd);
    }

    #[test]
    fn a_unified_part_is_named_alone() {
        let e = apply_named_gpus(container(), &[card("M2 Max 64GB"), card("rtx4090")], false)
            .expect_err("two kinds");
        assert!(e.to_string().contains("named alone"), "{e}");
        let e = apply_named_gpus(container(), &[], false).expect_err("none");
        assert!(e.to_string().contains("--gpu"), "{e}");
    }

    /// The container fixture as if probed here: its bandwidth measured, its
    /// runs calibrating it.
    fn this_machine() -> HardwareSnapshot {
        let mut s = container();
        s.host = Host::ThisMachine;
        s.source = Source::Probed;
        s.ram.bandwidth_bytes_per_s = 14e9;
        s.ram.bandwidth_measured = true;
        s.ram.speed_calibration = Some(crate::speed::SpeedCalibration {
            runs: 3,
            decode_factor: 1.2,
            prompt_factor: 0.9,
        });
        s
    }

    #[test]
    fn ram_and_vram_alone_keep_this_machines_cpu_and_figures() {
        let o = Overrides {
            ram_bytes: Some(32 * GIB),
            vram_bytes: Some(vec![8 * GIB]),
            profile: None,
        };
        let here = this_machine();
        let s = apply_overrides(here.clone(), &o).expect("valid");
        assert_eq!(s.host, Host::ThisMachine);
        assert_eq!(s.cpu, here.cpu);
        assert_eq!(s.ram.bandwidth_bytes_per_s, 14e9);
        assert_eq!(s.ram.speed_calibration, here.ram.speed_calibration);
        assert!(crate::speed::calibration_of(&s).is_some());
    }

    #[test]
    fn named_discrete_cards_imply_a_typical_desktop_not_this_machine() {
        let here = this_machine();
        let s = apply_named_gpus(here.clone(), &[card("rtx4060")], false).expect("valid");
        assert_eq!(s.host, Host::TypicalDesktop);
        assert_eq!(
            s.ram.bandwidth_bytes_per_s,
            TYPICAL_DESKTOP_RAM_BANDWIDTH_BYTES_PER_S
        );
        // 2 channels x 8 bytes x 5600 MT/s x 0.75.
        assert!((TYPICAL_DESKTOP_RAM_BANDWIDTH_BYTES_PER_S - 67.2e9).abs() < 1e3);
        assert!(!s.ram.bandwidth_measured);
        assert_eq!(s.cpu.physical_cores, TYPICAL_DESKTOP_CORES);
        assert_eq!(s.cpu.arch, "x86_64");
        assert!(s.cpu.features.iter().any(|f| f == "avx2"));
        // Nothing measured or learnt here carries over.
        assert_eq!(s.ram.speed_calibration, None);
        assert_eq!(crate::speed::calibration_of(&s), None);
        assert!(
            s.notes.iter().any(|n| n.contains("typical desktop")),
            "{:?}",
            s.notes
        );
        // The memory sizes are still this machine's (or --ram's).
        assert_eq!(s.ram.budget_bytes(), here.ram.budget_bytes());
        assert_eq!(
            crate::speed::RamBandwidthSource::of(&s, false),
            crate::speed::RamBandwidthSource::TypicalDesktop
        );
    }

    #[test]
    fn named_discrete_cards_on_a_profile_keep_the_profiles_machine() {
        let profile = parse_profile(
            "[cpu]\nphysical_cores = 6\n[ram]\nbandwidth_bytes_per_s = 3.1e10\n",
            Path::new("p.toml"),
        )
        .expect("valid");
        let s = apply_named_gpus(profile.clone(), &[card("rtx3090")], false).expect("valid");
        assert_eq!(s.host, Host::Profile);
        assert_eq!(s.cpu, profile.cpu);
        assert_eq!(s.ram.bandwidth_bytes_per_s, 3.1e10);
        assert_eq!(
            crate::speed::RamBandwidthSource::of(&s, false),
            crate::speed::RamBandwidthSource::Stated
        );
        // Without a stated bandwidth, the stated default, not this machine's.
        let bare = parse_profile("", Path::new("p.toml")).expect("valid");
        let s = apply_named_gpus(bare, &[card("rtx3090")], false).expect("valid");
        assert_eq!(
            s.ram.bandwidth_bytes_per_s,
            super::super::DEFAULT_RAM_BANDWIDTH_BYTES_PER_S
        );
        assert_eq!(
            crate::speed::RamBandwidthSource::of(&s, false),
            crate::speed::RamBandwidthSource::Default
        );
        // A profile is never calibrated, whatever a caller put in it.
        let mut p = profile;
        p.ram.speed_calibration = this_machine().ram.speed_calibration;
        assert_eq!(crate::speed::calibration_of(&p), None);
    }

    #[test]
    fn a_named_unified_part_brings_its_cpu_and_bandwidth() {
        for base in [this_machine(), container()] {
            let s = apply_named_gpus(base, &[card("M4 Max 64GB")], false).expect("valid");
            assert_eq!(s.host, Host::NamedPart);
            // The part's memory bandwidth, the GPU table's figure.
            assert_eq!(s.ram.bandwidth_bytes_per_s, 546e9);
            assert!(!s.ram.bandwidth_measured);
            // 40-core GPU M4 Max: 16-core CPU, 12 of them performance cores.
            assert_eq!(s.cpu.physical_cores, 12);
            assert_eq!(s.cpu.arch, "aarch64");
            assert!(s.cpu.features.iter().any(|f| f == "neon"));
            assert_eq!(s.ram.speed_calibration, None);
            assert_eq!(
                crate::speed::RamBandwidthSource::of(&s, false),
                crate::speed::RamBandwidthSource::LookedUp
            );
        }
        let s =
            apply_named_gpus(this_machine(), &[card("Strix Halo 128GB")], false).expect("valid");
        assert_eq!((s.cpu.physical_cores, s.cpu.arch.as_str()), (16, "x86_64"));
        assert_eq!(s.ram.bandwidth_bytes_per_s, 256e9);
        // A part whose cores the table does not list: 8, and the note says so.
        let s = apply_named_gpus(this_machine(), &[card("M5 Max 128GB")], false).expect("valid");
        assert_eq!(s.cpu.physical_cores, DEFAULT_PROFILE_CORES);
        assert!(
            s.notes.iter().any(|n| n.contains("assumed")),
            "{:?}",
            s.notes
        );
    }
}
