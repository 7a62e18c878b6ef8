//! What the process really uses: the peak resident set (the kernel's
//! high-water mark, which catches short bursts), the resident set now, and
//! GPU memory in use.

/// Peak resident set size of this process so far, in bytes: Linux's
/// `VmHWM` (`/proc/self/status`), else `getrusage`'s `ru_maxrss`.
///
/// Not `ru_maxrss` on Linux: at `exec` the kernel folds the high-water mark
/// of the image being replaced into it, and a child started by
/// `posix_spawn` (vfork) replaces its parent's address space, so a
/// `headroom` started by a 900 MiB process (an editor, a Python agent, a
/// test harness) reported a peak of 914 MiB for a run whose own peak was
/// 370 MiB. `VmHWM` is this address space's own.
#[must_use]
pub fn peak_rss_bytes() -> u64 {
    if let Some(hwm) = proc_status_kib("VmHWM") {
        return hwm * 1024;
    }
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

/// A `kB` field of `/proc/self/status` (`VmHWM:     12345 kB`).
fn proc_status_kib(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
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

/// Set this process's `oom_score_adj` (-1000…1000): how willing the kernel's
/// OOM killer is to pick it. Lowering it needs `CAP_SYS_RESOURCE`.
///
/// # Errors
/// The kernel refused (with what to do about it), or no `/proc`.
pub fn set_oom_score_adj(n: i32) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let path = "/proc/self/oom_score_adj";
    let current: i32 = std::fs::read_to_string(path)
        .with_context(|| format!("--oom-score-adj: reading {path}"))?
        .trim()
        .parse()
        .unwrap_or(0);
    match std::fs::write(path, n.to_string()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => anyhow::bail!(
            "--oom-score-adj {n}: the kernel refused to lower it from {current} (needs root or CAP_SYS_RESOURCE); raising it needs no privileges"
        ),
        Err(e) => Err(e).with_context(|| format!("--oom-score-adj {n}: writing {path}")),
    }
}

/// This process's `oom_score_adj`, when readable.
#[must_use]
pub fn oom_score_adj() -> Option<i32> {
    std::fs::read_to_string("/proc/self/oom_score_adj")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Memory in use on each GPU (by every process: NVML reports per device), in
/// llama.cpp's device order; empty without a GPU. Cheap enough for the
/// chat's once-a-second monitor: the probe reuses the process's one NVML
/// handle (or its one cached failure) instead of initialising NVML each time.
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
    fn raising_the_oom_score_needs_no_privileges() {
        let before = oom_score_adj().expect("readable");
        let target = (before + 1).min(1000);
        set_oom_score_adj(target).expect("raising is always allowed");
        assert_eq!(oom_score_adj(), Some(target));
    }

    #[test]
    fn touching_memory_raises_the_peak() {
        // Other tests in this process may have peaked higher than what is
        // resident now: touch enough to go past the old peak.
        let before = peak_rss_bytes();
        let size = before.saturating_sub(rss_bytes()) as usize + (64 << 20);
        let block = vec![1u8; size];
        std::hint::black_box(&block);
        let after = peak_rss_bytes();
        assert!(after >= before + (32 << 20), "{before} -> {after}");
    }
}
