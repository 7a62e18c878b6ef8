//! Hardware profiles: a TOML file that describes a machine, so plans can be
//! made (and tested) for machines we are not on.
//!
//! Sizes are either integers (bytes) or strings in [`parse_size`] syntax
//! (`"16GiB"`, `"8GB"`, `"1.5GiB"`). Every table and key is optional except
//! `total` in a `[[gpu]]` and `gpu_limit` in `[unified]`; unknown keys are an
//! error, so a typo cannot silently fall back to a default.
//!
//! ```toml
//! [ram]
//! total = "32GiB"               # default 16 GiB
//! available = "28GiB"           # default: total
//! swap_total = 0                # default 0
//! swap_free = 0                 # default: swap_total
//! bandwidth_bytes_per_s = 6e10  # default 20 GB/s (then marked not measured)
//! rlimit_as = "24GiB"           # default: unlimited
//! rlimit_data = "24GiB"         # default: unlimited
//!
//! [cgroup]                      # optional: simulate a container
//! version = 2                   # default 2
//! limit = "8GiB"                # default: no limit
//! usage = "1GiB"                # default 0
//! reclaimable = "512MiB"        # default 0
//! path = "/"                    # default "/"
//!
//! [cpu]
//! model = "AMD Ryzen 9 7950X"   # default "unspecified CPU"
//! physical_cores = 16           # default 8
//! logical_cores = 32            # default: physical_cores
//! arch = "x86_64"               # default "x86_64"
//! features = ["avx2", "fma"]    # default: avx, avx2, fma, f16c on x86_64;
//!                               # neon, dotprod, fp16 on aarch64; else none
//!
//! [[gpu]]                       # one table per GPU, in device order
//! name = "NVIDIA GeForce RTX 4090"   # default "GPU<n>"
//! vendor = "nvidia"             # nvidia | amd | intel | apple | other (default)
//! total = "24GiB"               # required
//! free = "23.5GiB"              # default: total
//! bandwidth_bytes_per_s = 1.008e12   # default: the GPU table's figure for
//!                               # the name (see `hw::gpus`), else unknown
//! uuid = "GPU-..."              # default: none
//!
//! [unified]                     # GPU shares RAM (Apple Silicon, AMD APU)
//! gpu_limit = "21GiB"           # required; at most ram.total
//! source = "..."                # default "hardware profile"
//! ```
//!
//! With `[unified]` and no `[[gpu]]`, one integrated GPU named "Integrated
//! GPU" is added with `total = free = gpu_limit` and the RAM's bandwidth.
//! With `[unified]`, the first GPU's name is looked up in the GPU table with
//! the RAM size (an Apple chip's configuration is its RAM).

use std::fmt;
use std::path::Path;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

use super::HwError;
use super::size::{format_size, parse_size};
use super::types::{
    BandwidthSource, CgroupMemory, CpuInfo, DEFAULT_RAM_BANDWIDTH_BYTES_PER_S, GpuInfo, GpuVendor,
    HardwareSnapshot, Host, RamInfo, Source, UnifiedMemory,
};

const GIB: u64 = 1 << 30;
/// RAM assumed when a profile has no `[ram] total`.
pub const DEFAULT_PROFILE_RAM_BYTES: u64 = 16 * GIB;
/// Physical cores assumed when a profile has no `[cpu] physical_cores`.
pub const DEFAULT_PROFILE_CORES: u32 = 8;

/// A byte size in a profile: an integer or a [`parse_size`] string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
struct Size(u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct SizeVisitor;
        impl Visitor<'_> for SizeVisitor {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size: bytes as an integer, or a string such as \"16GiB\" or \"8GB\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Size, E> {
                Ok(Size(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Size, E> {
                u64::try_from(v)
                    .map(Size)
                    .map_err(|_| E::custom(format!("size {v} is negative")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Size, E> {
                parse_size(v).map(Size).map_err(E::custom)
            }
        }
        d.deserialize_any(SizeVisitor)
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ram: Option<RamSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cgroup: Option<CgroupSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpu: Option<CpuSection>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    gpu: Vec<GpuSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unified: Option<UnifiedSection>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RamSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    total: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    available: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    swap_total: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    swap_free: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bandwidth_bytes_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rlimit_as: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rlimit_data: Option<Size>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CgroupSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    limit: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    usage: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reclaimable: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CpuSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    physical_cores: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    logical_cores: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    arch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    features: Option<Vec<String>>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GpuSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    vendor: Option<GpuVendor>,
    total: Size,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    free: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bandwidth_bytes_per_s: Option<f64>,
    /// Where `bandwidth_bytes_per_s` came from; absent: reported. Written
    /// for an assumed figure (an integrated GPU's, which is the RAM's), so
    /// a written profile reads back as the same machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bandwidth_source: Option<BandwidthSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    uuid: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct UnifiedSection {
    gpu_limit: Size,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
}

/// Loads a TOML hardware profile (format in the module docs).
///
/// # Errors
/// [`HwError::ProfileRead`] when the file cannot be read,
/// [`HwError::ProfileParse`] for bad TOML, unknown keys or bad sizes,
/// [`HwError::ProfileInvalid`] for an impossible machine (free > total…).
pub fn load_profile(path: &Path) -> Result<HardwareSnapshot, HwError> {
    use std::io::Read as _;
    let read_error = |error| HwError::ProfileRead {
        path: path.to_path_buf(),
        error,
    };
    // A profile is a few hundred bytes; reading a stranger's file stops at 1 MiB.
    const CAP: u64 = 1 << 20;
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(read_error)?
        .take(CAP + 1)
        .read_to_string(&mut text)
        .map_err(read_error)?;
    if text.len() as u64 > CAP {
        return Err(read_error(std::io::Error::other(
            "larger than 1 MiB, too large for a hardware profile",
        )));
    }
    parse_profile(&text, path)
}

/// Parses profile text; `path` is only used in errors and as the source.
///
/// # Errors
/// As [`load_profile`], minus the read error.
pub fn parse_profile(text: &str, path: &Path) -> Result<HardwareSnapshot, HwError> {
    let file: ProfileFile = toml::from_str(text).map_err(|e| {
        // toml's Display draws a multi-line snippet; one line with the line
        // number reads better in a terminal and in logs.
        let line = e.span().map(|span| {
            let before = &text.as_bytes()[..span.start.min(text.len())];
            before.iter().filter(|&&b| b == b'\n').count() + 1
        });
        let message = e.message().trim().replace('\n', " ");
        HwError::ProfileParse {
            path: path.to_path_buf(),
            message: match line {
                Some(line) => format!("line {line}: {message}"),
                None => message,
            },
        }
    })?;
    let invalid = |reason: String| HwError::ProfileInvalid {
        path: path.to_path_buf(),
        reason,
    };
    build(file, path).map_err(invalid)
}

/// Turns a parsed file into a snapshot, applying defaults and checking that
/// the machine is possible.
fn build(file: ProfileFile, path: &Path) -> Result<HardwareSnapshot, String> {
    let ram_s = file.ram.unwrap_or_default();
    let total = ram_s.total.map_or(DEFAULT_PROFILE_RAM_BYTES, |s| s.0);
    let available = ram_s.available.map_or(total, |s| s.0);
    let swap_total = ram_s.swap_total.map_or(0, |s| s.0);
    let swap_free = ram_s.swap_free.map_or(swap_total, |s| s.0);
    if total == 0 {
        return Err("ram.total is 0".into());
    }
    if available > total {
        return Err(format!(
            "ram.available ({}) is larger than ram.total ({})",
            format_size(available),
            format_size(total)
        ));
    }
    if swap_free > swap_total {
        return Err(format!(
            "ram.swap_free ({}) is larger than ram.swap_total ({})",
            format_size(swap_free),
            format_size(swap_total)
        ));
    }
    let bandwidth = check_bandwidth(ram_s.bandwidth_bytes_per_s, "ram.bandwidth_bytes_per_s")?;

    let cgroup = match file.cgroup {
        None => None,
        Some(c) => {
            let version = c.version.unwrap_or(2);
            if !matches!(version, 1 | 2) {
                return Err(format!("cgroup.version must be 1 or 2, not {version}"));
            }
            Some(CgroupMemory {
                version,
                path: c.path.unwrap_or_else(|| "/".into()),
                limit_bytes: c.limit.map(|s| s.0),
                usage_bytes: c.usage.map_or(0, |s| s.0),
                reclaimable_bytes: c.reclaimable.map_or(0, |s| s.0),
            })
        }
    };

    let ram = RamInfo {
        total_bytes: total,
        available_bytes: available,
        swap_total_bytes: swap_total,
        swap_free_bytes: swap_free,
        cgroup,
        rlimit_as_bytes: ram_s.rlimit_as.map(|s| s.0),
        rlimit_data_bytes: ram_s.rlimit_data.map(|s| s.0),
        bandwidth_bytes_per_s: bandwidth.unwrap_or(DEFAULT_RAM_BANDWIDTH_BYTES_PER_S),
        bandwidth_measured: bandwidth.is_some(),
        speed_calibration: None,
        runtime_bytes: None,
        runtime_virtual_bytes: None,
    };

    let cpu_s = file.cpu.unwrap_or_default();
    let physical = cpu_s.physical_cores.unwrap_or(DEFAULT_PROFILE_CORES);
    let logical = cpu_s.logical_cores.unwrap_or(physical);
    if physical == 0 || logical < physical {
        return Err(format!(
            "cpu cores: need 1 <= physical_cores <= logical_cores, got {physical} and {logical}"
        ));
    }
    let arch = cpu_s.arch.unwrap_or_else(|| "x86_64".into());
    let features = cpu_s.features.unwrap_or_else(|| default_features(&arch));
    let cpu = CpuInfo {
        model: cpu_s.model.unwrap_or_else(|| "unspecified CPU".into()),
        physical_cores: physical,
        logical_cores: logical,
        arch,
        features,
    };

    let mut gpus = Vec::with_capacity(file.gpu.len());
    for (i, g) in file.gpu.into_iter().enumerate() {
        let total = g.total.0;
        let free = g.free.map_or(total, |s| s.0);
        if total == 0 {
            return Err(format!("gpu[{i}].total is 0 (leave the GPU out instead)"));
        }
        if free > total {
            return Err(format!(
                "gpu[{i}].free ({}) is larger than its total ({})",
                format_size(free),
                format_size(total)
            ));
        }
        let bandwidth = check_bandwidth(
            g.bandwidth_bytes_per_s,
            &format!("gpu[{i}].bandwidth_bytes_per_s"),
        )?;
        gpus.push(GpuInfo {
            index: u32::try_from(i).unwrap_or(u32::MAX),
            name: g.name.unwrap_or_else(|| format!("GPU{i}")),
            vendor: g.vendor.unwrap_or(GpuVendor::Other),
            total_bytes: total,
            free_bytes: free,
            bandwidth_bytes_per_s: bandwidth,
            bandwidth_source: if bandwidth.is_some() {
                g.bandwidth_source.unwrap_or(BandwidthSource::Reported)
            } else {
                BandwidthSource::Assumed
            },
            fp16_flops_per_s: None,
            uuid: g.uuid,
            budget_bytes: None,
            llama: None,
        });
    }

    let unified = match file.unified {
        None => None,
        Some(u) => {
            let limit = u.gpu_limit.0;
            if limit == 0 || limit > ram.total_bytes {
                return Err(format!(
                    "unified.gpu_limit ({}) must be more than 0 and at most ram.total ({})",
                    format_size(limit),
                    format_size(ram.total_bytes)
                ));
            }
            if gpus.is_empty() {
                gpus.push(GpuInfo {
                    index: 0,
                    name: "Integrated GPU".into(),
                    vendor: GpuVendor::Other,
                    total_bytes: limit,
                    free_bytes: limit,
                    bandwidth_bytes_per_s: Some(ram.bandwidth_bytes_per_s),
                    bandwidth_source: if ram.bandwidth_measured {
                        BandwidthSource::Reported
                    } else {
                        BandwidthSource::Assumed
                    },
                    fp16_flops_per_s: None,
                    uuid: None,
                    budget_bytes: None,
                    llama: None,
                });
            }
            Some(UnifiedMemory {
                gpu_limit_bytes: limit,
                source: u.source.unwrap_or_else(|| "hardware profile".into()),
            })
        }
    };

    for (i, g) in gpus.iter_mut().enumerate() {
        let memory = if i == 0 && unified.is_some() {
            ram.total_bytes
        } else {
            g.total_bytes
        };
        g.fill_from_table(memory);
    }

    Ok(HardwareSnapshot {
        ram,
        cpu,
        gpus,
        unified,
        source: Source::Profile(path.to_path_buf()),
        notes: Vec::new(),
        rpc_link_bytes_per_s: None,
        host: Host::Profile,
    })
}

/// A stated bandwidth must be a positive, finite number.
fn check_bandwidth(value: Option<f64>, key: &str) -> Result<Option<f64>, String> {
    match value {
        Some(v) if !(v.is_finite() && v > 0.0) => Err(format!(
            "{key} must be a positive number of bytes per second, not {v}"
        )),
        other => Ok(other),
    }
}

/// SIMD features assumed for a CPU whose profile lists none: what any CPU of
/// that architecture sold in the last ~8 years has.
pub(crate) fn default_features(arch: &str) -> Vec<String> {
    let names: &[&str] = match arch {
        "x86_64" => &["avx", "avx2", "fma", "f16c"],
        "aarch64" => &["neon", "dotprod", "fp16"],
        _ => &[],
    };
    names.iter().map(|s| s.to_string()).collect()
}

/// Writes a snapshot as a profile that [`load_profile`] reads back to the
/// same machine (notes and source aside), e.g. to capture this machine for
/// later simulation. The RAM bandwidth is always written, so after a round
/// trip `bandwidth_measured` is true even where it was the default.
///
/// # Errors
/// [`HwError::ProfileWrite`] when a size does not fit TOML's signed 64-bit
/// integers (over 8 EiB).
pub fn to_profile_toml(s: &HardwareSnapshot) -> Result<String, HwError> {
    let file = ProfileFile {
        ram: Some(RamSection {
            total: Some(Size(s.ram.total_bytes)),
            available: Some(Size(s.ram.available_bytes)),
            swap_total: Some(Size(s.ram.swap_total_bytes)),
            swap_free: Some(Size(s.ram.swap_free_bytes)),
            bandwidth_bytes_per_s: Some(s.ram.bandwidth_bytes_per_s),
            rlimit_as: s.ram.rlimit_as_bytes.map(Size),
            rlimit_data: s.ram.rlimit_data_bytes.map(Size),
        }),
        cgroup: s.ram.cgroup.as_ref().map(|c| CgroupSection {
            version: Some(c.version),
            limit: c.limit_bytes.map(Size),
            usage: Some(Size(c.usage_bytes)),
            reclaimable: Some(Size(c.reclaimable_bytes)),
            path: Some(c.path.clone()),
        }),
        cpu: Some(CpuSection {
            model: Some(s.cpu.model.clone()),
            physical_cores: Some(s.cpu.physical_cores),
            logical_cores: Some(s.cpu.logical_cores),
            arch: Some(s.cpu.arch.clone()),
            features: Some(s.cpu.features.clone()),
        }),
        gpu: s
            .gpus
            .iter()
            .map(|g| GpuSection {
                name: Some(g.name.clone()),
                vendor: Some(g.vendor),
                total: Size(g.total_bytes),
                free: Some(Size(g.free_bytes)),
                // A looked-up figure is looked up again on reading; a
                // reported one is written as it is, and an assumed one that
                // has a value (an integrated GPU's, the RAM's) with its
                // source, so it reads back the same.
                bandwidth_bytes_per_s: g
                    .bandwidth_bytes_per_s
                    .filter(|_| g.bandwidth_source != BandwidthSource::LookedUp),
                bandwidth_source: (g.bandwidth_bytes_per_s.is_some()
                    && g.bandwidth_source == BandwidthSource::Assumed)
                    .then_some(BandwidthSource::Assumed),
                uuid: g.uuid.clone(),
            })
            .collect(),
        unified: s.unified.as_ref().map(|u| UnifiedSection {
            gpu_limit: Size(u.gpu_limit_bytes),
            source: Some(u.source.clone()),
        }),
    };
    toml::to_string(&file).map_err(|e| HwError::ProfileWrite {
        reason: e.to_string(),
    })
}

#[cfg(test)]
#[path = "profile_tests.rs"]
mod tests;
