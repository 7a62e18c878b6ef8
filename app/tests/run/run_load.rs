//! The runner's load path: the parameters it gives llama.cpp reproduce the
//! plan exactly (checked with llama.cpp's own accounting), and a load that
//! cannot get its memory fails with one line naming the allocation.

use crate::demo;
use demo::demo_model;

use std::os::unix::process::CommandExt;
use std::process::Command;

use headroom::llama::{AccountingParams, TensorOverride, breakdown};
use headroom::runner::load;
use headroom_planner::plan::Settings;
use headroom_planner::synth::{self, Mix, Shape};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_headroom")
}

/// `use_extra_bufts = false` cannot be set through llama-cpp-2, and a CPU
/// override is no substitute: llama.cpp re-selects the extra (repacking)
/// buffer types for tensors overridden to the CPU. So the runner refuses
/// `--no-repack` rather than run something else than the plan.
#[test]
fn no_repack_cannot_be_run_and_a_cpu_override_would_not_do_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("llama1b.gguf");
    synth::write_sparse(&path, Shape::Llama1B, Mix::Q4KM).expect("write synthetic model");
    let hw = headroom_planner::hw::probe(&headroom_planner::hw::ProbeOptions {
        measure_bandwidth: false,
        cache_dir: None,
    });
    let profile = headroom::source::load_profile(&path).expect("profile");
    let plan_with = |repack: bool| {
        let settings = Settings {
            n_ctx: Some(2048),
            repack,
            ..Settings::default()
        };
        let plan = headroom_planner::solve::plan(
            &profile,
            &path.display().to_string(),
            &settings,
            &hw,
            headroom_planner::solve::Build { gpu: false },
        );
        (plan, settings)
    };
    let (plan, settings) = plan_with(false);
    let err = load::spec_for(&plan, &settings, 2).expect_err("not executable");
    assert!(format!("{err}").contains("--no-repack"), "{err}");

    let (plan, settings) = plan_with(true);
    let spec = load::spec_for(&plan, &settings, 2).expect("executable plan");
    let repacking = breakdown(&spec).expect("accounting");
    assert!(repacking.get("CPU_REPACK").is_some_and(|r| r.model > 0));
    let overridden = breakdown(&AccountingParams {
        tensor_overrides: vec![TensorOverride {
            pattern: ".*".into(),
            buffer_type: "CPU".into(),
        }],
        ..spec.clone()
    })
    .expect("accounting with a CPU override");
    assert_eq!(
        overridden.buffers, repacking.buffers,
        "a CPU override still repacks"
    );
    let off = breakdown(&AccountingParams {
        use_extra_bufts: false,
        ..spec
    })
    .expect("accounting without extra buffer types");
    assert!(off.get("CPU_REPACK").is_none());
}

#[test]
fn n_cpu_moe_patterns_are_llama_cpps() {
    assert_eq!(
        load::expert_pattern(3),
        "blk\\.3\\.ffn_(up|down|gate|gate_up)_(ch|)exps"
    );
}

fn run_with_address_space(limit: u64, force: bool) -> std::process::Output {
    run_limited(libc::RLIMIT_AS, limit, force)
}

/// `headroom run` on the demo model at -c 32768 with one process limit set
/// (as `prlimit` would, in the child before exec).
fn run_limited(
    resource: libc::__rlimit_resource_t,
    limit: u64,
    force: bool,
) -> std::process::Output {
    let model = demo_model().display().to_string();
    let mut args = vec![
        "run", &model, "--raw", "-p", "hi", "-n", "2", "--temp", "0", "-c", "32768",
    ];
    if force {
        args.push("--force");
    }
    limited(&args, resource, limit)
}

/// The address space this build's llama.cpp backends take when they start
/// (Vulkan's loader and drivers), as `headroom hw --json` measures it: the
/// limits below are set that much higher, so that what they leave room for
/// is the same in every build.
fn runtime_address_space() -> u64 {
    let out = Command::new(bin())
        .args(["hw", "--json"])
        .output()
        .expect("hw runs");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("hw --json");
    v["ram"]["runtime_virtual_bytes"].as_u64().unwrap_or(0)
}

/// `headroom ARGS` under one process limit, with its own calibration log.
fn limited(args: &[&str], resource: libc::__rlimit_resource_t, limit: u64) -> std::process::Output {
    let data = tempfile::tempdir().expect("temp dir");
    let mut cmd = Command::new(bin());
    cmd.args(args).env("HEADROOM_DATA_DIR", data.path());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs in pre_exec.
    unsafe {
        cmd.pre_exec(move || {
            let rl = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(resource, &raw const rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().expect("spawn headroom")
}

/// Under either limit, `plan` itself says the model does not fit (exit 3),
/// naming the limit, and `run` refuses before loading; forced, the load
/// fails with one line naming the allocation, and nothing on stdout.
/// `RLIMIT_DATA` counts private writable mappings (Linux 4.7+), so
/// llama.cpp's buffers count against it like against `RLIMIT_AS`.
#[test]
fn plan_and_run_read_the_process_limits() {
    let model = demo_model().display().to_string();
    for (resource, name) in [
        (libc::RLIMIT_AS, "RLIMIT_AS"),
        (libc::RLIMIT_DATA, "RLIMIT_DATA"),
    ] {
        // RLIMIT_DATA counts no file mappings (the weights): 240 MiB keeps
        // the KV cache and compute buffers at -c 32768 from fitting. (Much
        // lower and a ggml context's own allocation aborts; 270 MiB leaves
        // OpenMP no room for its threads.)
        let limit = if name == "RLIMIT_AS" {
            (500u64 << 20) + runtime_address_space()
        } else {
            240 << 20
        };
        let plan = limited(&["plan", &model, "-c", "32768", "--json"], resource, limit);
        assert_eq!(plan.status.code(), Some(3), "{name}: {plan:?}");
        let v: serde_json::Value = serde_json::from_slice(&plan.stdout).expect("plan JSON");
        assert_eq!(v["verdict"], "does not fit", "{name}: {v}");
        let human = limited(&["plan", &model, "-c", "32768"], resource, limit);
        let text = String::from_utf8_lossy(&human.stdout);
        assert!(
            text.contains("does not fit") && text.contains(name),
            "{name}: {text}"
        );

        let refused = run_limited(resource, limit, false);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(3), "{name}: {stderr}");
        assert!(
            stderr.starts_with("headroom: refused:") && stderr.contains(name),
            "{stderr}"
        );
        assert!(refused.stdout.is_empty());

        let forced = run_limited(resource, limit, true);
        let stderr = String::from_utf8_lossy(&forced.stderr);
        assert_eq!(forced.status.code(), Some(1), "{name}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{name}: one line: {stderr}");
        assert!(stderr.starts_with("headroom: error:"), "{stderr}");
        assert!(
            stderr.contains("attempted to allocate") || stderr.contains("failed to allocate"),
            "{name}: {stderr}"
        );
        assert!(
            forced.stdout.is_empty(),
            "{name}: nothing half-written on stdout"
        );
        println!("{name} {} MiB: {}", limit >> 20, stderr.trim_end());
    }
}

/// 500 MiB of address space (beyond what the backends take to start) holds
/// the mapped model, the threads and the tokenizer, but not the KV cache
/// and compute buffers at -c 32768 (the KV
/// cache's 96 MiB allocation fails). (It was 700 MiB at -c 4096 while the
/// runner reserved logits for all 512 tokens of a batch: 525 MiB.)
#[test]
fn an_allocation_that_fails_is_named_with_its_size() {
    let limit = (500 << 20) + runtime_address_space();
    let refused = run_with_address_space(limit, false);
    assert_eq!(
        refused.status.code(),
        Some(3),
        "the planner counts RLIMIT_AS"
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.starts_with("headroom: refused:"), "{stderr}");
    assert!(stderr.contains("RLIMIT_AS"), "{stderr}");

    let forced = run_with_address_space(limit, true);
    let stderr = String::from_utf8_lossy(&forced.stderr);
    assert_eq!(forced.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("attempted to allocate") || stderr.contains("failed to allocate"),
        "{stderr}"
    );
    assert!(forced.stdout.is_empty());
}

/// Lowering `oom_score_adj` needs privileges: without them `run` stops with
/// one line saying so, before planning or loading anything. (As root the test
/// drops to `nobody` first.)
#[test]
fn lowering_the_oom_score_without_privileges_is_a_clear_error() {
    let mut cmd = Command::new(bin());
    cmd.args([
        "run",
        "--raw",
        "-p",
        "hi",
        "-n",
        "1",
        "--oom-score-adj",
        "-500",
    ])
    .env("HEADROOM_DATA_DIR", std::env::temp_dir());
    // SAFETY: getuid/setgid/setuid are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::getuid() == 0 && (libc::setgid(65534) != 0 || libc::setuid(65534) != 0) {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().expect("spawn headroom");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--oom-score-adj -500"), "{stderr}");
    assert!(stderr.contains("CAP_SYS_RESOURCE"), "{stderr}");
}

#[test]
fn out_of_range_oom_scores_are_bad_usage() {
    let out = Command::new(bin())
        .args(["run", "--raw", "-p", "hi", "--oom-score-adj", "1001"])
        .output()
        .expect("spawn headroom");
    assert_eq!(out.status.code(), Some(2));
}

/// At the plan's allocated total plus a margin of address space the run
/// completes: the limit the planner counts is the one that matters.
#[test]
fn the_plans_allocated_total_is_enough_address_space() {
    let model = demo_model().display().to_string();
    let plan = Command::new(bin())
        .args(["plan", &model, "-c", "32768", "--json"])
        .output()
        .expect("plan");
    let v: serde_json::Value = serde_json::from_slice(&plan.stdout).expect("plan json");
    let allocated = v["ram"]["allocated_bytes"]
        .as_u64()
        .expect("allocated_bytes");
    // Margin: the planner's own RAM margin floor (128 MiB).
    let out = run_with_address_space(allocated + (128 << 20), false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "limit {allocated}+128MiB: {stderr}"
    );
}
