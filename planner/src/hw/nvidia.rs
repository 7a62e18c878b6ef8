//! NVIDIA GPUs through NVML, numbered the way CUDA (and so llama.cpp) will
//! number them.
//!
//! NVML is loaded at run time (`libnvidia-ml.so.1` / `nvml.dll`), so the
//! binary runs on machines without the driver; there it finds no GPUs and
//! says why in a note. NVML lists every GPU in PCI bus order and ignores
//! `CUDA_VISIBLE_DEVICES`; [`visible_devices`] applies that variable the way
//! the CUDA runtime does.
//!
//! NVML is initialised once per process (see `nvml`): the chat's memory
//! monitor probes once a second.

use super::types::GpuInfo;

/// Peak DRAM bandwidth from NVML's figures: bus width (bits) / 8 × max memory
/// clock (MHz) × 10⁶ × 2. NVML reports the memory clock such that one
/// doubling gives the data rate for GDDR and HBM alike; checked against
/// datasheets: A100 80GB (5120 bit, 1593 MHz) → 2.04 TB/s, H100 SXM (5120
/// bit, 2619 MHz) → 3.35 TB/s, RTX 4090 (384 bit, 10501 MHz) → 1.01 TB/s.
pub fn bandwidth_bytes_per_s(bus_width_bits: u32, max_mem_clock_mhz: u32) -> f64 {
    f64::from(bus_width_bits) / 8.0 * f64::from(max_mem_clock_mhz) * 1e6 * 2.0
}

/// Result of applying `CUDA_VISIBLE_DEVICES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visibility {
    /// Indices into the full (NVML) device list, in the order CUDA will
    /// number them.
    pub indices: Vec<usize>,
    /// The entry where parsing stopped, when it stopped early; CUDA silently
    /// hides that device and every one after it, which deserves a note.
    pub stopped_at: Option<String>,
}

/// Applies a `CUDA_VISIBLE_DEVICES` value to a machine whose devices have
/// these UUIDs (NVML order; `None` when a UUID could not be read).
///
/// Mirrors the CUDA runtime: a comma-separated list of device indices or
/// UUID prefixes (`GPU-8932f937`, unambiguous prefixes allowed); the empty
/// string or `-1` hide every device; parsing stops at the first entry that
/// is not a valid, unused device (out of range, negative, unknown or
/// ambiguous UUID, duplicate, or a `MIG-` instance, which NVML device
/// enumeration cannot map), keeping the devices before it.
pub fn visible_devices(spec: &str, uuids: &[Option<String>]) -> Visibility {
    let mut indices: Vec<usize> = Vec::new();
    let spec = spec.trim();
    if spec.is_empty() {
        return Visibility {
            indices,
            stopped_at: None,
        };
    }
    for entry in spec.split(',').map(str::trim) {
        let found = if let Ok(n) = entry.parse::<i64>() {
            usize::try_from(n).ok().filter(|&i| i < uuids.len())
        } else if entry.starts_with("GPU-") {
            let mut matches = uuids
                .iter()
                .enumerate()
                .filter(|(_, u)| u.as_deref().is_some_and(|u| u.starts_with(entry)));
            match (matches.next(), matches.next()) {
                (Some((i, _)), None) => Some(i),
                _ => None,
            }
        } else {
            None
        };
        match found {
            Some(i) if !indices.contains(&i) => indices.push(i),
            _ => {
                // "-1" is the documented way to hide everything, not a mistake.
                let stopped_at = (entry != "-1").then(|| entry.to_string());
                return Visibility {
                    indices,
                    stopped_at,
                };
            }
        }
    }
    Visibility {
        indices,
        stopped_at: None,
    }
}

/// Keeps the GPUs `CUDA_VISIBLE_DEVICES` (the value in `spec`, `None` when
/// unset) lets CUDA see, renumbered from 0, with notes on anything a user
/// may not expect.
pub fn apply_visibility(
    all: Vec<GpuInfo>,
    spec: Option<&str>,
    notes: &mut Vec<String>,
) -> Vec<GpuInfo> {
    let Some(spec) = spec else {
        return all;
    };
    let uuids: Vec<Option<String>> = all.iter().map(|g| g.uuid.clone()).collect();
    let vis = visible_devices(spec, &uuids);
    if let Some(entry) = &vis.stopped_at {
        notes.push(format!(
            "CUDA_VISIBLE_DEVICES={spec:?}: entry {entry:?} is not a usable device, so CUDA ignores it and every entry after it"
        ));
    }
    let mut visible = Vec::with_capacity(vis.indices.len());
    for (new_index, old) in vis.indices.into_iter().enumerate() {
        if let Some(gpu) = all.get(old) {
            let mut gpu = gpu.clone();
            gpu.index = u32::try_from(new_index).unwrap_or(u32::MAX);
            visible.push(gpu);
        }
    }
    visible
}

/// The process's one NVML handle, or why there is none.
///
/// `nvmlInit` loads the driver library and attaches to every device (tens
/// of milliseconds, more on a multi-GPU host), and the chat's memory monitor
/// probes once a second: initialising each time repeated that cost every
/// second. NVML is thread-safe ("safe to make simultaneous NVML calls from
/// multiple threads"; `Nvml` is `Send + Sync`), so one handle serves every
/// thread; it is never shut down (the driver cleans up at exit). A failed
/// initialisation is kept too: the driver library does not appear during a
/// session, and retrying every second would pay the failed load each time.
#[cfg(feature = "nvidia")]
fn nvml() -> Result<&'static nvml_wrapper::Nvml, &'static str> {
    use nvml_wrapper::Nvml;
    static NVML: std::sync::OnceLock<Result<Nvml, String>> = std::sync::OnceLock::new();
    NVML.get_or_init(|| match Nvml::init() {
        Ok(n) => Ok(n),
        // Some installs ship only the unversioned development name.
        Err(first) => Nvml::builder()
            .lib_path(std::ffi::OsStr::new("libnvidia-ml.so"))
            .init()
            .map_err(|_| first.to_string()),
    })
    .as_ref()
    .map_err(String::as_str)
}

/// Reads all NVIDIA GPUs CUDA will see. Never fails; problems become notes.
#[cfg(feature = "nvidia")]
pub fn probe(notes: &mut Vec<String>) -> Vec<GpuInfo> {
    use super::types::GpuVendor;
    use nvml_wrapper::enum_wrappers::device::Clock;

    let nvml = match nvml() {
        Ok(n) => n,
        Err(why) => {
            notes.push(format!(
                "no NVIDIA GPU found: NVML could not be loaded ({why})"
            ));
            return Vec::new();
        }
    };
    let count = match nvml.device_count() {
        Ok(c) => c,
        Err(e) => {
            notes.push(format!("NVML is loaded but cannot count GPUs: {e}"));
            return Vec::new();
        }
    };
    let mut all = Vec::new();
    for index in 0..count {
        let device = match nvml.device_by_index(index) {
            Ok(d) => d,
            Err(e) => {
                // Keep the slot so CUDA indices after it stay right.
                notes.push(format!(
                    "NVIDIA GPU {index}: cannot open it through NVML: {e}"
                ));
                all.push(placeholder(index));
                continue;
            }
        };
        let name = device
            .name()
            .unwrap_or_else(|_| format!("NVIDIA GPU {index}"));
        let (total_bytes, free_bytes) = match device.memory_info() {
            Ok(m) => (m.total, m.free),
            Err(e) => {
                notes.push(format!(
                    "NVIDIA GPU {index} ({name}): memory size unknown: {e}"
                ));
                (0, 0)
            }
        };
        let bandwidth = match (
            device.memory_bus_width(),
            device.max_clock_info(Clock::Memory),
        ) {
            (Ok(bus), Ok(mhz)) if bus > 0 && mhz > 0 => Some(bandwidth_bytes_per_s(bus, mhz)),
            _ => None,
        };
        all.push(GpuInfo {
            index,
            name,
            vendor: GpuVendor::Nvidia,
            total_bytes,
            free_bytes,
            bandwidth_bytes_per_s: bandwidth,
            bandwidth_source: if bandwidth.is_some() {
                super::types::BandwidthSource::Reported
            } else {
                super::types::BandwidthSource::Assumed
            },
            fp16_flops_per_s: None,
            uuid: device.uuid().ok(),
            budget_bytes: None,
            llama: None,
        });
    }
    let order_note =
        heterogeneous_order_note(&all, std::env::var("CUDA_DEVICE_ORDER").ok().as_deref());
    notes.extend(order_note);
    let spec = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    apply_visibility(all, spec.as_deref(), notes)
}

/// Without the `nvidia` feature there is no NVML; say so once.
#[cfg(not(feature = "nvidia"))]
pub fn probe(notes: &mut Vec<String>) -> Vec<GpuInfo> {
    notes.push("NVIDIA GPUs not probed: built without the `nvidia` feature".to_string());
    Vec::new()
}

#[cfg(feature = "nvidia")]
fn placeholder(index: u32) -> GpuInfo {
    GpuInfo {
        index,
        name: format!("NVIDIA GPU {index} (unreadable)"),
        vendor: super::types::GpuVendor::Nvidia,
        total_bytes: 0,
        free_bytes: 0,
        bandwidth_bytes_per_s: None,
        bandwidth_source: super::types::BandwidthSource::Assumed,
        fp16_flops_per_s: None,
        uuid: None,
        budget_bytes: None,
        llama: None,
    }
}

/// CUDA numbers GPUs fastest first unless `CUDA_DEVICE_ORDER=PCI_BUS_ID`,
/// while NVML uses bus order; with mixed models the two can differ, and the
/// user should know which index means which card.
pub fn heterogeneous_order_note(
    gpus: &[GpuInfo],
    cuda_device_order: Option<&str>,
) -> Option<String> {
    let mixed = gpus.windows(2).any(|w| w[0].name != w[1].name);
    (mixed && cuda_device_order != Some("PCI_BUS_ID")).then(|| {
        "GPUs of different models: CUDA numbers them fastest first, this list is in PCI bus order; \
         set CUDA_DEVICE_ORDER=PCI_BUS_ID to make the two agree"
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::super::types::GpuVendor;
    use super::*;

    fn uuids() -> Vec<Option<String>> {
        vec![
            Some("GPU-8932f937-d72c-4106-c12f-20bd9faed9f6".into()),
            Some("GPU-89aa0000-0000-0000-0000-000000000000".into()),
            None,
            Some("GPU-12345678-0000-0000-0000-000000000000".into()),
        ]
    }

    fn vis(spec: &str) -> (Vec<usize>, Option<String>) {
        let v = visible_devices(spec, &uuids());
        (v.indices, v.stopped_at)
    }

    #[test]
    fn cuda_visible_devices_table() {
        assert_eq!(vis("0,1,2,3"), (vec![0, 1, 2, 3], None));
        assert_eq!(vis("3,1"), (vec![3, 1], None));
        assert_eq!(vis(" 2 , 0 "), (vec![2, 0], None));
        assert_eq!(vis(""), (vec![], None));
        assert_eq!(vis("-1"), (vec![], None));
        assert_eq!(vis("1,-1,0"), (vec![1], None));
        assert_eq!(vis("0,7,1"), (vec![0], Some("7".into())));
        assert_eq!(vis("1,1"), (vec![1], Some("1".into())));
        assert_eq!(vis("abc,0"), (vec![], Some("abc".into())));
        assert_eq!(vis("GPU-8932f937"), (vec![0], None));
        assert_eq!(vis("GPU-1234,0"), (vec![3, 0], None));
        // Two UUIDs start with GPU-89: ambiguous, so CUDA stops there.
        assert_eq!(vis("2,GPU-89"), (vec![2], Some("GPU-89".into())));
        assert_eq!(
            vis("MIG-GPU-8932f937/1/0"),
            (vec![], Some("MIG-GPU-8932f937/1/0".into()))
        );
    }

    fn gpu(index: u32, name: &str, uuid: &str) -> GpuInfo {
        GpuInfo {
            index,
            name: name.into(),
            vendor: GpuVendor::Nvidia,
            total_bytes: 24 << 30,
            free_bytes: 23 << 30,
            bandwidth_bytes_per_s: Some(1e12),
            bandwidth_source: crate::hw::BandwidthSource::Reported,
            fp16_flops_per_s: None,
            uuid: Some(uuid.into()),
            budget_bytes: None,
            llama: None,
        }
    }

    #[test]
    fn visibility_renumbers_and_notes_early_stop() {
        let all = vec![
            gpu(0, "A", "GPU-aaa"),
            gpu(1, "B", "GPU-bbb"),
            gpu(2, "C", "GPU-ccc"),
        ];
        let mut notes = Vec::new();
        let seen = apply_visibility(all.clone(), Some("2,GPU-aaa,9"), &mut notes);
        let names: Vec<(u32, &str)> = seen.iter().map(|g| (g.index, g.name.as_str())).collect();
        assert_eq!(names, vec![(0, "C"), (1, "A")]);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("\"9\""), "{notes:?}");

        let mut notes = Vec::new();
        assert_eq!(apply_visibility(all.clone(), None, &mut notes), all);
        assert!(apply_visibility(all, Some(""), &mut notes).is_empty());
        assert!(notes.is_empty());
    }

    #[test]
    fn bandwidth_matches_datasheets() {
        let a100 = bandwidth_bytes_per_s(5120, 1593);
        assert!((a100 - 2.039e12).abs() < 0.01e12, "{a100}");
        let rtx4090 = bandwidth_bytes_per_s(384, 10501);
        assert!((rtx4090 - 1.008e12).abs() < 0.01e12, "{rtx4090}");
    }

    #[cfg(feature = "nvidia")]
    #[test]
    fn nvml_is_initialised_once_and_a_failure_is_kept() {
        // The same handle, or the very same failure text (not a new one
        // from a second attempt), whether or not this machine has NVML.
        match (nvml(), nvml()) {
            (Ok(a), Ok(b)) => assert!(std::ptr::eq(a, b)),
            (Err(a), Err(b)) => assert!(std::ptr::eq(a, b), "{a}"),
            (a, b) => panic!("NVML changed its mind: {a:?} then {b:?}"),
        }
    }

    #[test]
    fn order_note_only_for_mixed_models_without_bus_order() {
        let same = [gpu(0, "A", "u0"), gpu(1, "A", "u1")];
        let mixed = [gpu(0, "A", "u0"), gpu(1, "B", "u1")];
        assert_eq!(heterogeneous_order_note(&same, None), None);
        assert!(heterogeneous_order_note(&mixed, None).is_some());
        assert_eq!(heterogeneous_order_note(&mixed, Some("PCI_BUS_ID")), None);
    }
}
