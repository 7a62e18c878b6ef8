//! llama.cpp's Vulkan backend on Mesa's lavapipe, the GPU-type device every
//! machine here has (`scripts/setup.sh` installs it): the planner's rules for
//! a local GPU held to a running backend.
//!
//! ggml uses a CPU-type Vulkan device only when `GGML_VK_VISIBLE_DEVICES`
//! names it, and reads that variable once per process, when the backends
//! start. So the in-process checks run in a child of this test binary
//! started with the variable set ([`in_child`]); the tests that drive the
//! binary set it on the child they start.

use std::process::Command;

use headroom::llama;
use headroom_planner::hw::{self, Overrides, ProbeOptions};
use serde_json::Value;

use crate::accounting_cases;
use crate::rpc_worker::Worker;
use crate::support::{Sandbox, bin, model, one_at_a_time};

const GIB: u64 = 1 << 30;
/// Runs test `name` of this binary again, alone, in a child process that
/// sees lavapipe (`GGML_VK_VISIBLE_DEVICES=0`: ggml reads it once, at
/// start). True in the child itself, where the caller does the work.
fn in_child(name: &str) -> bool {
    crate::support::in_child(name, &[("GGML_VK_VISIBLE_DEVICES", "0")])
}

/// This machine as the app sees it with lavapipe visible, RAM made ample
/// (the accounting matrix loads nothing).
fn machine() -> hw::HardwareSnapshot {
    let probed = hw::probe(&ProbeOptions {
        measure_bandwidth: false,
        cache_dir: None,
    });
    let probed = hw::use_registry_devices(probed, &llama::devices::registry());
    hw::apply_overrides(
        probed,
        &Overrides {
            ram_bytes: Some(512 * GIB),
            vram_bytes: None,
            profile: None,
        },
    )
    .expect("overrides")
}

/// `headroom hw --json` lists lavapipe as `Vulkan0` (its memory this
/// machine's RAM) when the variable names it, and no GPU without it,
/// saying why.
#[test]
fn hw_lists_lavapipe_only_when_named() {
    let json = |vk: Option<&str>| -> Value {
        let mut c = Command::new(bin());
        c.args(["hw", "--json"]);
        match vk {
            Some(v) => c.env("GGML_VK_VISIBLE_DEVICES", v),
            None => c.env_remove("GGML_VK_VISIBLE_DEVICES"),
        };
        let out = c.output().expect("hw runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("hw --json")
    };
    let with = json(Some("0"));
    let gpus = with["gpus"].as_array().expect("gpus");
    assert_eq!(gpus.len(), 1, "{gpus:?}");
    let g = &gpus[0];
    assert_eq!(g["llama"]["name"], "Vulkan0", "{g}");
    assert_eq!(g["llama"]["backend"], "Vulkan", "{g}");
    assert_eq!(g["llama"]["host_memory"], true, "{g}");
    assert!(g["total_bytes"].as_u64().unwrap_or(0) >= GIB, "{g}");
    assert!(g["free_bytes"].as_u64() <= g["total_bytes"].as_u64(), "{g}");
    assert!(
        with["ram"]["runtime_bytes"].as_u64().unwrap_or(0) > 0,
        "starting Vulkan costs RAM: {}",
        with["ram"]
    );

    let without = json(None);
    assert_eq!(
        without["gpus"].as_array().map(Vec::len),
        Some(0),
        "{without}"
    );
    let notes = without["notes"].to_string();
    assert!(
        notes.contains("GGML_VK_VISIBLE_DEVICES"),
        "hw says why there is no GPU: {notes}"
    );
}

/// The plan per device against llama.cpp's `no_alloc` accounting with
/// every layer, about half and none on lavapipe, for the shapes and mixes
/// of the other accounting tests and the real demo, at short and long
/// contexts, flash attention auto and off: weights within 1%, KV within
/// 2%, compute within 15% and totals within 5% per device, held in every
/// case. lavapipe's buffer (its own layers and the CPU layers' products)
/// is replayed through ggml-alloc for llama, gemma3 and qwen3moe, and
/// matches llama.cpp's to the byte in most cases.
#[test]
fn plan_per_device_matches_llama_cpp_on_lavapipe() {
    let _gate = one_at_a_time();
    if !in_child("vulkan::plan_per_device_matches_llama_cpp_on_lavapipe") {
        return;
    }
    let hw = machine();
    assert!(
        hw.gpus
            .iter()
            .any(|g| g.llama.as_ref().is_some_and(|l| l.name == "Vulkan0")),
        "lavapipe is listed: {:?}",
        hw.gpus
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cases = accounting_cases::cases(dir.path(), model().to_path_buf());
    // The one model here whose output matrix lavapipe takes (the others'
    // are larger than its largest tensor), up to 32k (its training
    // context is 8k; llama.cpp loads it longer).
    cases.push(accounting_cases::Case {
        label: "SmolLM2-135M Q4_1 (real, output on the device)".into(),
        path: crate::demo::instruct_model().to_path_buf(),
        n_ctx_train: 32768,
        n_layer: 30,
    });
    let (report, fails) = accounting_cases::per_device_matrix(&cases, || hw.clone());
    hold_per_device("on lavapipe", &report, fails);
}

/// lavapipe with two loopback RPC workers: three devices (llama.cpp puts
/// the workers first), per device against llama.cpp's `no_alloc`
/// accounting over the same matrix: weights within 1%, KV within 2%,
/// compute within 15% and totals within 5% per device, held in every case.
/// The second worker's buffer on Qwen3-30B-A3B is replayed through
/// ggml-alloc (it was 15-20% over by the stage rule).
#[test]
fn plan_per_device_matches_llama_cpp_on_lavapipe_and_two_workers() {
    let _gate = one_at_a_time();
    if !in_child("vulkan::plan_per_device_matches_llama_cpp_on_lavapipe_and_two_workers") {
        return;
    }
    let workers = [Worker::start(None), Worker::start(None)];
    let endpoints: Vec<String> = workers.iter().map(|w| w.endpoint.clone()).collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let cases = accounting_cases::cases(dir.path(), model().to_path_buf());
    let (report, fails) = accounting_cases::per_device_matrix(&cases, || {
        let devices = llama::rpc::connect(&endpoints).expect("workers connect");
        hw::add_rpc_devices(machine(), &crate::rpc::as_planned(&devices))
    });
    assert!(
        report
            .iter()
            .all(|l| l.contains("Vulkan0") && l.contains("RPC")),
        "three devices in every case:\n{}",
        report.join("\n")
    );
    hold_per_device("on lavapipe and two RPC workers", &report, fails);
}

/// Prints the matrix and holds every comparison: weights within 1%, KV
/// within 2%, compute within 15% and totals within 5% per device.
fn hold_per_device(on: &str, report: &[String], fails: Vec<String>) {
    println!(
        "plan vs llama.cpp {on} (per device: layers, weights, KV, compute planned/llama.cpp):\n{}",
        report.join("\n")
    );
    assert!(
        fails.is_empty(),
        "{} comparisons of {} cases out of tolerance:\n{}",
        fails.len(),
        report.len(),
        fails.join("\n")
    );
}

/// The instruct demo with every layer, and with about half (`-ngl 16`:
/// the output and 15 layers), on lavapipe gives the CPU's greedy answer (a
/// few tokens: lavapipe decodes at about 0.4 tok/s), on the device the plan
/// put its layers on; the peak RSS (which includes the device's memory and
/// the scratch it allocates at the first decode) is within 1.00-1.15 below
/// the plan's RAM peak. Mesa compiles lavapipe's pipelines with LLVM the
/// first time a machine runs them and keeps them in its shader cache
/// (`~/.cache/mesa_shader_cache`); that compile's memory, not the plan's,
/// put a cold run's peak at 605 MiB against 486 planned (a warm run's is
/// 461), so a first, unmeasured run fills the cache.
#[test]
fn every_layer_on_lavapipe_gives_the_cpu_s_answer() {
    let _gate = one_at_a_time();
    let m = crate::demo::instruct_model().display().to_string();
    let ask = |ngl: Option<&str>| -> Value {
        let sb = Sandbox::new();
        let mut c = sb.cmd([
            "run",
            &m,
            "--json",
            "-p",
            "What is the capital of France?",
            "-n",
            "7",
            "--temp",
            "0",
            "-ngl",
            ngl.unwrap_or("0"),
        ]);
        if ngl.is_some() {
            c.env("GGML_VK_VISIBLE_DEVICES", "0");
        } else {
            c.env_remove("GGML_VK_VISIBLE_DEVICES");
        }
        let out = c.output().expect("run starts");
        assert!(
            out.status.success(),
            "-ngl {ngl:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("run --json")
    };
    let cpu = ask(None);
    // Mesa's shader cache filled, whatever ran on lavapipe before.
    let warm = ask(Some("99"));
    assert_eq!(warm["text"], cpu["text"], "greedy text on lavapipe");
    assert!(
        cpu["text"].as_str().unwrap_or("").contains("Paris"),
        "{}",
        cpu["text"]
    );
    for (ngl, layers) in [("99", 30), ("16", 15)] {
        let vk = ask(Some(ngl));
        assert_eq!(
            vk["text"], cpu["text"],
            "greedy text with -ngl {ngl} on lavapipe"
        );
        let devices = vk["planned"]["devices"].as_array().expect("devices");
        let on_device = devices
            .iter()
            .find(|d| d["name"].as_str().is_some_and(|n| n.contains("llvmpipe")))
            .expect("a row for lavapipe");
        assert_eq!(on_device["n_layers"], layers, "{on_device}");
        let peak = vk["peak_rss_bytes"].as_u64().unwrap_or(0);
        let planned = vk["planned"]["ram_peak_bytes"].as_u64().unwrap_or(0);
        let ratio = planned as f64 / peak.max(1) as f64;
        println!(
            "lavapipe, -ngl {ngl}: decode {} tok/s (CPU {}), peak RSS {:.1} MiB, planned RAM peak {:.1} MiB (plan / peak {ratio:.3})",
            vk["decode_tokens_per_s"],
            cpu["decode_tokens_per_s"],
            peak as f64 / 1048576.0,
            planned as f64 / 1048576.0,
        );
        // The peak includes the device's memory (lavapipe's is this
        // process's): the plan bounds it, within 15%.
        assert!(
            (1.0..=1.15).contains(&ratio),
            "-ngl {ngl}: plan / peak RSS {ratio:.3} outside 1.00-1.15"
        );
    }
}

/// Every `llama_decode` of the program goes through the shim's guard
/// (`-Wl,--wrap=llama_decode`): a real decode in this process is counted
/// by it, and an exception thrown inside the guard (as Vulkan's
/// `vk::SystemError` would be from a buffer allocated at the first decode)
/// comes back as a code and one line, not an abort.
#[test]
fn decode_is_guarded_against_backend_exceptions() {
    let _gate = one_at_a_time();
    let (code, words) = llama::decode::self_test();
    assert_eq!(code, llama::decode::THREW);
    assert!(
        words.starts_with("llama.cpp threw: ") && words.contains("ErrorOutOfDeviceMemory"),
        "{words}"
    );
    let settings = headroom_planner::plan::Settings {
        n_ctx: Some(256),
        ..headroom_planner::plan::Settings::default()
    };
    let spec =
        llama::AccountingParams::from_settings(crate::demo::instruct_model(), &settings, 256, 0)
            .expect("params");
    let engine = headroom::runner::Engine::load(&spec, None).expect("the demo loads");
    let before = llama::decode::calls();
    let session = engine.session().expect("a session warms up with a decode");
    assert!(
        llama::decode::calls() > before,
        "the warm-up decode went through the guard ({before} calls before)"
    );
    drop(session);
}

/// Issue #21, item 6: lavapipe is in no GPU table, so its speed is
/// measured on it (`headroom probe-device`, in a child process, then
/// cached for the machine and build): with the variable set, a plan of the
/// instruct demo prices the device by that measurement (`speed_basis`
/// says `measured`), shows offloading as the slowdown it is, and keeps
/// every layer on the CPU unless `-ngl` forces them there; `hw` says what
/// the device is instead of asking for a card's name.
#[test]
fn lavapipe_is_measured_and_gets_no_layer_by_default() {
    let _gate = one_at_a_time();
    let sb = Sandbox::new();
    let with_lavapipe = |args: &[&str]| -> std::process::Output {
        let mut c = sb.cmd(args);
        c.env("GGML_VK_VISIBLE_DEVICES", "0");
        let out = c.output().expect("headroom starts");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    // The probe itself, measured afresh.
    let started = std::time::Instant::now();
    let probe = with_lavapipe(&["probe-device", "Vulkan0"]);
    let probe_s = started.elapsed().as_secs_f64();
    let probed: Value = serde_json::from_slice(&probe.stdout).expect("probe-device prints JSON");
    let bandwidth = probed["bandwidth_bytes_per_s"].as_u64().unwrap_or(0);
    assert!(bandwidth > 0, "{probed}");
    assert!(probed["per_node_ns"].as_u64().unwrap_or(0) > 0, "{probed}");

    let m = crate::demo::instruct_model().display().to_string();
    let plan = |extra: &[&str]| -> Value {
        let mut args = vec!["plan", m.as_str(), "--json"];
        args.extend(extra);
        serde_json::from_slice(&with_lavapipe(&args).stdout).expect("plan --json")
    };
    let auto = plan(&[]);
    let basis = &auto["speed_basis"]["gpus"][0];
    assert_eq!(basis["source"], "measured", "{basis}");
    assert!(
        basis["measured"]["bandwidth_bytes_per_s"].as_u64() > Some(0),
        "{basis}"
    );
    assert_eq!(auto["n_gpu_layers"], 0, "{}", auto["warnings"]);
    assert_eq!(auto["verdict"], "fits", "{}", auto["warnings"]);
    let warned = auto["warnings"]
        .as_array()
        .is_some_and(|w| w.iter().any(|w| w["code"] == "gpu_slower_than_cpu"));
    assert!(warned, "{}", auto["warnings"]);
    let cpu = auto["est_decode_tokens_per_s"].as_f64().unwrap_or(0.0);
    let full = auto["est_full_gpu_decode_tokens_per_s"]
        .as_f64()
        .unwrap_or(f64::MAX);
    assert!(
        full * 10.0 < cpu,
        "every layer on lavapipe: est. {full} tok/s, CPU {cpu}"
    );

    let forced = plan(&["-ngl", "99"]);
    assert_eq!(forced["n_gpu_layers"], 31, "{}", forced["warnings"]);
    assert_eq!(forced["speed_basis"]["gpus"][0]["source"], "measured");
    let on_device = forced["est_decode_tokens_per_s"]
        .as_f64()
        .unwrap_or(f64::MAX);
    assert!(
        on_device * 10.0 < cpu,
        "forced: est. {on_device} tok/s, CPU {cpu}"
    );

    let hw = String::from_utf8_lossy(&with_lavapipe(&["hw"]).stdout).into_owned();
    let line = hw
        .lines()
        .find(|l| l.contains("llvmpipe"))
        .unwrap_or_else(|| panic!("no lavapipe line in:\n{hw}"));
    assert!(
        line.contains("measured on this device") && !line.contains("--gpu"),
        "{line}"
    );
    println!(
        "lavapipe measured {:.2} GB/s, {} ns per node (probe {probe_s:.2} s); demo est. {cpu} tok/s on the CPU, {on_device} with every layer on lavapipe",
        bandwidth as f64 / 1e9,
        probed["per_node_ns"]
    );
}
