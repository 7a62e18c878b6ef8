//! What the process really uses: the peak resident set (`getrusage`'s
//! `ru_maxrss`, the kernel's high-water mark, which catches short bursts),
//! the resident set now, and GPU memory in use.

/// Peak resident set size of this process so far, in bytes.
#[must_use]
pub fn peak_rss_bytes() -> u64 {
    // SAFETY: getrusage only writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &raw mut ru) };
    if rc != 0 {
        return 0;
    }
    // Linux reports kilobytes (macOS bytes).
    let scale = if cfg!(target_os = "macos") { 1 } else { 1024 };
    u64::try_from(ru.ru_maxrss).unwrap_or(0) * scale
}

/// Resident set size of this process now, in bytes (0 where unknown).
#[must_use]
pub fn rss_bytes() -> u64 {
    let Ok(statm) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}

/// Memory in use on each GPU (by every process: NVML reports per device), in
/// llama.cpp's device order; empty without a GPU.
#[must_use]
pub fn vram_used_bytes() -> Vec<u64> {
    let mut notes = Vec::new();
    headroom_planner::hw::nvidia::probe(&mut notes)
        .iter()
        .map(|g| g.total_bytes.saturating_sub(g.free_bytes))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_is_at_least_the_current_resident_set() {
        let now = rss_bytes();
        let peak = peak_rss_bytes();
        assert!(now > 0, "statm readable on Linux");
        assert!(peak >= now, "peak {peak} < now {now}");
    }

    #[test]
    fn touching_memory_raises_the_peak() {
        let before = peak_rss_bytes();
        let block = vec![1u8; 64 << 20];
        std::hint::black_box(&block);
        let after = peak_rss_bytes();
        assert!(after >= before + (32 << 20), "{before} -> {after}");
    }
}
