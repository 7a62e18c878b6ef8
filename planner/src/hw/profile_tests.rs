//! Tests for hardware profiles, against the example profiles in
//! `tests/fixtures/hw/` that the simulated-machine tests also use.

use std::path::{Path, PathBuf};

use super::*;

const MIB: u64 = 1 << 20;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hw")
        .join(name)
}

fn parse(text: &str) -> Result<HardwareSnapshot, HwError> {
    parse_profile(text, Path::new("test.toml"))
}

#[test]
fn example_profiles_load() {
    let a100 = load_profile(&fixture("a100-80g.toml")).expect("a100 profile");
    assert_eq!(a100.gpus.len(), 1);
    assert_eq!(a100.gpus[0].total_bytes, 80 * GIB);
    assert_eq!(a100.gpus[0].free_bytes, 81345 * MIB);
    assert_eq!(a100.gpus[0].vendor, GpuVendor::Nvidia);
    assert_eq!(a100.gpus[0].bandwidth_bytes_per_s, Some(2.039e12));
    assert_eq!(a100.unified, None);
    assert_eq!(a100.source, Source::Profile(fixture("a100-80g.toml")));

    let two = load_profile(&fixture("two-24g-gpus.toml")).expect("two-gpu profile");
    let idx: Vec<u32> = two.gpus.iter().map(|g| g.index).collect();
    assert_eq!(idx, vec![0, 1]);
    assert!(
        two.gpus
            .iter()
            .all(|g| g.total_bytes == 24 * GIB && g.free_bytes == 47 * GIB / 2)
    );

    let small = load_profile(&fixture("gpu-8g-ram-16g.toml")).expect("8g profile");
    assert_eq!(small.ram.total_bytes, 16 * GIB);
    assert_eq!(small.ram.budget_bytes(), 12 * GIB);
    assert_eq!(small.gpus[0].free_bytes, 15 * GIB / 2);
    assert_eq!(small.cpu.logical_cores, 12);

    let laptop = load_profile(&fixture("laptop-unified-32g.toml")).expect("laptop profile");
    let unified = laptop.unified.as_ref().expect("unified");
    assert_eq!(unified.gpu_limit_bytes, 32 * GIB * 2 / 3);
    assert_eq!(laptop.gpus[0].vendor, GpuVendor::Apple);
    assert_eq!(laptop.cpu.arch, "aarch64");
}

#[test]
fn container_profile_budget_is_cgroup_headroom() {
    let c = load_profile(&fixture("container-512m.toml")).expect("container profile");
    let cg = c.ram.cgroup.as_ref().expect("cgroup");
    assert_eq!((cg.version, cg.path.as_str()), (2, "/"));
    // 512 MiB limit - (200 MiB usage - 50 MiB reclaimable), not the host's 60 GiB.
    assert_eq!(c.ram.budget_bytes(), 362 * MIB);
    assert!(c.gpus.is_empty());
}

#[test]
fn empty_profile_gets_defaults() {
    let s = parse("").expect("empty is valid");
    assert_eq!(s.ram.total_bytes, DEFAULT_PROFILE_RAM_BYTES);
    assert_eq!(s.ram.available_bytes, DEFAULT_PROFILE_RAM_BYTES);
    assert_eq!((s.ram.swap_total_bytes, s.ram.swap_free_bytes), (0, 0));
    assert_eq!(
        s.ram.bandwidth_bytes_per_s,
        DEFAULT_RAM_BANDWIDTH_BYTES_PER_S
    );
    assert!(!s.ram.bandwidth_measured);
    assert_eq!((s.cpu.physical_cores, s.cpu.logical_cores), (8, 8));
    assert_eq!(s.cpu.features, vec!["avx", "avx2", "fma", "f16c"]);
    assert!(s.gpus.is_empty() && s.unified.is_none() && s.ram.cgroup.is_none());
}

#[test]
fn sizes_accept_integers_and_strings() {
    let s = parse("[ram]\ntotal = 1073741824\navailable = \"512MiB\"\n[[gpu]]\ntotal = \"8GB\"\n")
        .expect("valid");
    assert_eq!(s.ram.total_bytes, GIB);
    assert_eq!(s.ram.available_bytes, 512 * MIB);
    assert_eq!(s.gpus[0].total_bytes, 8_000_000_000);
    assert_eq!(s.gpus[0].free_bytes, 8_000_000_000);
    assert_eq!(s.gpus[0].name, "GPU0");
    assert_eq!(s.gpus[0].vendor, GpuVendor::Other);
}

#[test]
fn unknown_field_is_rejected_naming_it() {
    let e = parse("[ram]\ntotl = \"8GiB\"\n").expect_err("typo");
    let msg = e.to_string();
    assert!(matches!(e, HwError::ProfileParse { .. }), "{msg}");
    assert!(
        msg.contains("totl") && msg.contains("test.toml") && msg.contains("line 2"),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "{msg}");
    let e = parse("[gpus]\ntotal = 1\n").expect_err("unknown table");
    assert!(e.to_string().contains("gpus"), "{e}");
}

#[test]
fn bad_values_are_clear_errors() {
    let cases = [
        ("[ram]\ntotal = \"8 parsecs\"\n", "8 parsecs"),
        ("[ram]\ntotal = -5\n", "negative"),
        ("[[gpu]]\nname = \"x\"\n", "total"),
        ("[[gpu]]\ntotal = \"8GiB\"\nvendor = \"matrox\"\n", "matrox"),
    ];
    for (text, needle) in cases {
        let e = parse(text).expect_err(text);
        assert!(matches!(e, HwError::ProfileParse { .. }), "{e}");
        assert!(e.to_string().contains(needle), "{text:?}: {e}");
    }
}

#[test]
fn impossible_machines_are_rejected() {
    let cases = [
        "[ram]\ntotal = \"8GiB\"\navailable = \"9GiB\"\n",
        "[[gpu]]\ntotal = \"8GiB\"\nfree = \"9GiB\"\n",
        "[[gpu]]\ntotal = 0\n",
        "[cpu]\nphysical_cores = 8\nlogical_cores = 4\n",
        "[unified]\ngpu_limit = \"32GiB\"\n",
        "[cgroup]\nversion = 3\n",
        "[ram]\nbandwidth_bytes_per_s = -1.0\n",
    ];
    for text in cases {
        let e = parse(text).expect_err(text);
        assert!(matches!(e, HwError::ProfileInvalid { .. }), "{text:?}: {e}");
    }
}

#[test]
fn unified_without_gpu_table_adds_an_integrated_gpu() {
    let s = parse("[ram]\ntotal = \"16GiB\"\nbandwidth_bytes_per_s = 1e11\n[unified]\ngpu_limit = \"10GiB\"\n").expect("valid");
    assert_eq!(s.gpus.len(), 1);
    assert_eq!(s.gpus[0].total_bytes, 10 * GIB);
    assert_eq!(s.gpus[0].bandwidth_bytes_per_s, Some(1e11));
    assert_eq!(
        s.unified.map(|u| u.source),
        Some("hardware profile".to_string())
    );
}

#[test]
fn written_profile_reads_back_to_the_same_machine() {
    for name in [
        "a100-80g.toml",
        "laptop-unified-32g.toml",
        "container-512m.toml",
        "two-24g-gpus.toml",
    ] {
        let original = load_profile(&fixture(name)).expect("fixture");
        let text = to_profile_toml(&original).expect("writable");
        let back = parse_profile(&text, &fixture(name)).expect("own output parses");
        assert_eq!(back.ram, original.ram, "{name}");
        assert_eq!(back.cpu, original.cpu, "{name}");
        assert_eq!(back.gpus, original.gpus, "{name}");
        assert_eq!(back.unified, original.unified, "{name}");
    }
}

#[test]
fn a_profile_is_read_up_to_a_mebibyte() {
    // An endless source (or a huge stranger's file) is refused, not slurped.
    let e = load_profile(Path::new("/dev/zero")).expect_err("endless");
    assert!(
        matches!(&e, HwError::ProfileRead { .. }) && e.to_string().contains("larger than 1 MiB"),
        "{e}"
    );
    // The message says the I/O error once.
    let e = load_profile(Path::new("/nonexistent/hw.toml")).expect_err("missing");
    assert_eq!(e.to_string().matches("os error 2").count(), 1, "{e}");
    assert!(std::error::Error::source(&e).is_none());
}
