//! Per-process memory rlimits (`ulimit -v`, `ulimit -d`): allocations past
//! them fail no matter how much RAM is free, which on batch clusters is a
//! common reason a model that "fits" does not load.

/// The two limits that bound how much memory this process can map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryRlimits {
    /// `RLIMIT_AS` soft limit in bytes; `None` = unlimited.
    pub address_space: Option<u64>,
    /// `RLIMIT_DATA` soft limit in bytes; `None` = unlimited.
    pub data: Option<u64>,
}

/// Converts a raw soft limit to bytes, `RLIM_INFINITY` (or anything that
/// does not fit in `u64`) → `None`.
pub fn limit_from_raw(raw: u128, infinity: u128) -> Option<u64> {
    if raw == infinity {
        None
    } else {
        u64::try_from(raw).ok()
    }
}

/// Reads the soft limits of this process (the soft limit is what the kernel
/// enforces). On platforms without `getrlimit`, or if the call fails, both
/// are `None`: the rlimit then simply does not constrain the budget.
pub fn read() -> MemoryRlimits {
    #[cfg(unix)]
    {
        MemoryRlimits {
            // SAFETY: getrlimit only writes the struct it is given.
            address_space: soft_limit(|lim| unsafe { libc::getrlimit(libc::RLIMIT_AS, lim) }),
            // SAFETY: as above.
            data: soft_limit(|lim| unsafe { libc::getrlimit(libc::RLIMIT_DATA, lim) }),
        }
    }
    #[cfg(not(unix))]
    {
        MemoryRlimits::default()
    }
}

/// Runs one `getrlimit` call (passed as a closure because the resource
/// parameter's type differs between libc targets) and converts its soft
/// limit.
#[cfg(unix)]
fn soft_limit(getrlimit: impl FnOnce(&mut libc::rlimit) -> libc::c_int) -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    if getrlimit(&mut lim) != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is u64 on Linux but not everywhere
    limit_from_raw(lim.rlim_cur as u128, libc::RLIM_INFINITY as u128)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infinity_means_unlimited() {
        assert_eq!(limit_from_raw(u64::MAX as u128, u64::MAX as u128), None);
        assert_eq!(limit_from_raw(8 << 30, u64::MAX as u128), Some(8 << 30));
        assert_eq!(limit_from_raw(u128::MAX - 1, u128::MAX), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reading_matches_proc_self_limits() {
        // /proc/self/limits is the kernel's own rendering of the same limits.
        let text = std::fs::read_to_string("/proc/self/limits").expect("procfs");
        let field = |name: &str| -> Option<u64> {
            let line = text.lines().find(|l| l.starts_with(name)).expect("listed");
            let soft = line[name.len()..]
                .split_whitespace()
                .next()
                .expect("soft column");
            soft.parse().ok() // "unlimited" → None
        };
        let got = read();
        assert_eq!(got.address_space, field("Max address space"));
        assert_eq!(got.data, field("Max data size"));
    }
}
