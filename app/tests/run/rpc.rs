//! `--rpc`: llama.cpp RPC workers (`ggml-rpc-server`, built from the same
//! llama.cpp by `scripts/llama-tools.sh`) as devices, on loopback only.
//!
//! - The plan per device against llama.cpp's own accounting with two workers
//!   connected (a `no_alloc` load sends no weights), for the shapes of the
//!   single-device accounting test, at `-ngl` 0, about half and all:
//!   weights, KV, compute and their total per device are held (1%, 2%, 15%,
//!   5%).
//! - An unreachable worker: one line naming it, exit 1, within 5 s.
//! - A real run split across two workers and the CPU: the same greedy text
//!   as the CPU alone.

use std::ffi::OsStr;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use headroom::llama::rpc;
use headroom_planner::hw::{self, Overrides, ProbeOptions, RpcDevice};

use crate::accounting_cases;
use crate::rpc_worker::Worker;
use crate::support::{Sandbox, bin, model, one_at_a_time};

const GIB: u64 = 1 << 30;

fn machine_with(devices: &[rpc::Device]) -> hw::HardwareSnapshot {
    let probed = hw::probe(&ProbeOptions {
        measure_bandwidth: false,
        cache_dir: None,
    });
    let base = hw::apply_overrides(
        probed,
        &Overrides {
            ram_bytes: Some(512 * GIB),
            vram_bytes: Some(vec![]),
            profile: None,
        },
    )
    .expect("overrides");
    hw::add_rpc_devices(base, &as_planned(devices))
}

/// Connected workers as the planner's devices, each with the memory
/// llama.cpp read from it.
pub fn as_planned(devices: &[rpc::Device]) -> Vec<RpcDevice> {
    devices
        .iter()
        .map(|d| RpcDevice {
            name: d.buffer_name.clone(),
            free_bytes: d.free_bytes,
            total_bytes: d.total_bytes,
            budget_bytes: None,
        })
        .collect()
}

/// Two workers connected in-process (in a child of this test binary: their
/// devices stay registered with ggml until the process ends, and a later
/// load here would reach them stopped); llama.cpp's `no_alloc` accounting
/// and the plan, per device, at `-ngl` 0, about half (an odd count, so the
/// two equal workers never tie on a layer) and all.
#[test]
fn plan_per_device_matches_llama_cpp_with_two_workers() {
    let _gate = one_at_a_time();
    if !crate::support::in_child(
        "rpc::plan_per_device_matches_llama_cpp_with_two_workers",
        &[],
    ) {
        return;
    }
    let workers = [Worker::start(None), Worker::start(None)];
    let endpoints: Vec<String> = workers.iter().map(|w| w.endpoint.clone()).collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let cases = accounting_cases::cases(dir.path(), model().to_path_buf());
    // The workers' free memory as llama.cpp reads it at each load.
    let (report, failures) = accounting_cases::per_device_matrix(&cases, || {
        machine_with(&rpc::connect(&endpoints).expect("workers connect"))
    });
    println!(
        "plan vs llama.cpp with two RPC workers (per device: layers, weights, KV, compute planned/llama.cpp):\n{}",
        report.join("\n")
    );
    assert!(
        failures.is_empty(),
        "{} comparisons out of tolerance:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A worker nobody listens for: one line naming it, exit 1, within 5 s;
/// and a non-loopback address without --rpc-trust-network is refused.
#[test]
fn an_unreachable_worker_is_one_line_and_exit_1() {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let demo = model();
    for cmd in ["plan", "run"] {
        let t = Instant::now();
        let out = Command::new(bin())
            .args([cmd, &demo.display().to_string(), "--rpc"])
            .arg(format!("127.0.0.1:{port}"))
            .args(if cmd == "run" {
                vec!["-p", "hi", "-n", "4"]
            } else {
                vec![]
            })
            .output()
            .expect("runs");
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{cmd}: {:?}",
            t.elapsed()
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cmd}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{cmd}: {err}");
        assert!(err.contains(&format!("127.0.0.1:{port}")), "{cmd}: {err}");
    }
    let out = Command::new(bin())
        .args([
            "plan",
            &demo.display().to_string(),
            "--rpc",
            "192.0.2.1:50052",
        ])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--rpc-trust-network"), "{err}");
}

/// `headroom run MODEL --json ARGS…` in a data directory of its own (its
/// calibration log stays out of the user's), expected to succeed.
fn run_json(model: &Path, args: &[&str]) -> serde_json::Value {
    let mut all: Vec<&OsStr> = vec!["run".as_ref(), model.as_os_str(), "--json".as_ref()];
    all.extend(args.iter().map(OsStr::new));
    Sandbox::new().run(all).ok("run").json("run --json")
}

/// The instruct demo model (Q4_1, which llama.cpp does not repack, so every
/// device runs the same kernels) split across two workers and the CPU: the
/// same greedy text as the CPU alone; and over a long prompt each worker's
/// peak RSS grows by no more than the plan's total for it (without the
/// margin), and by at least 1/1.15 of it.
#[test]
fn a_split_run_gives_the_cpu_s_text_and_the_planned_memory() {
    let _gate = one_at_a_time();
    let m = crate::demo::instruct_model();
    let ask = [
        "-p",
        "What is the capital of France?",
        "-n",
        "24",
        "--temp",
        "0",
    ];
    let cpu = run_json(m, &ask);
    let workers = [Worker::start(None), Worker::start(None)];
    let list = format!("{},{}", workers[0].endpoint, workers[1].endpoint);
    let split = run_json(m, &[&ask[..], &["--rpc", &list]].concat());
    assert_eq!(split["text"], cpu["text"], "greedy text across workers");
    assert!(split["text"].as_str().unwrap_or("").contains("Paris"));
    drop(workers);

    // Memory: fresh workers, and a prompt of five physical batches, so that
    // every buffer the plan counts is written: each of the scheduler's four
    // copies of a split's inputs (pipeline parallelism cycles through them
    // batch by batch) and a full batch's activations.
    let workers = [Worker::start(None), Worker::start(None)];
    let idle: Vec<u64> = workers.iter().map(Worker::peak_rss).collect();
    let list = format!("{},{}", workers[0].endpoint, workers[1].endpoint);
    let prompt = "The quick brown fox jumps over the lazy dog near the river bank. ".repeat(200);
    let long = run_json(
        m,
        &[
            "--rpc", &list, "-c", "4096", "-n", "8", "--temp", "0", "-p", &prompt,
        ],
    );
    let devices = long["planned"]["devices"].as_array().expect("devices");
    assert_eq!(devices.len(), 3, "CPU and two workers: {devices:?}");
    let mut lines = Vec::new();
    for (w, idle) in workers.iter().zip(&idle) {
        let d = devices
            .iter()
            .find(|d| d["name"].as_str().is_some_and(|n| n.contains(&w.endpoint)))
            .expect("a row per worker");
        assert!(d["n_layers"].as_u64().unwrap_or(0) > 0, "{d}");
        let planned =
            d["total_bytes"].as_u64().expect("total") - d["margin_bytes"].as_u64().expect("margin");
        let growth = w.peak_rss().saturating_sub(*idle);
        // What run --json says llama.cpp puts on the worker.
        let held = long["measured"]["llama_devices"]
            .as_array()
            .expect("llama_devices")
            .iter()
            .find(|r| r["name"] == d["name"])
            .and_then(|r| r["llama_bytes"].as_u64())
            .expect("llama.cpp's figure for the worker");
        assert!(held > 0);
        lines.push(format!(
            "{}: planned {:.1} MiB, llama.cpp {:.1} MiB, peak RSS grew {:.1} MiB",
            w.endpoint,
            planned as f64 / 1048576.0,
            held as f64 / 1048576.0,
            growth as f64 / 1048576.0
        ));
        assert!(growth <= planned, "{}", lines.join("; "));
        assert!(
            planned as f64 <= 1.15 * growth as f64,
            "{}",
            lines.join("; ")
        );
    }
    println!("{}", lines.join("\n"));
}

/// A worker killed mid-generation: one line naming the workers, a non-zero
/// exit within 10 s (llama.cpp aborts inside its RPC client; headroom's
/// abort handler turns that into the line and exit 1).
#[test]
fn a_worker_lost_mid_generation_is_one_line_and_a_non_zero_exit() {
    let _gate = one_at_a_time();
    let m = crate::demo::instruct_model();
    let mut workers = [Worker::start(None), Worker::start(None)];
    let list = format!("{},{}", workers[0].endpoint, workers[1].endpoint);
    let mut child = Command::new(bin())
        .arg("run")
        .arg(m)
        .args(["--rpc", &list])
        .args(crate::support::ENDLESS_GREEDY)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    // Wait for the first generated bytes: the load is done, decoding runs.
    let mut stdout = child.stdout.take().expect("stdout");
    let mut first = [0u8; 1];
    std::io::Read::read_exact(&mut stdout, &mut first).expect("generation starts");
    workers[1].kill();
    let t = Instant::now();
    let status = crate::support::wait_within(
        &mut child,
        Duration::from_secs(10),
        "run after its worker died",
    );
    assert!(t.elapsed() < Duration::from_secs(10));
    assert!(!status.success(), "{status}");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
        .expect("stderr");
    let lines: Vec<&str> = err.lines().filter(|l| !l.contains(": warning: ")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains(&workers[1].endpoint), "{err}");
    drop(stdout);
}

/// A worker under `prlimit --as` with the same budget given (`--rpc-mem`):
/// the over-specified plan is refused (exit 3) before any weight is sent,
/// the nearest plan it names (headroom's own layer count) loads and runs.
#[test]
fn a_capped_worker_refuses_the_over_specified_plan_and_runs_the_nearest() {
    let _gate = one_at_a_time();
    let m = crate::demo::instruct_model();
    let cap: u64 = 400 << 20;
    let workers = [Worker::start(Some(cap)), Worker::start(None)];
    let idle = workers[0].peak_rss();
    let list = format!("{},{}", workers[0].endpoint, workers[1].endpoint);
    let budgets = "100MiB,1GiB";
    let base = |extra: &[&str]| {
        let sb = Sandbox::new();
        let mut c = sb.cmd(["run"]);
        c.arg(m)
            .args(["--rpc", &list, "--rpc-mem", budgets])
            .args([
                "-p",
                "What is the capital of France?",
                "-n",
                "16",
                "--temp",
                "0",
            ])
            .args(extra);
        c.output().expect("runs")
    };
    let out = base(&["-ngl", "31"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&workers[0].endpoint) && err.contains("nearest plan"),
        "{err}"
    );
    // No weights: the plan's probe of the worker's memory may grow its
    // resident set by a few pages (64 KiB seen once in a full test run),
    // where one layer of the instruct demo is about 4 MB.
    let growth = workers[0].peak_rss().saturating_sub(idle);
    assert!(
        growth < 1 << 20,
        "the capped worker received no tensor: its peak grew {growth} bytes"
    );
    let out = base(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Paris"));
}
