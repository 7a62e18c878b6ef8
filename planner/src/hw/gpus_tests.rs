//! The GPU table parses, every row is sourced and plausible, and names
//! resolve the way people write them.

use super::*;
use crate::hw::types::DEFAULT_GPU_BANDWIDTH_BYTES_PER_S;

#[test]
fn the_table_parses_and_is_sane() {
    let t = table();
    assert!(t.len() >= 40, "only {} GPUs", t.len());
    for g in t {
        let what = format!("{} {:?}", g.name, g.memory_gb);
        assert!(!g.name.trim().is_empty(), "{what}: no name");
        let src = g.source.trim();
        assert!(
            src.starts_with("https://") || src.starts_with("stored page https://"),
            "{what}: source must be a URL or a stored page: {src:?}"
        );
        assert!(!g.memory_gb.is_empty(), "{what}: no memory size");
        for &m in &g.memory_gb {
            assert!((2..=512).contains(&m), "{what}: {m} GB");
        }
        let mut sorted = g.memory_gb.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, g.memory_gb, "{what}: sizes ascending, once each");
        assert!(
            (50.0..=10_000.0).contains(&g.bandwidth_gb_s),
            "{what}: {} GB/s",
            g.bandwidth_gb_s
        );
        assert!(
            (1.0..=5_000.0).contains(&g.fp16_tflops),
            "{what}: {} TFLOPS",
            g.fp16_tflops
        );
        // FP16 per byte of bandwidth: GPUs sit between ~20 (Apple) and ~2000.
        let flop_per_byte = g.fp16_tflops * 1e3 / g.bandwidth_gb_s;
        assert!(
            (10.0..=2_000.0).contains(&flop_per_byte),
            "{what}: {flop_per_byte:.0} FLOP per byte"
        );
        assert_eq!(
            g.unified,
            g.segment == Segment::Soc,
            "{what}: unified parts are the systems on a chip"
        );
        assert!(!g.keys().iter().any(String::is_empty), "{what}: empty key");
        // CPU cores belong to the parts that are the whole machine.
        assert!(
            g.cpu_cores
                .is_none_or(|c| g.unified && (1..=64).contains(&c)),
            "{what}: cpu_cores {:?}",
            g.cpu_cores
        );
    }
}

#[test]
fn the_table_covers_the_families_people_own() {
    for name in [
        "RTX 2060",
        "RTX 3090",
        "RTX 4060",
        "RTX 5090",
        "RTX 4090 Laptop",
        "RTX A6000",
        "RTX 6000 Ada",
        "A100 SXM 80GB",
        "H100 SXM",
        "H200",
        "L4",
        "L40S",
        "RX 6800 XT",
        "RX 7900 XTX",
        "RX 9070 XT",
        "MI250X",
        "MI300X",
        "Arc A770",
        "Arc B580",
        "M1 Max 64GB",
        "M2 Ultra 192GB",
        "M3 Pro 36GB",
        "M4 Max 128GB",
        "Strix Halo 128GB",
    ] {
        resolve(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn no_two_rows_answer_to_one_name_and_size() {
    let t = table();
    for (i, a) in t.iter().enumerate() {
        for b in &t[i + 1..] {
            let (ka, kb) = (a.keys(), b.keys());
            let shared: Vec<&String> = ka.iter().filter(|k| kb.contains(k)).collect();
            if shared.is_empty() {
                continue;
            }
            assert_eq!(a.name, b.name, "{} and {} share {shared:?}", a.name, b.name);
            assert!(
                !a.memory_gb.iter().any(|m| b.memory_gb.contains(m)),
                "{} rows overlap in memory size",
                a.name
            );
        }
    }
}

#[test]
fn every_row_resolves_by_its_display_name() {
    for g in table() {
        for &m in &g.memory_gb {
            let want = NamedGpu {
                gpu: g,
                memory_gb: m,
            };
            let name = want.display_name();
            let got = resolve(&name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(got, want, "{name}");
            // A driver reporting that name and size finds the same row.
            let found = lookup(&name, want.memory_bytes()).expect("looked up");
            assert_eq!(found, want, "{name}");
        }
    }
}

#[test]
fn forgiving_names() {
    let name = |q: &str| {
        resolve(q)
            .unwrap_or_else(|e| panic!("{q}: {e}"))
            .display_name()
    };
    assert_eq!(name("rtx4060"), "NVIDIA GeForce RTX 4060");
    assert_eq!(name("RTX 4060 Ti 16GB"), "NVIDIA GeForce RTX 4060 Ti 16GB");
    assert_eq!(name("rtx4060ti16gb"), "NVIDIA GeForce RTX 4060 Ti 16GB");
    assert_eq!(name("RTX 4060 Ti 8 GB"), "NVIDIA GeForce RTX 4060 Ti 8GB");
    assert_eq!(name("NVIDIA GeForce RTX 4090"), "NVIDIA GeForce RTX 4090");
    assert_eq!(name("4090"), "NVIDIA GeForce RTX 4090");
    assert_eq!(name("geforce-rtx-3060"), "NVIDIA GeForce RTX 3060");
    assert_eq!(name("RTX 4060 Mobile"), "NVIDIA GeForce RTX 4060 Laptop");
    assert_eq!(
        name("NVIDIA GeForce RTX 4070 Laptop GPU"),
        "NVIDIA GeForce RTX 4070 Laptop"
    );
    assert_eq!(name("AMD Radeon RX 7900 XTX"), "AMD Radeon RX 7900 XTX");
    assert_eq!(name("rx7900xtx"), "AMD Radeon RX 7900 XTX");
    assert_eq!(name("mi300x"), "AMD Instinct MI300X");
    assert_eq!(name("Intel(R) Arc(TM) A770 Graphics"), "Intel Arc A770");
    assert_eq!(name("m4 max 64gb"), "Apple M4 Max 64GB");
    assert_eq!(
        name("Ryzen AI Max+ 395 128GB"),
        "AMD Ryzen AI Max+ 395 128GB"
    );
    assert_eq!(name("NVIDIA A100-SXM4-80GB"), "NVIDIA A100 SXM 80GB");
    assert_eq!(name("NVIDIA A100 80GB PCIe"), "NVIDIA A100 PCIe 80GB");
    assert_eq!(name("NVIDIA H100 80GB HBM3"), "NVIDIA H100 SXM");
    assert_eq!(name("Tesla T4"), "NVIDIA T4");
    assert_eq!(
        name("NVIDIA RTX 6000 Ada Generation"),
        "NVIDIA RTX 6000 Ada"
    );
    // A unique prefix is enough.
    assert_eq!(name("rtx 4090 lap"), "NVIDIA GeForce RTX 4090 Laptop");
}

#[test]
fn ambiguous_and_unknown_names_list_close_matches() {
    let e = resolve("rtx4060ti").expect_err("two sizes");
    let msg = e.to_string();
    assert!(msg.contains("ambiguous"), "{msg}");
    assert!(
        msg.contains("RTX 4060 Ti 8GB") && msg.contains("RTX 4060 Ti 16GB"),
        "{msg}"
    );
    let e = resolve("M3 Max").expect_err("two rows, five sizes");
    assert!(e.to_string().contains("Apple M3 Max 96GB"), "{e}");
    let e = resolve("H100").expect_err("three H100s");
    for n in ["H100 PCIe", "H100 SXM", "H100 NVL"] {
        assert!(e.to_string().contains(n), "{e}");
    }
    let e = resolve("rtx4065").expect_err("no such card");
    let msg = e.to_string();
    assert!(msg.starts_with("unknown GPU \"rtx4065\""), "{msg}");
    assert!(
        msg.contains("RTX 4060") && msg.contains("hw --gpus"),
        "{msg}"
    );
    let e = resolve("RTX 4090 48GB").expect_err("no 48 GB 4090");
    assert!(e.to_string().contains("comes with 24GB"), "{e}");
    for bad in ["", "  ", "nvidia", "quantum flux 9000"] {
        let e = resolve(bad).expect_err(bad);
        assert!(!e.to_string().contains('\n'), "{e}");
    }
    // Every choice an error offers resolves.
    for q in ["rtx4060ti", "M3 Max", "H100", "a100", "m4"] {
        let Err(GpuNameError::Ambiguous { choices, .. }) = resolve(q) else {
            panic!("{q} should be ambiguous")
        };
        for c in choices.iter().filter(|c| *c != "…") {
            resolve(c).unwrap_or_else(|e| panic!("{q} offered {c}: {e}"));
        }
    }
}

#[test]
fn lookup_uses_the_detected_memory() {
    let gib = |n: u64| n << 30;
    let g = lookup("NVIDIA GeForce RTX 4060 Ti", gib(16) - gib(1) / 2).expect("known");
    assert_eq!(g.memory_gb, 16);
    let g = lookup("Apple M3 Max", gib(64)).expect("known");
    assert_eq!(g.gpu.bandwidth_gb_s, 400.0);
    let g = lookup("Apple M3 Max", gib(36)).expect("known");
    assert_eq!(g.gpu.bandwidth_gb_s, 300.0);
    // Exact names only: no guessing from a prefix.
    assert_eq!(lookup("NVIDIA H100", gib(80)), None);
    assert_eq!(lookup("GPU0", gib(8)), None);
    assert_eq!(lookup("AMD Radeon Graphics", gib(2)), None);
}

#[test]
fn the_default_is_the_named_mid_range_card() {
    let g = resolve(DEFAULT_GPU_CARD).expect("in the table");
    assert_eq!(
        g.gpu.bandwidth_bytes_per_s(),
        DEFAULT_GPU_BANDWIDTH_BYTES_PER_S
    );
    // Mid-range: within the 8–16 GB cards' range, well below the flagships.
    assert!((250e9..=500e9).contains(&DEFAULT_GPU_BANDWIDTH_BYTES_PER_S));
}

#[test]
fn sizes_inside_names() {
    assert_eq!(split_size("16gb"), Some(("", 16)));
    assert_eq!(split_size("ti16gb"), Some(("ti", 16)));
    assert_eq!(split_size("24gib"), Some(("", 24)));
    assert_eq!(split_size("h100"), None);
    assert_eq!(split_size("gb"), None);
    assert_eq!(edit_distance("rtx4065", "rtx4060"), 1);
}
