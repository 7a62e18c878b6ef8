//! After a run, `plan` with the same model and settings shows the last
//! measured peak next to its prediction (text: a `measured` line; JSON:
//! `last_run`), and only for those settings.

use headroom_planner::hw::format_size;

use crate::support::{Sandbox, one_at_a_time, u64_at};

/// The options both commands get: a pinned budget and no GPU, so that plan
/// and run plan the same thing on any machine.
const OPTS: [&str; 6] = ["-c", "1024", "--ram", "8GiB", "--vram", "0"];

/// `plan MODEL OPTS` as text.
fn plan_text(sb: &Sandbox) -> String {
    let m = crate::support::model().display().to_string();
    let mut args = vec!["plan", m.as_str()];
    args.extend(OPTS);
    sb.run(&args).ok("plan").stdout
}

#[test]
fn plan_shows_the_last_measured_peak_for_the_same_settings() {
    let _gate = one_at_a_time();
    let sb = Sandbox::new();
    let before = sb.plan_json(&OPTS, 0);
    assert!(
        before["last_run"].is_null(),
        "a fresh data directory has no last run: {}",
        before["last_run"]
    );
    assert!(
        !plan_text(&sb).lines().any(|l| l.starts_with("measured")),
        "a measured line before any run"
    );

    let mut args = vec!["--json", "--raw", "-p", "hi", "-n", "4", "--temp", "0"];
    args.extend(OPTS);
    let r = sb.run_model(&args).ok("run").json("run --json");
    let peak = u64_at(&r, "/peak_rss_bytes");

    let after = sb.plan_json(&OPTS, 0);
    let last = &after["last_run"];
    assert!(last.is_object(), "no last_run after a run: {after:#}");
    assert_eq!(u64_at(last, "/measured_peak_bytes"), peak);
    assert_eq!(
        u64_at(last, "/planned_peak_bytes"),
        u64_at(&after, "/ram/peak_bytes")
    );
    let text = plan_text(&sb);
    let line = text
        .lines()
        .find(|l| l.starts_with("measured"))
        .unwrap_or_else(|| panic!("no measured line in plan's text:\n{text}"));
    assert!(
        line.contains(&format_size(peak)),
        "the measured line does not show the peak {}: {line}",
        format_size(peak)
    );

    // Other settings are another calibration.
    for other in [&["-c", "2048"][..], &["--no-mmap"][..]] {
        let mut args = OPTS.to_vec();
        if other[0] == "-c" {
            args.drain(..2);
        }
        args.extend(other);
        let p = sb.plan_json(&args, 0);
        assert!(
            p["last_run"].is_null(),
            "plan {args:?} shows the -c 1024 run: {}",
            p["last_run"]
        );
    }
}
