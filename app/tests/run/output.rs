//! What `run` prints: the same text twice at `--temp 0` (and with a fixed
//! seed), the `--json` object field by field against `plan --json`, `--stop`,
//! the three ways in of a prompt agreeing with each other, and a thinking
//! template's reasoning kept apart from the answer.

use serde_json::Value;

use crate::support::{ENDLESS_GREEDY, Sandbox, as_printed, f64_at, one_at_a_time, str_at, u64_at};

const CATS: &str = "Tell me about cats.";

#[test]
fn greedy_and_seeded_runs_repeat_exactly() {
    let _gate = one_at_a_time();
    let sb = Sandbox::new();
    let cases: [(&str, &[&str]); 3] = [
        (
            "chat template, --temp 0",
            &["-p", CATS, "--temp", "0", "-n", "32", "-c", "2048"],
        ),
        (
            "--raw, --temp 0",
            &["--raw", "-p", CATS, "--temp", "0", "-n", "32", "-c", "2048"],
        ),
        (
            "--seed 42 --temp 0.8",
            &[
                "-p", CATS, "--seed", "42", "--temp", "0.8", "-n", "32", "-c", "2048",
            ],
        ),
    ];
    for (what, args) in cases {
        let a = sb.run_model(args).ok(what);
        let b = sb.run_model(args).ok(what);
        assert!(
            !a.stdout.trim().is_empty(),
            "{what}: nothing generated; stderr: {}",
            a.stderr
        );
        assert_eq!(a.stdout, b.stdout, "{what}: two runs differ");
    }
}

/// Fields of `run --json` (issue #3).
const FIELDS: [&str; 12] = [
    "text",
    "tokens_prompt",
    "tokens_generated",
    "prompt_tokens_per_s",
    "decode_tokens_per_s",
    "load_ms",
    "peak_rss_bytes",
    "planned",
    "measured",
    "stop_reason",
    "schema_version",
    "headroom_version",
];

#[test]
fn json_has_every_field_with_sane_values_and_matches_plan() {
    let _gate = one_at_a_time();
    let sb = Sandbox::new();
    // A pinned budget and no GPU: plan and run see the same machine.
    let opts = ["-c", "2048", "--ram", "8GiB", "--vram", "0"];
    let mut args = vec![
        "--raw",
        "-p",
        CATS,
        "--temp",
        "0",
        "--ignore-eos",
        "-n",
        "16",
    ];
    args.extend(opts);
    let text_run = sb.run_model(&args).ok("run");
    // The plan before the JSON run: each run adds to the calibration log,
    // so a plan after it would be calibrated from one more run.
    let p = sb.plan_json(&opts, 0);
    args.push("--json");
    let out = sb.run_model(&args).ok("run --json");
    let r = out.json("run --json");

    for f in FIELDS {
        assert!(r.get(f).is_some(), "run --json lacks {f}: {r:#}");
    }
    assert!(
        out.stdout.starts_with('{') && out.stdout.ends_with("}\n"),
        "stdout holds more than the JSON object: {:?}",
        out.stdout
    );
    let text = str_at(&r, "/text");
    assert!(!text.is_empty(), "no text: {r:#}");
    assert_eq!(
        as_printed(text),
        text_run.stdout,
        "--json text differs from what the text mode prints"
    );
    assert!(
        !out.stderr.contains(text),
        "the answer leaked to stderr: {}",
        out.stderr
    );
    assert!(u64_at(&r, "/tokens_prompt") > 0);
    assert_eq!(u64_at(&r, "/tokens_generated"), 16, "{r:#}");
    for f in ["/prompt_tokens_per_s", "/decode_tokens_per_s", "/load_ms"] {
        assert!(f64_at(&r, f) > 0.0, "{f} is not positive: {r:#}");
    }
    let peak = u64_at(&r, "/peak_rss_bytes");
    let after_load = u64_at(&r, "/measured/rss_after_load_bytes");
    assert!(
        after_load > 0 && peak >= after_load,
        "peak {peak} < after load {after_load}"
    );
    assert_eq!(
        u64_at(&r, "/planned/ram_peak_bytes"),
        u64_at(&p, "/ram/peak_bytes"),
        "planned peak differs from plan --json"
    );
    assert_eq!(
        r.pointer("/planned/devices"),
        p.pointer("/devices"),
        "planned devices differ from plan --json"
    );
    // What the speed estimate assumed (issue #14), as `plan --json` says it.
    let basis = r
        .pointer("/planned/speed_basis")
        .unwrap_or_else(|| panic!("planned lacks speed_basis: {r:#}"));
    assert_eq!(Some(basis), p.pointer("/speed_basis"));
    assert!(
        u64_at(&r, "/planned/speed_basis/ram/bytes_per_token") > 0,
        "no GPU: the CPU reads the weights: {basis:#}"
    );
    let vram = r
        .pointer("/measured/vram_used_bytes")
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("measured.vram_used_bytes is not an array: {r:#}"));
    assert!(
        vram.iter().all(Value::is_u64),
        "vram_used_bytes holds a non-integer: {vram:?}"
    );
    assert_eq!(str_at(&r, "/stop_reason"), "max_tokens");
    assert!(u64_at(&r, "/schema_version") >= 1);
    assert_eq!(str_at(&r, "/headroom_version"), env!("CARGO_PKG_VERSION"));
}

#[test]
fn stop_string_ends_the_answer_before_it() {
    let _gate = one_at_a_time();
    let sb = Sandbox::new();
    let base = ["--raw", "-p", CATS, "--temp", "0", "-n", "64", "-c", "2048"];
    let mut args = base.to_vec();
    args.push("--json");
    let full = sb.run_model(&args).ok("run --json").json("run --json");
    let text = str_at(&full, "/text").to_string();
    // A word of the greedy answer that does not start it.
    let (at, word) = text
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_ascii_alphabetic()))
        .filter(|w| w.len() >= 4 && w.chars().all(|c| c.is_ascii_alphabetic()))
        .find_map(|w| text.find(w).filter(|&i| i > 0).map(|i| (i, w.to_string())))
        .unwrap_or_else(|| panic!("no word to stop at in {text:?}"));
    let before = &text[..at];
    eprintln!("--stop {word:?} in {text:?}");

    args.extend(["--stop", word.as_str()]);
    let stopped = sb.run_model(&args).ok("run --stop --json").json("--stop");
    assert_eq!(
        str_at(&stopped, "/text"),
        before,
        "--stop {word:?}: the answer does not end right before it"
    );
    assert_eq!(str_at(&stopped, "/stop_reason"), "stop_string");
    assert!(u64_at(&stopped, "/tokens_generated") < 64);

    let mut plain = base.to_vec();
    plain.extend(["--stop", word.as_str()]);
    let printed = sb.run_model(&plain).ok("run --stop");
    assert_eq!(
        printed.stdout,
        as_printed(before),
        "--stop {word:?}, text mode"
    );
}

/// A template that thinks (it mentions `<think>`) and opens the reasoning
/// itself: what the model writes before `</think>` is reasoning, on stderr
/// and in `--json`'s `reasoning`; stdout and `text` keep the answer, here
/// none (the demo never closes the tag in 24 tokens).
#[test]
fn a_thinking_template_s_reasoning_goes_to_stderr_and_json_reasoning() {
    let _gate = one_at_a_time();
    let sb = Sandbox::new();
    let template = sb.path().join("think.jinja");
    std::fs::write(
        &template,
        "{%- for m in messages %}{{ m.role }}: {{ m.content }}\n\n{% endfor %}\
         {%- if add_generation_prompt %}assistant: <think>\n{% endif %}",
    )
    .expect("write the template");
    let t = template.to_str().expect("a UTF-8 path");
    let base = [
        "-p",
        CATS,
        "--temp",
        "0",
        "-n",
        "24",
        "--ignore-eos",
        "-c",
        "2048",
        "--chat-template",
        t,
    ];
    let mut args = base.to_vec();
    args.push("--json");
    let json = sb.run_model(&args).ok("run --json").json("run --json");
    let reasoning = str_at(&json, "/reasoning").to_string();
    assert!(!reasoning.trim().is_empty(), "no reasoning: {json}");
    assert!(!reasoning.contains("</think>"), "{reasoning:?}");
    assert_eq!(str_at(&json, "/text"), "", "the answer: {json}");
    let printed = sb.run_model(&base).ok("run");
    assert_eq!(printed.stdout.trim(), "", "stdout holds the answer only");
    assert!(
        printed.stderr.contains(reasoning.trim()),
        "stderr holds the reasoning {reasoning:?}: {}",
        printed.stderr
    );
    // Without a template that thinks, no `reasoning` field.
    let plain = sb
        .run_model(&["-p", CATS, "--temp", "0", "-n", "8", "-c", "2048", "--json"])
        .ok("run --json")
        .json("run --json");
    assert!(plain.get("reasoning").is_none(), "{plain}");
}

#[test]
fn prompt_from_stdin_file_and_flag_agree() {
    let _gate = one_at_a_time();
    let sb = Sandbox::new();
    let prompt = "The capital of France is";
    let args = ["--raw", "-n", "4", "--temp", "0", "-c", "512"];

    let mut with_p = args.to_vec();
    with_p.extend(["-p", prompt]);
    let flag = sb.run_model(&with_p).ok("-p");
    assert!(!flag.stdout.trim().is_empty(), "-p: nothing generated");

    let file = sb.path().join("prompt.txt");
    std::fs::write(&file, prompt).unwrap_or_else(|e| panic!("write {}: {e}", file.display()));
    let file_arg = file.display().to_string();
    let mut with_f = args.to_vec();
    with_f.extend(["-f", &file_arg]);
    let from_file = sb.run_model(&with_f).ok("-f");
    assert_eq!(from_file.stdout, flag.stdout, "-f FILE differs from -p");

    let mut cmd = sb.cmd(["run".as_ref(), crate::support::model().as_os_str()]);
    cmd.args(args).stdin(std::process::Stdio::piped());
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        stdin
            .write_all(prompt.as_bytes())
            .unwrap_or_else(|e| panic!("writing the prompt: {e}"));
        // Dropping stdin closes it: end of prompt.
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("waiting for {cmd:?}: {e}"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdin prompt: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        flag.stdout,
        "a prompt on stdin differs from -p"
    );
}

#[test]
fn a_full_context_stops_cleanly_and_says_so() {
    let _gate = one_at_a_time();
    let sb = Sandbox::new();
    let args = [&ENDLESS_GREEDY[..], &["-c", "256", "--json"]].concat();
    let out = sb.run_model(&args).ok("run -c 256");
    let r = out.json("run -c 256");
    assert_eq!(str_at(&r, "/stop_reason"), "context_full", "{r:#}");
    assert_eq!(
        u64_at(&r, "/tokens_prompt") + u64_at(&r, "/tokens_generated"),
        u64_at(&r, "/planned/n_ctx"),
        "the context was not filled: {r:#}"
    );
    assert!(
        out.stderr.contains("context is full"),
        "stderr does not say the context is full: {:?}",
        out.stderr
    );
}
