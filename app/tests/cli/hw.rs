//! `headroom hw`: the probe's JSON on this machine, hardware profiles,
//! `--ram`/`--vram`/`--gpu` overrides, the table of known GPUs (`--gpus`),
//! and the speed basis a plan for a named GPU carries.

use crate::common::{
    GIB, MIB, arr_at, assert_one_line_error, f64_at, hw_fixture, json, run, str_at, u64_at,
};

#[test]
fn hw_json_describes_this_machine() {
    let v = json(["hw", "--json"], 0);
    assert_eq!(u64_at(&v, "/schema_version"), 1);
    let total = u64_at(&v, "/ram/total_bytes");
    let available = u64_at(&v, "/ram/available_bytes");
    assert!(
        total > 0 && available <= total,
        "total {total}, available {available}"
    );
    let budget = u64_at(&v, "/ram_budget_bytes");
    assert!(
        budget > 0 && budget <= available,
        "budget {budget} must be within available {available}"
    );
    let logical = u64_at(&v, "/cpu/logical_cores");
    assert!(logical >= 1 && u64_at(&v, "/cpu/physical_cores") <= logical);
    assert!(!str_at(&v, "/cpu/arch").is_empty());
    arr_at(&v, "/gpus");
    arr_at(&v, "/notes");
    // The default build has llama.cpp's Vulkan backend, and starting it
    // costs resident memory, measured and shown.
    assert_eq!(v["gpu_build"], true);
    assert!(u64_at(&v, "/ram/runtime_bytes") > 0, "{}", v["ram"]);
    assert_eq!(v["source"], "Probed");

    let text = run(["hw"]);
    assert_eq!(text.code, Some(0), "stderr: {}", text.stderr);
    for start in ["RAM ", "CPU ", "build "] {
        assert!(
            text.stdout.lines().any(|l| l.starts_with(start)),
            "no {start:?} line:\n{}",
            text.stdout
        );
    }
    assert!(
        text.stdout.contains("CPU, RPC workers (--rpc)"),
        "{}",
        text.stdout
    );
}

#[test]
fn hw_json_reads_a_profile() {
    let profile = hw_fixture("two-24g-gpus.toml");
    let v = json(
        [
            "hw".as_ref(),
            "--json".as_ref(),
            "--hw".as_ref(),
            profile.as_os_str(),
        ],
        0,
    );
    let gpus = arr_at(&v, "/gpus");
    assert_eq!(gpus.len(), 2);
    for i in 0..2 {
        assert_eq!(u64_at(&v, &format!("/gpus/{i}/total_bytes")), 24 * GIB);
        assert_eq!(
            u64_at(&v, &format!("/gpus/{i}/free_bytes")),
            23 * GIB + 512 * MIB
        );
        assert_eq!(
            str_at(&v, &format!("/gpus/{i}/name")),
            "NVIDIA GeForce RTX 3090"
        );
        assert_eq!(u64_at(&v, &format!("/gpus/{i}/index")), i as u64);
    }
    assert_eq!(u64_at(&v, "/ram/total_bytes"), 64 * GIB);
    assert_eq!(u64_at(&v, "/ram/available_bytes"), 56 * GIB);
    assert_eq!(u64_at(&v, "/ram_budget_bytes"), 56 * GIB);
    assert_eq!(u64_at(&v, "/cpu/physical_cores"), 16);
    assert!(
        v["source"]["Profile"]
            .as_str()
            .is_some_and(|p| p.ends_with("two-24g-gpus.toml")),
        "source: {}",
        v["source"]
    );
}

#[test]
fn hw_json_applies_ram_and_vram_overrides() {
    let v = json(["hw", "--json", "--ram", "2GiB", "--vram", "8GiB,8GiB"], 0);
    assert_eq!(u64_at(&v, "/ram/available_bytes"), 2 * GIB);
    assert_eq!(u64_at(&v, "/ram/total_bytes"), 2 * GIB);
    assert_eq!(u64_at(&v, "/ram_budget_bytes"), 2 * GIB);
    assert!(
        v["ram"]["cgroup"].is_null(),
        "--ram replaces this machine's cgroup limit"
    );
    let gpus = arr_at(&v, "/gpus");
    assert_eq!(gpus.len(), 2);
    for i in 0..2 {
        assert_eq!(u64_at(&v, &format!("/gpus/{i}/total_bytes")), 8 * GIB);
        assert_eq!(u64_at(&v, &format!("/gpus/{i}/free_bytes")), 8 * GIB);
    }
    assert_eq!(v["source"], "Overridden");

    // Overrides on top of a profile: the profile's CPU, the override's memory.
    let profile = hw_fixture("two-24g-gpus.toml");
    let v = json(
        [
            "hw".as_ref(),
            "--json".as_ref(),
            "--hw".as_ref(),
            profile.as_os_str(),
            "--vram".as_ref(),
            "0".as_ref(),
        ],
        0,
    );
    assert_eq!(arr_at(&v, "/gpus").len(), 0);
    assert_eq!(u64_at(&v, "/cpu/physical_cores"), 16);
    assert_eq!(u64_at(&v, "/ram/total_bytes"), 64 * GIB);
}

#[test]
fn hw_errors_are_one_line() {
    assert_one_line_error(
        &run(["hw", "--hw", "/nonexistent.toml"]),
        1,
        &["/nonexistent.toml"],
        "missing profile",
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[ram]\ntotal = \"lots\"\n").expect("write");
    assert_one_line_error(
        &run(["hw".as_ref(), "--hw".as_ref(), bad.as_os_str()]),
        1,
        &["bad.toml"],
        "bad profile",
    );
    // `--ram 0` parses but is refused later (by the planner's overrides), so
    // today it exits 1 where other bad `--ram` values exit 2; either way, one line.
    let zero = run(["hw", "--ram", "0"]);
    assert!(
        matches!(zero.code, Some(1 | 2)),
        "--ram 0: exit {:?}",
        zero.code
    );
    assert_one_line_error(&zero, zero.code.unwrap_or(-1), &["--ram"], "--ram 0");
    assert_one_line_error(
        &run(["hw", "--vram", "eight"]),
        2,
        &["--vram", "eight"],
        "--vram eight",
    );
}

#[test]
fn hw_gpus_lists_the_table_with_sources() {
    let v = json(["hw", "--gpus", "--json"], 0);
    assert_eq!(u64_at(&v, "/schema_version"), 1);
    assert_eq!(str_at(&v, "/default/card"), "GeForce RTX 3060");
    assert_eq!(f64_at(&v, "/default/bandwidth_bytes_per_s"), 360e9);
    let gpus = arr_at(&v, "/gpus");
    assert!(gpus.len() >= 40, "{} GPUs", gpus.len());
    for (i, _) in gpus.iter().enumerate() {
        let at = |f: &str| format!("/gpus/{i}/{f}");
        let name = str_at(&v, &at("full_name"));
        assert!(str_at(&v, &at("source")).contains("https://"), "{name}");
        assert!(f64_at(&v, &at("bandwidth_gb_s")) > 0.0, "{name}");
        assert!(f64_at(&v, &at("fp16_tflops")) > 0.0, "{name}");
        assert!(!arr_at(&v, &at("memory_gb")).is_empty(), "{name}");
    }
    for vendor in ["nvidia", "amd", "intel", "apple"] {
        assert!(
            gpus.iter().any(|g| g["vendor"] == vendor),
            "no {vendor} GPU"
        );
    }

    let text = run(["hw", "--gpus"]);
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    for name in [
        "GeForce RTX 4060 Ti",
        "Radeon RX 7900 XTX",
        "Arc B580",
        "Apple M4 Max",
        "H100 SXM",
    ] {
        assert!(
            text.stdout.contains(name),
            "{name} not listed:\n{}",
            text.stdout
        );
    }
    assert!(text.stdout.contains("360 GB/s"), "{}", text.stdout);
}

#[test]
fn hw_gpu_names_cards_and_vram_assumes_a_mid_range_one() {
    let v = json(["hw", "--json", "--gpu", "rtx4060, RTX 4060 Ti 16GB"], 0);
    assert_eq!(v["source"], "Overridden");
    assert_eq!(str_at(&v, "/gpus/0/name"), "NVIDIA GeForce RTX 4060");
    assert_eq!(u64_at(&v, "/gpus/0/total_bytes"), 8 * GIB);
    assert_eq!(f64_at(&v, "/gpus/0/bandwidth_bytes_per_s"), 272e9);
    assert_eq!(str_at(&v, "/gpus/0/bandwidth_source"), "looked_up");
    assert_eq!(
        str_at(&v, "/gpus/1/name"),
        "NVIDIA GeForce RTX 4060 Ti 16GB"
    );
    assert_eq!(u64_at(&v, "/gpus/1/free_bytes"), 16 * GIB);
    assert!(v["unified"].is_null());

    // An Apple chip is the machine: its RAM, and macOS's share for the GPU.
    let v = json(["hw", "--json", "--gpu", "M2 Max 96GB"], 0);
    assert_eq!(u64_at(&v, "/ram/total_bytes"), 96 * GIB);
    assert_eq!(u64_at(&v, "/unified/gpu_limit_bytes"), 72 * GIB);
    assert_eq!(str_at(&v, "/gpus/0/vendor"), "apple");
    assert_eq!(f64_at(&v, "/gpus/0/bandwidth_bytes_per_s"), 400e9);
    // … unless --ram says how much of it there is.
    let v = json(
        ["hw", "--json", "--gpu", "M2 Max 96GB", "--ram", "48GiB"],
        0,
    );
    assert_eq!(u64_at(&v, "/ram/total_bytes"), 48 * GIB);
    assert_eq!(u64_at(&v, "/unified/gpu_limit_bytes"), 36 * GIB);

    let v = json(["hw", "--json", "--vram", "8GiB"], 0);
    assert_eq!(str_at(&v, "/gpus/0/bandwidth_source"), "assumed");
    assert_eq!(f64_at(&v, "/gpus/0/bandwidth_bytes_per_s"), 360e9);
    let text = run(["hw", "--vram", "8GiB"]);
    assert!(
        text.stdout
            .contains("360 GB/s assumed (name the card with --gpu)"),
        "{}",
        text.stdout
    );

    assert_one_line_error(
        &run(["hw", "--gpu", "rtx4060ti"]),
        2,
        &["--gpu", "ambiguous", "RTX 4060 Ti 16GB"],
        "--gpu rtx4060ti",
    );
    assert_one_line_error(
        &run(["hw", "--gpu", "geforce 4065"]),
        2,
        &["--gpu", "unknown GPU", "hw --gpus"],
        "--gpu geforce 4065",
    );
}

/// `plan --json` with a named card says what the speed rests on: the card's
/// bandwidth, looked up, and the bytes read per token on each device, which
/// the text shows beside the estimate.
#[test]
fn a_plan_for_a_named_gpu_carries_its_speed_basis() {
    let args = [
        "plan", "--json", "--ram", "8GiB", "--gpu", "RTX 3060", "-c", "2048",
    ];
    let p = json(args, 0);
    assert_eq!(
        str_at(&p, "/speed_basis/gpus/0/name"),
        "NVIDIA GeForce RTX 3060"
    );
    assert_eq!(str_at(&p, "/speed_basis/gpus/0/source"), "looked_up");
    assert_eq!(
        f64_at(&p, "/speed_basis/gpus/0/bandwidth_bytes_per_s"),
        360e9
    );
    assert_eq!(f64_at(&p, "/speed_basis/gpus/0/fp16_flops_per_s"), 51e12);
    assert_eq!(
        u64_at(&p, "/speed_basis/gpus/0/n_layers"),
        u64_at(&p, "/devices/1/n_layers")
    );
    let on_gpu = u64_at(&p, "/speed_basis/gpus/0/bytes_per_token");
    let weights = u64_at(&p, "/devices/1/weights_bytes");
    assert!(
        on_gpu > 0 && on_gpu <= weights + u64_at(&p, "/devices/1/kv_bytes"),
        "{on_gpu} read per token of {weights} weights"
    );
    // A desktop card is not this machine's: the host is a typical
    // desktop's, stated, and nothing measured here prices it.
    assert_eq!(str_at(&p, "/speed_basis/ram/source"), "typical_desktop");
    assert_eq!(str_at(&p, "/speed_basis/ram/host"), "typical_desktop");
    assert_eq!(
        f64_at(&p, "/speed_basis/ram/bandwidth_bytes_per_s"),
        headroom_planner::hw::TYPICAL_DESKTOP_RAM_BANDWIDTH_BYTES_PER_S
    );
    assert_eq!(u64_at(&p, "/speed_basis/ram/threads"), 8);
    // The same fixed cost per layer as every machine's (JSON keeps a float
    // to within a unit in its last place).
    let per_layer = f64_at(&p, "/speed_basis/ram/per_layer_s");
    assert!((per_layer - headroom_planner::speed::CPU_PER_LAYER_S).abs() < 1e-15);
    assert!(p["speed_basis"]["ram"]["calibration_runs"].is_null());
    u64_at(&p, "/speed_basis/ram/bytes_per_token");
    // An Apple chip is its own machine: its bandwidth and cores.
    let m = json(["plan", "--json", "--gpu", "M4 Max 64GB", "-c", "2048"], 0);
    assert_eq!(str_at(&m, "/speed_basis/ram/source"), "looked_up");
    assert_eq!(f64_at(&m, "/speed_basis/ram/bandwidth_bytes_per_s"), 546e9);
    assert_eq!(u64_at(&m, "/speed_basis/ram/threads"), 12);
    // --ram alone is this machine with other memory.
    let here = json(
        [
            "plan", "--json", "--ram", "8GiB", "--vram", "0", "-c", "2048",
        ],
        0,
    );
    assert_eq!(str_at(&here, "/speed_basis/ram/host"), "this_machine");

    let text = run(["plan", "--ram", "8GiB", "--gpu", "RTX 3060", "-c", "2048"]);
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    let basis = text
        .stdout
        .lines()
        .find(|l| l.starts_with("basis "))
        .unwrap_or_else(|| panic!("no basis line:\n{}", text.stdout));
    assert!(
        basis.contains("NVIDIA GeForce RTX 3060 360 GB/s (looked up by name)")
            && basis.contains("GB/token"),
        "{basis}"
    );
}
