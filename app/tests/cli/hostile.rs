//! Hostile GGUF files through `headroom plan`: every one must end in exit 1
//! with one `headroom: error:` line naming the file and the problem, never a
//! panic or an abort, and without allocating more than a few MB.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{MIB, Output, assert_one_line_error, bin, hw_fixture, output_of};
use crate::corpus::{Tiny, corpus, whole, write};

/// Address-space cap for every run here: the control run (the demo model)
/// needs ~16 MiB, so a hostile file that makes the reader reserve memory in
/// proportion to a count it read fails loudly instead of slipping by.
const AS_LIMIT: u64 = 128 * MIB;
/// How much more than a normal plan a hostile file may make the process hold.
const RSS_SLACK_KB: u64 = 8 * 1024;

/// An executable that `scripts/setup.sh` installs: a test that needs it fails
/// without it rather than passing on a weaker check.
fn tool(name: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} is not installed (scripts/setup.sh installs it)"))
}

/// `headroom plan MODEL` on a fixed hardware profile (no probing, so runs
/// differ only by their model), capped at [`AS_LIMIT`] by `prlimit`, with its
/// peak RSS in KiB measured by GNU time.
fn measured_plan(model: &Path, time_out: &Path) -> (Output, u64) {
    let time = tool("time");
    // A stale number from the previous run must not stand in for this one's.
    let _ = std::fs::remove_file(time_out);
    let argv: Vec<std::ffi::OsString> = vec![
        time.into(),
        "-f".into(),
        "%M".into(),
        "-o".into(),
        time_out.into(),
        tool("prlimit").into(),
        format!("--as={AS_LIMIT}").into(),
        bin().into(),
        "plan".into(),
        model.into(),
        "--hw".into(),
        hw_fixture("gpu-8g-ram-16g.toml").into(),
        "--vram".into(),
        "0".into(),
    ];
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    let out = output_of(cmd);
    // GNU time writes "Command exited with non-zero status N" before the number.
    let text = std::fs::read_to_string(time_out).unwrap_or_default();
    let rss = text
        .lines()
        .rev()
        .find_map(|l| l.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no RSS in time output {text:?}"));
    (out, rss)
}

#[test]
fn the_tiny_control_model_plans() {
    // Every hostile case below is this model broken one way; it must itself be fine.
    let dir = tempfile::tempdir().expect("temp dir");
    let path = write(dir.path(), "tiny", &whole(&Tiny::default().header()));
    let out = crate::common::run([
        "plan".as_ref(),
        path.as_os_str(),
        "--ram".as_ref(),
        "1GiB".as_ref(),
        "--vram".as_ref(),
        "0".as_ref(),
        "--json".as_ref(),
    ]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let p: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(p["model"]["architecture"], "llama");
    assert_eq!(p["verdict"], "fits");
}

#[test]
fn hostile_files_fail_in_one_line_without_panics_or_big_allocations() {
    let dir = tempfile::tempdir().expect("temp dir");
    let time_out = dir.path().join("time.txt");
    let demo = headroom::source::demo::demo_model().unwrap_or_else(|e| panic!("demo model: {e:#}"));
    let (control, base_rss) = measured_plan(&demo, &time_out);
    assert_eq!(
        control.code,
        Some(0),
        "the control run (demo model, address space capped at {AS_LIMIT} bytes) failed: {}",
        control.stderr
    );
    println!("control run: max RSS {base_rss} KiB");

    let corpus = corpus();
    assert!(corpus.len() >= 30, "corpus shrank to {}", corpus.len());
    for (name, file, needles) in &corpus {
        let path = write(dir.path(), name, file);
        let (out, rss) = measured_plan(&path, &time_out);
        // Shown with --nocapture, to review the wording of every message.
        println!("{name}: rss {rss} KiB: {}", out.stderr.trim_end());
        let file_name = format!("{name}.gguf");
        let mut all: Vec<&str> = vec![&file_name];
        all.extend(needles.iter().map(String::as_str));
        assert_one_line_error(&out, 1, &all, name);
        assert!(
            rss < base_rss + RSS_SLACK_KB,
            "{name}: max RSS {rss} KiB, a normal plan needs {base_rss} KiB"
        );
    }
}
