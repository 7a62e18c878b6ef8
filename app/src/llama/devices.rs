//! This build's GPU devices as llama.cpp's backend registry lists them
//! (`ggml_backend_dev_*`): the devices a load in this process will use, with
//! the memory each backend reports.
//!
//! Reading the registry initialises every backend of the build. For Vulkan
//! that loads the Vulkan loader and every installed driver (Mesa's lavapipe
//! brings LLVM), which costs resident memory whether or not a device is
//! used: [`runtime_bytes`] and [`runtime_virtual_bytes`] measure it here,
//! so plans count it.
//!
//! ggml's Vulkan backend never picks a CPU-type device (lavapipe) by itself;
//! `GGML_VK_VISIBLE_DEVICES` must name it. [`none_reason`] says so when the
//! registry has no GPU.

use std::ffi::c_void;
use std::sync::OnceLock;

use headroom_planner::hw::{LlamaDevice, RegistryDevice, is_software_device};
use llama_cpp_2::{LlamaBackendDeviceType, list_llama_ggml_backend_devices};
use llama_cpp_sys_2 as sys;

/// What reading the registry found, once per process.
struct Registry {
    devices: Vec<RegistryDevice>,
    /// Resident bytes the process gained while the backends initialised.
    runtime_bytes: u64,
    /// Address space it gained (libraries and driver mappings).
    runtime_virtual_bytes: u64,
}

static REGISTRY: OnceLock<Registry> = OnceLock::new();

/// The start cost is kept in multiples of this, so that processes whose
/// measurements differ by noise (a few hundred KiB) plan alike.
const ROUND: u64 = 4 << 20;

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to).saturating_mul(to)
}

/// The start cost this machine's first measurement found, kept in
/// `runtime-cost-v1.json` in headroom's cache (like the RAM bandwidth), so
/// that every process plans with the same figure; written from `measured`
/// when there is none yet (or it cannot be read). `None` when there is
/// neither.
fn cached(measured: Option<(u64, u64)>) -> Option<(u64, u64)> {
    let path = crate::files::cache_dir()
        .ok()
        .map(|d| d.join("runtime-cost-v1.json"));
    let key = format!(
        "{} vulkan={}",
        super::llama_cpp_version(),
        cfg!(feature = "vulkan")
    );
    let read = path
        .as_deref()
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .filter(|v| v["build"] == key.as_str())
        .and_then(|v| Some((v["rss_bytes"].as_u64()?, v["virtual_bytes"].as_u64()?)));
    if read.is_some() {
        return read;
    }
    let (rss, virt) = measured?;
    if let Some(p) = path {
        if let Some(dir) = p.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let v = serde_json::json!({ "build": key, "rss_bytes": rss, "virtual_bytes": virt });
        // A cache that cannot be written only costs a measurement next time.
        let _ = crate::files::write(&p, v.to_string().as_bytes());
    }
    Some((rss, virt))
}

/// Resident memory the started backends touch after the registry read,
/// during a load: an estimate. On the 2-core test machine, with lavapipe
/// installed and no Vulkan device used, the read measures 58 MiB, issue
/// #21 measured 63 MB more RSS after a CPU-only load, and a plan counting
/// the read alone fell 0.5 MiB short of a measured peak (run test
/// `memory::`).
const LATER_PAGES: u64 = 4 << 20;

fn read() -> &'static Registry {
    REGISTRY.get_or_init(|| {
        // Only a first start can be measured; a process that started the
        // backends before takes the cached figures.
        let fresh = !super::backend::started();
        let before = (status_kib("VmRSS:"), status_kib("VmSize:"));
        super::backend::shared();
        let listed = list_llama_ggml_backend_devices();
        let after = (status_kib("VmRSS:"), status_kib("VmSize:"));
        let devices = listed
            .iter()
            .filter(|d| {
                matches!(
                    d.device_type,
                    LlamaBackendDeviceType::Gpu | LlamaBackendDeviceType::IntegratedGpu
                ) && d.backend != "RPC"
            })
            .map(|d| RegistryDevice {
                device: LlamaDevice {
                    backend: d.backend.clone(),
                    name: d.name.clone(),
                    description: d.description.clone(),
                    host_memory: d.device_type == LlamaBackendDeviceType::IntegratedGpu
                        || is_software_device(&d.description),
                    max_tensor_bytes: max_tensor_bytes(d.index, d.memory_total as u64),
                    speed: None,
                },
                total_bytes: d.memory_total as u64,
                free_bytes: d.memory_free as u64,
            })
            .collect();
        let measured = fresh.then(|| {
            let rss = after.0.saturating_sub(before.0) * 1024;
            let virt = after.1.saturating_sub(before.1) * 1024;
            (round_up(rss + LATER_PAGES, ROUND), round_up(virt, ROUND))
        });
        let (runtime_bytes, runtime_virtual_bytes) = cached(measured).unwrap_or((0, 0));
        Registry {
            devices,
            runtime_bytes,
            runtime_virtual_bytes,
        }
    })
}

/// The GPU-type devices of this build's registry (not the CPU, not RPC
/// workers), in llama.cpp's order.
#[must_use]
pub fn registry() -> Vec<RegistryDevice> {
    read().devices.clone()
}

/// Resident bytes llama.cpp's backends take when they start: measured
/// from `/proc/self/status` around the first registry read of a process
/// that had not started them, plus [`LATER_PAGES`], rounded up to 4 MiB,
/// and cached for the machine (0 when never measured).
#[must_use]
pub fn runtime_bytes() -> u64 {
    read().runtime_bytes
}

/// Address space this process gained when llama.cpp's backends were
/// initialised (`VmSize`, measured as [`runtime_bytes`] is): what process
/// limits (`RLIMIT_AS`) see of them.
#[must_use]
pub fn runtime_virtual_bytes() -> u64 {
    read().runtime_virtual_bytes
}

/// The start cost this machine's cache holds for this build, without
/// starting the backends: for plans whose GPUs are replaced (`--vram`),
/// which need no registry. `None` when nothing is cached yet.
#[must_use]
pub fn cached_runtime() -> Option<(u64, u64)> {
    if let Some(r) = REGISTRY.get() {
        return Some((r.runtime_bytes, r.runtime_virtual_bytes));
    }
    cached(None)
}

/// Why this build lists no GPU, in one line, when it lists none.
#[must_use]
pub fn none_reason() -> Option<String> {
    if !super::gpu_build() {
        return Some("this build has no GPU backend (built without the vulkan feature)".into());
    }
    if !read().devices.is_empty() {
        return None;
    }
    Some(if cfg!(feature = "vulkan") {
        "Vulkan found no GPU (a CPU-type Vulkan device such as Mesa's lavapipe is used only when \
         GGML_VK_VISIBLE_DEVICES names it)"
            .into()
    } else {
        "this build's GPU backend found no device".into()
    })
}

/// A `kB` field of `/proc/self/status` (`VmRSS:`, `VmSize:`), 0 when
/// unreadable.
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .unwrap_or(0)
}

/// The largest tensor device `index` accepts, asked of the device itself:
/// its `supports_op` for an F32 addition whose operands are that size (the
/// size test comes before the op's own checks, and is the one llama.cpp's
/// weight placement meets). `None` when a tensor as large as the device's
/// memory (or 4 GiB) is accepted: no limit that matters.
fn max_tensor_bytes(index: usize, memory: u64) -> Option<u64> {
    let top = memory.clamp(1 << 20, 4 << 30) & !3;
    let accepts = |bytes: u64| -> bool {
        // SAFETY: a no_alloc context holds tensor metadata only, in a buffer
        // ggml allocates and frees; the device handle comes from the registry
        // and lives as long as the process.
        unsafe {
            let params = sys::ggml_init_params {
                mem_size: 8 * sys::ggml_tensor_overhead(),
                mem_buffer: std::ptr::null_mut::<c_void>(),
                no_alloc: true,
            };
            let ctx = sys::ggml_init(params);
            if ctx.is_null() {
                return true;
            }
            let ne = i64::try_from(bytes / 4).unwrap_or(i64::MAX);
            let a = sys::ggml_new_tensor_1d(ctx, sys::GGML_TYPE_F32, ne);
            let op = sys::ggml_add(ctx, a, a);
            let dev = sys::ggml_backend_dev_get(index);
            let ok = op.is_null() || sys::ggml_backend_dev_supports_op(dev, op);
            sys::ggml_free(ctx);
            ok
        }
    };
    if accepts(top) {
        return None;
    }
    // The largest accepted size, to 4 bytes (at most 32 probes).
    let (mut lo, mut hi) = (4u64, top);
    if !accepts(lo) {
        return Some(0);
    }
    while hi - lo > 4 {
        let mid = (lo + (hi - lo) / 2) & !3;
        if accepts(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}
