//! The host CPU: model, core counts and the SIMD features that decide which
//! llama.cpp CPU kernels run (and so how fast the CPU part of a model is).

use super::types::CpuInfo;

/// Reads the CPU. Never fails: unknown parts get conservative values and a
/// line in `notes`.
pub fn probe(notes: &mut Vec<String>) -> CpuInfo {
    let mut sys = sysinfo::System::new();
    sys.refresh_cpu_list(sysinfo::CpuRefreshKind::nothing());
    let mut model = sys
        .cpus()
        .first()
        .map(|c| c.brand().trim().to_string())
        .unwrap_or_default();
    #[cfg(target_os = "linux")]
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    #[cfg(target_os = "linux")]
    if model.is_empty() {
        model = cpuinfo_field(&cpuinfo, "model name").unwrap_or_default();
    }
    if model.is_empty() {
        notes.push("CPU model name unknown".to_string());
        model = "unknown CPU".to_string();
    }

    // What this process may run on (affinity, cgroup CPU quota), which is
    // what llama.cpp's thread pool gets; the host may have more.
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    let host_logical = sys.cpus().len().max(1);
    let physical = match sysinfo::System::physical_core_count() {
        // Scale the host's physical count down when we may use only part of
        // the host, keeping the host's SMT ratio.
        Some(p) if p > 0 => (p * logical).div_ceil(host_logical).clamp(1, logical),
        _ => {
            notes.push(format!(
                "physical core count unknown; assuming {logical} (one per hardware thread)"
            ));
            logical
        }
    };

    #[allow(unused_mut)] // only pushed to on Linux x86
    let mut features = detected_features();
    #[cfg(all(target_os = "linux", any(target_arch = "x86", target_arch = "x86_64")))]
    for flag in ["amx_int8", "amx_bf16"] {
        // AMX detection is not stable in std; the kernel's flag list has it
        // (and only lists it when the kernel enabled the tile state).
        if cpuinfo_flags(&cpuinfo).any(|f| f == flag) {
            features.push(flag.to_string());
        }
    }

    CpuInfo {
        model,
        physical_cores: u32::try_from(physical).unwrap_or(u32::MAX),
        logical_cores: u32::try_from(logical).unwrap_or(u32::MAX),
        arch: std::env::consts::ARCH.to_string(),
        features,
    }
}

/// SIMD features std can detect at run time on this architecture.
fn detected_features() -> Vec<String> {
    #[allow(unused_mut)] // empty on architectures we do not list
    let mut found: Vec<&str> = Vec::new();
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    {
        use std::arch::is_x86_feature_detected as has;
        let table = [
            ("sse3", has!("sse3")),
            ("ssse3", has!("ssse3")),
            ("avx", has!("avx")),
            ("avx2", has!("avx2")),
            ("fma", has!("fma")),
            ("f16c", has!("f16c")),
            ("bmi2", has!("bmi2")),
            ("avx512f", has!("avx512f")),
            ("avx512bw", has!("avx512bw")),
            ("avx512vbmi", has!("avx512vbmi")),
            ("avx512vnni", has!("avx512vnni")),
            ("avx512bf16", has!("avx512bf16")),
            ("avx_vnni", has!("avxvnni")),
        ];
        found.extend(table.iter().filter(|(_, on)| *on).map(|(n, _)| *n));
    }
    #[cfg(target_arch = "aarch64")]
    {
        use std::arch::is_aarch64_feature_detected as has;
        let table = [
            ("neon", has!("neon")),
            ("fp16", has!("fp16")),
            ("dotprod", has!("dotprod")),
            ("i8mm", has!("i8mm")),
            ("sve", has!("sve")),
            ("sve2", has!("sve2")),
        ];
        found.extend(table.iter().filter(|(_, on)| *on).map(|(n, _)| *n));
    }
    found.into_iter().map(String::from).collect()
}

/// The value of the first `key : value` line of `/proc/cpuinfo` text.
pub fn cpuinfo_field(cpuinfo: &str, key: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

/// The flags of the first CPU in `/proc/cpuinfo` text (x86 `flags`, Arm
/// `Features`).
pub fn cpuinfo_flags(cpuinfo: &str) -> impl Iterator<Item = &str> {
    cpuinfo
        .lines()
        .find_map(|line| {
            let (k, v) = line.split_once(':')?;
            matches!(k.trim(), "flags" | "Features").then_some(v)
        })
        .unwrap_or("")
        .split_whitespace()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPUINFO: &str = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n\
        flags\t\t: fpu avx avx2 amx_bf16 amx_tile amx_int8 avx512_vnni\n\nprocessor\t: 1\n\
        model name\t: other\nflags\t\t: fpu\n";

    #[test]
    fn cpuinfo_parsers_take_the_first_cpu() {
        assert_eq!(
            cpuinfo_field(CPUINFO, "model name").as_deref(),
            Some("Intel(R) Xeon(R) Platinum 8480+")
        );
        let flags: Vec<&str> = cpuinfo_flags(CPUINFO).collect();
        assert!(flags.contains(&"amx_int8"));
        assert_eq!(flags.len(), 7);
        assert_eq!(cpuinfo_flags("processor : 0\n").count(), 0);
        assert_eq!(
            cpuinfo_flags("Features\t: fp asimd asimddp i8mm\n").nth(2),
            Some("asimddp")
        );
    }

    #[test]
    fn probe_is_self_consistent() {
        let mut notes = Vec::new();
        let cpu = probe(&mut notes);
        assert!(cpu.logical_cores >= 1);
        assert!((1..=cpu.logical_cores).contains(&cpu.physical_cores));
        assert_eq!(cpu.arch, std::env::consts::ARCH);
        assert!(!cpu.model.is_empty());
        #[cfg(target_arch = "x86_64")]
        {
            // Names are ours ("avx_vnni"), detection is std's ("avxvnni").
            let has = |n: &str| cpu.features.iter().any(|f| f == n);
            assert_eq!(
                has("avx_vnni"),
                std::arch::is_x86_feature_detected!("avxvnni")
            );
            // AVX2 implies AVX.
            if cpu.features.iter().any(|f| f == "avx2") {
                assert!(cpu.features.iter().any(|f| f == "avx"));
            }
        }
    }
}
