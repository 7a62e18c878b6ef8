//! `headroom plan --curve`: the drawing's fixed parts, and that the context
//! where it says the model stops fitting agrees with `plan -c N` there.

use crate::common::{GIB, run, u64_at};

/// RAM the demo model needs at context `c` with a RAM budget of `ram` bytes
/// (which must hold it): what the planner counts against RAM, resident
/// anonymous memory plus the margin (which itself depends on the budget).
fn need(c: u32, ram: u64) -> u64 {
    let (p, code) = plan_at(c, ram);
    assert_eq!(code, Some(0), "-c {c} with {ram} bytes of RAM");
    u64_at(&p, "/ram/anonymous_bytes") + u64_at(&p, "/devices/0/margin_bytes")
}

/// `plan demo -c N --json` under a RAM budget: the plan and the exit code.
fn plan_at(c: u32, ram: u64) -> (serde_json::Value, Option<i32>) {
    let out = run([
        "plan",
        "demo-base",
        "--ram",
        &ram.to_string(),
        "--vram",
        "0",
        "-c",
        &c.to_string(),
        "--json",
    ]);
    let p: serde_json::Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("-c {c}: not JSON ({e}); stderr {}", out.stderr));
    (p, out.code)
}

/// The verdict of `plan -c N` under a RAM budget, and its exit code.
fn verdict_at(c: u32, ram: u64) -> (String, Option<i32>) {
    let (p, code) = plan_at(c, ram);
    (p["verdict"].as_str().unwrap_or_default().to_string(), code)
}

#[test]
fn curve_draws_axes_legend_and_limit() {
    let out = run([
        "plan",
        "demo-base",
        "--ram",
        "2GiB",
        "--vram",
        "0",
        "--curve",
    ]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let s = &out.stdout;
    assert!(s.contains("memory against context"), "{s}");
    let legend = s
        .lines()
        .find(|l| l.starts_with("legend"))
        .unwrap_or_else(|| panic!("no legend in:\n{s}"));
    assert!(legend.contains("R RAM (budget 2.00 GiB)"), "{legend}");
    let axis = s
        .lines()
        .find(|l| l.trim_end().ends_with("context") && l.contains("512"))
        .unwrap_or_else(|| panic!("no x axis in:\n{s}"));
    for label in ["512", "1k", "4k", "32k"] {
        assert!(
            axis.split_whitespace().any(|w| w == label),
            "x axis lacks {label}: {axis}"
        );
    }
    let limit = s
        .lines()
        .find(|l| l.starts_with("limit"))
        .unwrap_or_else(|| panic!("no limit line in:\n{s}"));
    assert!(
        limit.contains("fits up to the training context"),
        "2 GiB holds the demo model at 32k: {limit}"
    );
    assert!(
        s.lines().any(|l| l.contains('R') && l.contains('│')),
        "no RAM point drawn:\n{s}"
    );
    assert!(
        !s.lines().any(|l| l.contains('│') && l.contains('!')),
        "nothing is marked as not fitting:\n{s}"
    );
}

#[test]
fn curve_stops_fitting_where_plan_says_it_does_not_fit() {
    // Needs at the ends of the curve under a roomy budget below 2.5 GiB,
    // where the RAM margin is its 128 MiB floor for every budget tried here.
    let roomy = GIB;
    let lo = need(512, roomy);
    let hi = need(32768, roomy);
    assert!(
        hi > lo + 64 * 1024 * 1024,
        "the KV cache must grow with context: {lo} → {hi}"
    );
    let budget = lo + (hi - lo) / 2;
    assert_eq!(
        need(512, budget),
        lo,
        "the margin must not depend on the budget in this range"
    );

    let out = run([
        "plan",
        "demo-base",
        "--ram",
        &budget.to_string(),
        "--vram",
        "0",
        "--curve",
    ]);
    let s = &out.stdout;
    let limit = s
        .lines()
        .find(|l| l.starts_with("limit"))
        .unwrap_or_else(|| panic!("no limit line in:\n{s}\nstderr: {}", out.stderr));
    let first_bad: u32 = limit
        .strip_prefix("limit")
        .and_then(|r| r.trim().strip_prefix("does not fit from context "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("budget {budget} lies between the needs at 512 ({lo}) and 32768 ({hi}), yet: {limit}"));
    assert!(first_bad > 512 && first_bad <= 32768, "{limit}");
    assert!(
        first_bad.is_power_of_two(),
        "the curve samples powers of two: {limit}"
    );
    assert!(
        s.lines().any(|l| l.contains('│') && l.contains('!')),
        "contexts that do not fit are marked with '!':\n{s}"
    );

    assert_eq!(
        verdict_at(first_bad, budget),
        ("does not fit".to_string(), Some(3)),
        "plan -c {first_bad} under {budget} bytes"
    );
    assert_eq!(
        verdict_at(first_bad / 2, budget),
        ("fits".to_string(), Some(0)),
        "plan -c {} under {budget} bytes",
        first_bad / 2
    );
    assert_eq!(verdict_at(32768, budget).0, "does not fit");

    // The curve's own exit code is the default plan's.
    let default = run([
        "plan",
        "demo-base",
        "--ram",
        &budget.to_string(),
        "--vram",
        "0",
        "--json",
    ]);
    assert_eq!(out.code, default.code, "--curve changes the exit code");
}
