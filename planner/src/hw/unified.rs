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

use super::types::{GpuInfo, GpuVendor, UnifiedMemory};

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

/// Peak memory bandwidth of an Apple chip from its marketing name, in
/// bytes/s. Where a chip shipped in several memory configurations (M3 Max,
/// M4 Max) the lower figure is used, so speed estimates err slow.
pub fn apple_bandwidth(model: &str) -> Option<f64> {
    // Longest names first so "M1 Pro" is not matched as "M1".
    const TABLE: [(&str, f64); 17] = [
        ("M1 Ultra", 800e9),
        ("M2 Ultra", 800e9),
        ("M3 Ultra", 819e9),
        ("M1 Max", 400e9),
        ("M2 Max", 400e9),
        ("M3 Max", 300e9),
        ("M4 Max", 410e9),
        ("M1 Pro", 200e9),
        ("M2 Pro", 200e9),
        ("M3 Pro", 150e9),
        ("M4 Pro", 273e9),
        ("M5 Pro", 307e9),
        ("M1", 68.25e9),
        ("M2", 100e9),
        ("M3", 100e9),
        ("M4", 120e9),
        ("M5", 153e9),
    ];
    TABLE
        .iter()
        .find(|(name, _)| model.contains(name))
        .map(|(_, bw)| *bw)
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
    apple_gpu(cpu_model, limit, source)
}

/// Builds the GPU entry for an Apple chip with this limit. Free equals total
/// because Metal's free figure only subtracts this process's own
/// allocations; the RAM budget is what accounts for everything else.
pub fn apple_gpu(cpu_model: &str, limit: u64, source: String) -> (GpuInfo, UnifiedMemory) {
    let gpu = GpuInfo {
        index: 0,
        name: cpu_model.to_string(),
        vendor: GpuVendor::Apple,
        total_bytes: limit,
        free_bytes: limit,
        bandwidth_bytes_per_s: apple_bandwidth(cpu_model),
        uuid: None,
    };
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
    fn bandwidth_table_prefers_the_longest_name() {
        assert_eq!(apple_bandwidth("Apple M1 Pro"), Some(200e9));
        assert_eq!(apple_bandwidth("Apple M1"), Some(68.25e9));
        assert_eq!(apple_bandwidth("Apple M2 Ultra"), Some(800e9));
        assert_eq!(apple_bandwidth("Intel(R) Core(TM) i9"), None);
    }

    #[test]
    fn apple_gpu_is_unified_with_free_equal_total() {
        let (gpu, unified) = apple_gpu("Apple M3 Max", 48 * GIB, "test".into());
        assert_eq!(gpu.vendor, GpuVendor::Apple);
        assert_eq!((gpu.total_bytes, gpu.free_bytes), (48 * GIB, 48 * GIB));
        assert_eq!(unified.gpu_limit_bytes, 48 * GIB);
        assert_eq!(gpu.bandwidth_bytes_per_s, Some(300e9));
    }
}
