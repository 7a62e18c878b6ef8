//! A plan that does not fit is refused before any weight is read (exit 3, one
//! line, a suggestion), and the suggestion it makes really fits.
//!
//! "Before any weight is read" is checked on the bytes the process read:
//! the child is waited for with `waitid(WNOWAIT)`, which leaves it a zombie
//! whose `/proc/PID/io` still holds its totals, and only then reaped.

use std::fs::File;
use std::process::Stdio;

use headroom_planner::hw::format_size;

use crate::support::{MIB, Output, Sandbox, assert_one_line, model, u64_at};

/// The process may read its header and the machine's files, not the weights.
const MAX_READ: u64 = 16 * MIB;

/// Runs `headroom ARGS…` to completion and returns what it printed and the
/// bytes it read (`rchar` of `/proc/PID/io`, taken before it is reaped).
fn run_counting_reads(sb: &Sandbox, args: &[&str]) -> (Output, u64) {
    run_counting_reads_with(sb, args, &[])
}

/// [`run_counting_reads`] with environment variables set for the child.
fn run_counting_reads_with(sb: &Sandbox, args: &[&str], env: &[(&str, &str)]) -> (Output, u64) {
    let what = format!("headroom {args:?}");
    let out_path = sb.path().join("stdout");
    let err_path = sb.path().join("stderr");
    let file = |p: &std::path::Path| {
        File::create(p).unwrap_or_else(|e| panic!("creating {}: {e}", p.display()))
    };
    let mut cmd = sb.cmd(args);
    cmd.envs(env.iter().copied());
    cmd.stdout(Stdio::from(file(&out_path)))
        .stderr(Stdio::from(file(&err_path)));
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{what}: {e}"));
    let pid = child.id();
    // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waits for our own child; WNOWAIT leaves it unreaped.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid,
                &raw mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::Interrupted,
            "{what}: waitid: {e}"
        );
    }
    let io = std::fs::read_to_string(format!("/proc/{pid}/io"))
        .unwrap_or_else(|e| panic!("{what}: reading /proc/{pid}/io: {e}"));
    let rchar = io
        .lines()
        .find_map(|l| l.strip_prefix("rchar:"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{what}: no rchar in /proc/{pid}/io: {io}"));
    let status = child.wait().unwrap_or_else(|e| panic!("{what}: wait: {e}"));
    let read = |p: &std::path::Path| {
        std::fs::read(p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
    };
    let out = Output {
        code: status.code(),
        stdout: String::from_utf8(read(&out_path))
            .unwrap_or_else(|e| panic!("{what}: stdout is not UTF-8: {e}")),
        stderr: String::from_utf8_lossy(&read(&err_path)).into_owned(),
    };
    (out, rchar)
}

fn model_arg() -> String {
    model().display().to_string()
}

fn file_size() -> u64 {
    std::fs::metadata(model())
        .unwrap_or_else(|e| panic!("{}: {e}", model().display()))
        .len()
}

#[test]
fn a_tiny_budget_is_refused_without_reading_the_weights() {
    let sb = Sandbox::new();
    let m = model_arg();
    let (out, read) = run_counting_reads(&sb, &["run", &m, "--ram", "64MiB", "-p", "hi"]);
    assert_one_line(
        &out,
        3,
        "headroom: refused:",
        &[&format_size(64 * MIB)],
        "run --ram 64MiB",
    );
    assert!(
        out.stderr.contains("nearest plan that fits") || out.stderr.contains("fits either"),
        "neither a suggestion nor 'nothing fits': {}",
        out.stderr
    );
    eprintln!(
        "run --ram 64MiB read {} of a {} model",
        format_size(read),
        format_size(file_size())
    );
    assert!(
        read < MAX_READ && read < file_size() / 4,
        "the refused run read {} ({} model)",
        format_size(read),
        format_size(file_size())
    );
}

/// Every layer of the instruct demo on lavapipe (`Vulkan0`, 2 GiB) with a
/// context whose KV cache cannot fit there (16 sequences of 8192 tokens,
/// 3 GiB of cache): refused with exit 3 and the nearest plan before a
/// weight is read.
#[test]
fn an_over_specified_gpu_load_is_refused_without_reading_the_weights() {
    let sb = Sandbox::new();
    let m = crate::demo::instruct_model().display().to_string();
    let (out, read) = run_counting_reads_with(
        &sb,
        &[
            "run",
            &m,
            "-ngl",
            "99",
            "-c",
            "131072",
            "--parallel",
            "16",
            "-p",
            "hi",
            "-n",
            "2",
        ],
        &[("GGML_VK_VISIBLE_DEVICES", "0")],
    );
    assert_one_line(
        &out,
        3,
        "headroom: refused:",
        &["llvmpipe"],
        "run -ngl 99 on lavapipe",
    );
    assert!(
        out.stderr.contains("nearest plan that fits"),
        "no suggestion: {}",
        out.stderr
    );
    let size = std::fs::metadata(&m).map(|f| f.len()).unwrap_or(0);
    assert!(
        read < MAX_READ && read < size / 4,
        "the refused run read {} ({} model)",
        format_size(read),
        format_size(size)
    );
}

/// What the planner counts against RAM in `plan`'s JSON: resident anonymous
/// memory plus the margin.
fn need(p: &serde_json::Value) -> u64 {
    u64_at(p, "/ram/anonymous_bytes") + u64_at(p, "/devices/0/margin_bytes")
}

#[test]
fn the_suggested_plan_fits() {
    let sb = Sandbox::new();
    // The context run chooses when nothing fits (its default floor).
    let floor = sb.plan_json(&["--ram", "64MiB", "--vram", "0"], 3);
    let default_n = u64_at(&floor, "/n_ctx");
    let default_ctx = default_n.to_string();
    // A budget just below what the default context needs even with a
    // quantized KV cache (the first thing the guard tries), which a small
    // context fits: the suggestion must be a smaller context. Margins are
    // 128 MiB for any budget under 2.5 GiB, so the needs hold at `ram`.
    let q8 = ["-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"];
    let mut at_default_q8 = vec!["--ram", "1GiB", "--vram", "0", "-c", &default_ctx];
    at_default_q8.extend(q8);
    let ram = need(&sb.plan_json(&at_default_q8, 0)) - MIB;
    let ram_s = ram.to_string();
    let small = sb.plan_json(&["--ram", &ram_s, "--vram", "0", "-c", "256"], 0);
    assert!(need(&small) <= ram, "no smaller context fits {ram} bytes");
    let p = sb.plan_json(&["--ram", &ram_s, "--vram", "0"], 3);
    assert_eq!(u64_at(&p, "/n_ctx"), default_n, "the default context moved");

    let m = model_arg();
    let (out, read) = run_counting_reads(
        &sb,
        &["run", &m, "--ram", &ram_s, "--vram", "0", "-p", "hi"],
    );
    assert_one_line(
        &out,
        3,
        "headroom: refused:",
        &[&format_size(ram), "nearest plan that fits: "],
        "run --ram just below the default context",
    );
    assert!(read < MAX_READ, "read {}", format_size(read));
    let change = out
        .stderr
        .split("nearest plan that fits: ")
        .nth(1)
        .and_then(|rest| rest.split(" (").next())
        .unwrap_or_else(|| panic!("no suggestion in {}", out.stderr));
    eprintln!("--ram {}: {}", format_size(ram), out.stderr.trim_end());
    let flags: Vec<&str> = change.split_whitespace().collect();
    let n = flags
        .iter()
        .position(|f| *f == "-c")
        .and_then(|i| flags.get(i + 1))
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or_else(|| panic!("the suggestion {change:?} names no -c N"));
    assert!(
        u64::from(n) < default_n,
        "-c {n} is not smaller than {default_n}"
    );
    let mut check = vec!["--ram", &ram_s, "--vram", "0"];
    check.extend(&flags);
    let fits = sb.plan_json(&check, 0);
    assert_eq!(
        fits["verdict"], "fits",
        "plan {change} --ram {ram}: {fits:#}"
    );
    assert_eq!(u64_at(&fits, "/n_ctx"), u64::from(n));
}
