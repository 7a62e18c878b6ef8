//! Memory cgroup limits: inside a container the host's free RAM is a lie, and
//! the cgroup limit is what gets a process OOM-killed.
//!
//! The parsers are pure functions over file text, and the reader works on a
//! [`CgroupFs`] whose root can be a prepared fixture directory, so both cgroup
//! versions are tested without a container.
//!
//! Which hierarchy: `/proc/self/cgroup` lists `N:controllers:/path` lines for
//! v1 and one `0::/path` line for v2. On "hybrid" systems both appear, and the
//! memory controller is then the v1 one, so a v1 `memory` line wins.

use std::path::{Path, PathBuf};

use super::types::CgroupMemory;

/// v1 reports "no limit" as a huge page-aligned number (typically
/// 9223372036854771712); anything at or above 2^60 (1 EiB) is treated as
/// unlimited.
const V1_UNLIMITED_AT: u64 = 1 << 60;

/// Where to read cgroup files from: the real system or a fixture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupFs {
    /// The cgroup mount point, normally `/sys/fs/cgroup`; v1 controllers are
    /// below it (`<root>/memory/...`).
    pub root: PathBuf,
    /// The text of `/proc/self/cgroup`.
    pub proc_self_cgroup: String,
}

/// Reading the cgroup went wrong in a way worth telling the user.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// A cgroup file exists but could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A cgroup file does not hold what the kernel documents.
    #[error("unexpected content in {}: {content:?}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Its (trimmed) content.
        content: String,
    },
}

/// This process's place in the memory cgroup hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupPath {
    /// v1 memory controller, path below its mount.
    V1(String),
    /// v2 unified hierarchy, path below its mount.
    V2(String),
}

impl CgroupFs {
    /// The live system: `/sys/fs/cgroup` and this process's
    /// `/proc/self/cgroup`. `None` when there is no `/proc/self/cgroup` (not
    /// Linux, or /proc not mounted).
    pub fn system() -> Option<Self> {
        let proc_self_cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        Some(Self {
            root: PathBuf::from("/sys/fs/cgroup"),
            proc_self_cgroup,
        })
    }

    /// The memory cgroup this process is charged to, and its limit: the
    /// ancestor with the least headroom when several have limits, because the
    /// tightest one is what the kernel enforces first. `Ok(None)` when the
    /// process is in no memory cgroup we can see.
    ///
    /// # Errors
    /// A cgroup file that exists but cannot be read or parsed.
    pub fn read_memory(&self) -> Result<Option<CgroupMemory>, CgroupError> {
        match parse_proc_self_cgroup(&self.proc_self_cgroup) {
            None => Ok(None),
            Some(CgroupPath::V1(path)) => read_hierarchy(&self.root.join("memory"), &path, 1),
            Some(CgroupPath::V2(path)) => read_hierarchy(&self.root, &path, 2),
        }
    }
}

/// Finds the memory cgroup in `/proc/self/cgroup` text (see module docs for
/// the hybrid rule).
pub fn parse_proc_self_cgroup(text: &str) -> Option<CgroupPath> {
    let mut v2 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some(CgroupPath::V2(path.to_string()));
        } else if controllers.split(',').any(|c| c == "memory") {
            return Some(CgroupPath::V1(path.to_string()));
        }
    }
    v2
}

/// Parses v2 `memory.max`: a byte count or `max` (no limit → `None`).
pub fn parse_v2_max(text: &str) -> Option<Option<u64>> {
    match text.trim() {
        "max" => Some(None),
        n => n.parse().ok().map(Some),
    }
}

/// Parses v1 `memory.limit_in_bytes`; values ≥ 2^60 mean unlimited (`None`).
pub fn parse_v1_limit(text: &str) -> Option<Option<u64>> {
    let n: u64 = text.trim().parse().ok()?;
    Some((n < V1_UNLIMITED_AT).then_some(n))
}

/// The value of `key` in a `memory.stat` file (`key value` per line).
pub fn parse_memory_stat(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        if k == key {
            v.trim().parse().ok()
        } else {
            None
        }
    })
}

/// One cgroup directory's limit and usage; `None` when it has no usage file
/// (the root cgroup, or a directory we cannot see).
fn read_dir(dir: &Path, version: u8) -> Result<Option<CgroupMemory>, CgroupError> {
    let (max_file, usage_file) = match version {
        1 => ("memory.limit_in_bytes", "memory.usage_in_bytes"),
        _ => ("memory.max", "memory.current"),
    };
    let Some(usage_text) = read_optional(&dir.join(usage_file))? else {
        return Ok(None);
    };
    let usage_bytes = usage_text
        .trim()
        .parse()
        .map_err(|_| malformed(&dir.join(usage_file), &usage_text))?;
    let mut limit_bytes = match read_optional(&dir.join(max_file))? {
        None => None,
        Some(text) => {
            let parsed = if version == 1 {
                parse_v1_limit(&text)
            } else {
                parse_v2_max(&text)
            };
            parsed.ok_or_else(|| malformed(&dir.join(max_file), &text))?
        }
    };
    let stat = read_optional(&dir.join("memory.stat"))?.unwrap_or_default();
    let reclaimable_bytes = if version == 1 {
        // v1 has per-cgroup and hierarchical ("total_") counters; usage is
        // hierarchical, so the cache must be too.
        parse_memory_stat(&stat, "total_inactive_file")
            .or_else(|| parse_memory_stat(&stat, "inactive_file"))
    } else {
        parse_memory_stat(&stat, "inactive_file")
    }
    .unwrap_or(0);
    if version == 1 {
        // Covers ancestors that are not visible from inside the container.
        if let Some(Some(h)) = parse_memory_stat(&stat, "hierarchical_memory_limit")
            .map(|n| (n < V1_UNLIMITED_AT).then_some(n))
        {
            limit_bytes = Some(limit_bytes.map_or(h, |l| l.min(h)));
        }
    }
    Ok(Some(CgroupMemory {
        version,
        path: String::new(),
        limit_bytes,
        usage_bytes,
        reclaimable_bytes,
    }))
}

/// Walks from the process's cgroup up to the mount root and keeps the one
/// with the least headroom (or the leaf when none has a limit).
///
/// Without a cgroup namespace a container may show the host's path
/// (`/docker/<id>`) while its mount holds only its own cgroup at the root;
/// when the path does not exist below the mount, the mount root is used.
fn read_hierarchy(
    mount: &Path,
    path: &str,
    version: u8,
) -> Result<Option<CgroupMemory>, CgroupError> {
    let components: Vec<&str> = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != "..")
        .collect();
    let leaf_exists = mount.join(components.join("/")).is_dir();
    let depth = if leaf_exists { components.len() } else { 0 };

    let mut leaf: Option<CgroupMemory> = None;
    let mut binding: Option<(u64, CgroupMemory)> = None;
    for d in (0..=depth).rev() {
        let rel = components[..d].join("/");
        let Some(mut mem) = read_dir(&mount.join(&rel), version)? else {
            continue;
        };
        mem.path = format!("/{rel}");
        if let Some(headroom) = mem.headroom_bytes()
            && binding.as_ref().is_none_or(|(best, _)| headroom < *best)
        {
            binding = Some((headroom, mem.clone()));
        }
        if leaf.is_none() {
            leaf = Some(mem);
        }
    }
    Ok(binding.map(|(_, m)| m).or(leaf))
}

/// File content, `None` when the file does not exist.
fn read_optional(path: &Path) -> Result<Option<String>, CgroupError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CgroupError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn malformed(path: &Path, content: &str) -> CgroupError {
    CgroupError::Malformed {
        path: path.to_path_buf(),
        content: content.trim().chars().take(80).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn fixture(name: &str) -> CgroupFs {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/hw/cgroup")
            .join(name);
        let proc_self_cgroup =
            std::fs::read_to_string(dir.join("proc-self-cgroup")).expect("fixture present");
        CgroupFs {
            root: dir.join("sys-fs-cgroup"),
            proc_self_cgroup,
        }
    }

    /// The memory controller the fixture `name` describes, which must be
    /// readable and present (`what`: why it must be present).
    fn memory(name: &str, what: &str) -> CgroupMemory {
        fixture(name).read_memory().expect("readable").expect(what)
    }

    #[test]
    fn proc_self_cgroup_prefers_v1_memory_on_hybrid_systems() {
        let hybrid = "9:name=systemd:/\n4:memory:/process_api/9010\n1:cpu:/\n0::/\n";
        assert_eq!(
            parse_proc_self_cgroup(hybrid),
            Some(CgroupPath::V1("/process_api/9010".into()))
        );
        assert_eq!(
            parse_proc_self_cgroup("0::/user.slice/a.scope\n"),
            Some(CgroupPath::V2("/user.slice/a.scope".into()))
        );
        assert_eq!(
            parse_proc_self_cgroup("5:cpu,memory:/x\n"),
            Some(CgroupPath::V1("/x".into()))
        );
        assert_eq!(parse_proc_self_cgroup("3:cpu:/\n"), None);
        assert_eq!(parse_proc_self_cgroup(""), None);
    }

    #[test]
    fn limit_parsers_know_their_unlimited_spellings() {
        assert_eq!(parse_v2_max("max\n"), Some(None));
        assert_eq!(parse_v2_max("536870912\n"), Some(Some(512 * MIB)));
        assert_eq!(parse_v2_max("lots"), None);
        assert_eq!(parse_v1_limit("9223372036854771712\n"), Some(None));
        assert_eq!(parse_v1_limit("1073741824"), Some(Some(1 << 30)));
        assert_eq!(parse_v1_limit("-1"), None);
    }

    #[test]
    fn memory_stat_lookup_is_exact_on_key() {
        let stat = "active_file 7\ninactive_file 42\ntotal_inactive_file 99\n";
        assert_eq!(parse_memory_stat(stat, "inactive_file"), Some(42));
        assert_eq!(parse_memory_stat(stat, "total_inactive_file"), Some(99));
        assert_eq!(parse_memory_stat(stat, "file"), None);
    }

    /// The limited cgroup of fixture `name`: its version, path, limit, usage
    /// and reclaimable bytes.
    fn assert_limited(name: &str, version: u8, path: &str, limit: u64, usage: u64, reclaim: u64) {
        let mem = memory(name, "limited");
        assert_eq!(mem.version, version);
        assert_eq!(mem.path, path);
        assert_eq!(mem.limit_bytes, Some(limit));
        assert_eq!(mem.usage_bytes, usage);
        assert_eq!(mem.reclaimable_bytes, reclaim);
    }

    #[test]
    fn v2_container_with_512_mib_limit() {
        assert_limited("v2-512m", 2, "/", 512 * MIB, 200 * MIB, 50 * MIB);
    }

    #[test]
    fn v2_512_mib_container_on_64_gib_host_budgets_the_container() {
        let ram = super::super::types::RamInfo {
            total_bytes: 64 << 30,
            available_bytes: 60 << 30,
            swap_total_bytes: 0,
            swap_free_bytes: 0,
            cgroup: fixture("v2-512m").read_memory().expect("readable"),
            rlimit_as_bytes: None,
            rlimit_data_bytes: None,
            bandwidth_bytes_per_s: 20e9,
            bandwidth_measured: false,
            speed_calibration: None,
            runtime_bytes: None,
            runtime_virtual_bytes: None,
        };
        // 512 MiB limit - (200 MiB charged - 50 MiB inactive page cache).
        assert_eq!(ram.budget_bytes(), 362 * MIB);
    }

    #[test]
    fn v2_nested_takes_the_ancestor_with_least_headroom() {
        let mem = memory("v2-nested", "limited");
        assert_eq!(mem.path, "/user.slice/user-1000.slice");
        assert_eq!(mem.limit_bytes, Some(4 << 30));
        assert_eq!(mem.headroom_bytes(), Some((4 << 30) - 3 * (1 << 30)));
    }

    #[test]
    fn v1_container_uses_hierarchical_counters() {
        assert_limited("v1-1g", 1, "/docker/abc123", 1 << 30, 300 * MIB, 100 * MIB);
    }

    #[test]
    fn v1_unlimited_and_host_path_fallback() {
        // The process path (/docker/zzz) does not exist below the mount: the
        // mount root is the container's own cgroup.
        let mem = memory("v1-unlimited", "present");
        assert_eq!(mem.path, "/");
        assert_eq!(mem.limit_bytes, None);
        assert_eq!(mem.headroom_bytes(), None);
    }

    #[test]
    fn v2_root_cgroup_without_files_is_none() {
        let fs = CgroupFs {
            root: Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/hw/cgroup/does-not-exist"),
            proc_self_cgroup: "0::/\n".into(),
        };
        assert_eq!(fs.read_memory().expect("no files is not an error"), None);
    }

    #[test]
    fn malformed_file_is_an_error_naming_it() {
        let e = fixture("v2-malformed")
            .read_memory()
            .expect_err("garbage in memory.max");
        assert!(e.to_string().contains("memory.max"), "{e}");
    }
}
