//! Apple Silicon: the GPU shares RAM with the CPU, and macOS caps how much of
//! it the GPU may wire down. llama.cpp's Metal backend reports that cap
//! (`recommendedMaxWorkingSetSize`) as the GPU's total memory, so it is what
//! a plan has to fit.
//!
//! The cap is `sysctl iogpu.wired_limit_mb` when a user raised it (macOS 14+;
//! `debug.iogpu.wired_limit`, in bytes, before that); otherwise macOS's
//! default share, which we approximate as 2/3 of RAM up to 36 GiB and 3/4
//! above (the commonly observed `recommendedMaxWorkingSetSize`; Apple does
//! not document the rule).

use super::types::{BandwidthSource, GpuInfo, GpuVendor, UnifiedMemory};

const GIB: u64 = 1 << 30;

/// macOS's default GPU share of `ram_total` (see module docs: an
/// approximation).
pub fn apple_default_gpu_limit(ram_total: u64) -> u64 {
    let (num, den) = if ram_total <= 36 * GIB {
        (2, 3)
    } else {
        (3, 4)
    };
    let limit = u128::from(ram_total) * num / den;
    u64::try_from(limit).unwrap_or(u64::MAX)
}

/// The GPU limit of an AMD APU by default on Linux: the GTT size, which the
/// kernel sets to half of RAM unless `amdgpu.gttsize` (or `ttm.pages_limit`)
/// raises it. Used for a named Strix Halo (`--gpu "Ryzen AI Max+ 395"`);
/// a probed APU reports its own GTT size.
pub fn amd_default_gpu_limit(ram_total: u64) -> u64 {
    ram_total / 2
}

/// The GPU limit from the sysctl values (`wired_limit_mb` from
/// `iogpu.wired_limit_mb`, `wired_limit_bytes` from the pre-14
/// `debug.iogpu.wired_limit`), falling back to the default share; 0 means
/// "not set" for both. Returns the limit and where it came from.
pub fn apple_gpu_limit(
    ram_total: u64,
    wired_limit_mb: Option<u64>,
    wired_limit_bytes: Option<u64>,
) -> (u64, String) {
    if let Some(mb) = wired_limit_mb.filter(|&mb| mb > 0) {
        return (
            mb.saturating_mul(1 << 20),
            "sysctl iogpu.wired_limit_mb".to_string(),
        );
    }
    if let Some(bytes) = wired_limit_bytes.filter(|&b| b > 0) {
        return (bytes, "sysctl debug.iogpu.wired_limit".to_string());
    }
    let share = if ram_total <= 36 * GIB { "2/3" } else { "3/4" };
    (
        apple_default_gpu_limit(ram_total),
        format!("macOS default GPU share ({share} of RAM, approximate)"),
    )
}

/// The Apple GPU and its unified-memory limit. `cpu_model` is the chip's
/// brand string ("Apple M2 Pro"), which is also the GPU's name.
#[cfg(all(target_os = "macos", target_arch = "aarch64"))]
pub fn probe_apple(ram_total: u64, cpu_model: &str) -> (GpuInfo, UnifiedMemory) {
    let (limit, source) = apple_gpu_limit(
        ram_total,
        sysctl_u64(c"iogpu.wired_limit_mb"),
        sysctl_u64(c"debug.iogpu.wired_limit"),
    );
    apple_gpu(cpu_model, ram_total, limit, source)
}

/// Builds the GPU entry for an Apple chip with this limit, its bandwidth
/// from the GPU table (the chip's configuration with `ram_total` of memory:
/// an M3 Max with 36 GB has 300 GB/s, with 48 GB 400). Free equals total
/// because Metal's free figure only subtracts this process's own
/// allocations; the RAM budget is what accounts for everything else.
pub fn apple_gpu(
    cpu_model: &str,
    ram_total: u64,
    limit: u64,
    source: String,
) -> (GpuInfo, UnifiedMemory) {
    let mut gpu = GpuInfo {
        index: 0,
        name: cpu_model.to_string(),
        vendor: GpuVendor::Apple,
        total_bytes: limit,
        free_bytes: limit,
        bandwidth_bytes_per_s: None,
        bandwidth_source: BandwidthSource::Assumed,
        fp16_flops_per_s: None,
        uuid: None,
        budget_bytes: None,
        llama: None,
    };
    gpu.fill_from_table(ram_total);
    (
        gpu,
        UnifiedMemory {
            gpu_limit_bytes: limit,
            source,
        },
    )
}

/// An integer sysctl (4 or 8 bytes wide), `None` when absent.
#[cfg(all(target_os = "macos", target_arch = "aarch64"))]
fn sysctl_u64(name: &std::ffi::CStr) -> Option<u64> {
    let mut buf = [0u8; 8];
    let mut len: libc::size_t = buf.len();
    // SAFETY: `buf` is writable for `len` bytes and the kernel writes at most
    // `len` bytes, updating `len` to the size written; no new value is set.
    let rc = unsafe {
        libc::sysctlbyname(
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return None;
    }
    match len {
        4 => Some(u64::from(u32::from_ne_bytes([
            buf[0], buf[1], buf[2], buf[3],
        ]))),
        8 => Some(u64::from_ne_bytes(buf)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_share_switches_above_36_gib() {
        assert_eq!(apple_default_gpu_limit(24 * GIB), 16 * GIB);
        assert_eq!(apple_default_gpu_limit(36 * GIB), 24 * GIB);
        assert_eq!(apple_default_gpu_limit(64 * GIB), 48 * GIB);
        assert_eq!(apple_default_gpu_limit(192 * GIB), 144 * GIB);
    }

    #[test]
    fn sysctl_overrides_default() {
        let (limit, source) = apple_gpu_limit(64 * GIB, Some(57344), None);
        assert_eq!(limit, 56 * GIB);
        assert!(source.contains("wired_limit_mb"));
        let (limit, _) = apple_gpu_limit(64 * GIB, Some(0), Some(40 * GIB));
        assert_eq!(limit, 40 * GIB);
        let (limit, source) = apple_gpu_limit(32 * GIB, Some(0), None);
        assert_eq!(limit, apple_default_gpu_limit(32 * GIB));
        assert!(source.contains("2/3"));
    }

    #[test]
    fn chip_names_find_their_own_bandwidth() {
        let bw = |chip: &str, ram: u64| apple_gpu(chip, ram, ram / 2, "test".into()).0;
        assert_eq!(
            bw("Apple M1 Pro", 16 * GIB).bandwidth_bytes_per_s,
            Some(200e9)
        );
        assert_eq!(bw("Apple M1", 8 * GIB).bandwidth_bytes_per_s, Some(68.25e9));
        assert_eq!(
            bw("Apple M2 Ultra", 192 * GIB).bandwidth_bytes_per_s,
            Some(800e9)
        );
        let unknown = bw("Intel(R) Core(TM) i9", 16 * GIB);
        assert_eq!(unknown.bandwidth_bytes_per_s, None);
        assert_eq!(unknown.bandwidth_source, BandwidthSource::Assumed);
        assert_eq!(
            bw("Apple M1 Pro", 16 * GIB).bandwidth_source,
            BandwidthSource::LookedUp
        );
    }

    #[test]
    fn apple_gpu_is_unified_with_free_equal_total() {
        let (gpu, unified) = apple_gpu("Apple M3 Max", 36 * GIB, 24 * GIB, "test".into());
        assert_eq!(gpu.vendor, GpuVendor::Apple);
        assert_eq!((gpu.total_bytes, gpu.free_bytes), (24 * GIB, 24 * GIB));
        assert_eq!(unified.gpu_limit_bytes, 24 * GIB);
        // The 36 GB M3 Max is the 30-core one, at 300 GB/s; 64 GB: 400 GB/s.
        assert_eq!(gpu.bandwidth_bytes_per_s, Some(300e9));
        let (big, _) = apple_gpu("Apple M3 Max", 64 * GIB, 48 * GIB, "test".into());
        assert_eq!(big.bandwidth_bytes_per_s, Some(400e9));
    }
}
