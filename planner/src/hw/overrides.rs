//! `--ram`, `--vram` and `--hardware-profile`: answer "would it fit on that
//! machine?" from this one.

use std::path::PathBuf;

use super::HwError;
use super::profile::load_profile;
use super::size::format_size;
use super::types::{
    DEFAULT_SYNTHETIC_GPU_BANDWIDTH_BYTES_PER_S, GpuInfo, GpuVendor, HardwareSnapshot, Source,
};

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
///    and [`DEFAULT_SYNTHETIC_GPU_BANDWIDTH_BYTES_PER_S`]; these are discrete,
///    so `unified` is cleared. Empty or all-zero means a machine without GPU.
///
/// The source becomes [`Source::Overridden`] when `ram_bytes` or
/// `vram_bytes` is given, and a note records each override.
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
                "GPUs replaced by --vram: {} (bandwidth assumed {:.0} GB/s)",
                vram.iter()
                    .map(|&b| format_size(b))
                    .collect::<Vec<_>>()
                    .join(", "),
                DEFAULT_SYNTHETIC_GPU_BANDWIDTH_BYTES_PER_S / 1e9
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
            bandwidth_bytes_per_s: Some(DEFAULT_SYNTHETIC_GPU_BANDWIDTH_BYTES_PER_S),
            uuid: None,
        })
        .collect()
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
        assert!(
            s.gpus
                .iter()
                .all(|g| g.bandwidth_bytes_per_s == Some(900e9))
        );
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
}
