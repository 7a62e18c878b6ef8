//! `headroom plan` on the demo model: the JSON schema, exit codes, usage
//! errors, and llama.cpp's multi-letter short flags.

use serde_json::Value;

use crate::common::{GIB, arr_at, assert_one_line_error, f64_at, json, run, str_at, u64_at};

/// The demo model's path, as the binary resolves `demo` (cached, verified).
fn demo_path() -> String {
    match headroom::source::demo::demo_model() {
        Ok(p) => p.display().to_string(),
        Err(e) => panic!("the demo model is not available: {e:#}"),
    }
}

/// The value following `flag` in `llama_args`.
fn arg_after<'a>(plan: &'a Value, flag: &str) -> Option<&'a str> {
    let args = arr_at(plan, "/llama_args");
    let i = args.iter().position(|a| a.as_str() == Some(flag))?;
    args.get(i + 1).and_then(Value::as_str)
}

/// Every device row: the five parts add up to the total, and nothing is absurd.
fn check_devices(plan: &Value) {
    let devices = arr_at(plan, "/devices");
    assert!(!devices.is_empty(), "no devices");
    assert_eq!(str_at(plan, "/devices/0/kind"), "cpu", "RAM comes first");
    for (i, _) in devices.iter().enumerate() {
        let d = |f: &str| u64_at(plan, &format!("/devices/{i}/{f}"));
        assert!(!str_at(plan, &format!("/devices/{i}/name")).is_empty());
        assert!(!str_at(plan, &format!("/devices/{i}/kind")).is_empty());
        let parts = [
            "weights_bytes",
            "kv_bytes",
            "compute_bytes",
            "overhead_bytes",
            "margin_bytes",
        ]
        .map(d);
        assert_eq!(
            d("total_bytes"),
            parts.iter().sum::<u64>(),
            "device {i}: total is not the sum of its parts"
        );
        assert!(d("budget_bytes") > 0);
    }
}

/// Warnings are `{code, message}` objects with non-empty strings.
fn check_warnings(plan: &Value) {
    for (i, w) in arr_at(plan, "/warnings").iter().enumerate() {
        let obj = w
            .as_object()
            .unwrap_or_else(|| panic!("warning {i} is not an object: {w}"));
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["code", "message"], "warning {i}");
        assert!(!str_at(plan, &format!("/warnings/{i}/code")).is_empty());
        assert!(!str_at(plan, &format!("/warnings/{i}/message")).is_empty());
    }
}

#[test]
fn plan_json_on_the_demo_model_has_the_whole_schema() {
    let path = demo_path();
    let p = json(
        [
            "plan",
            "demo-base",
            "--ram",
            "8GiB",
            "--vram",
            "0",
            "--json",
        ],
        0,
    );

    assert_eq!(u64_at(&p, "/schema_version"), 1);
    assert_eq!(str_at(&p, "/headroom_version"), env!("CARGO_PKG_VERSION"));
    assert!(
        str_at(&p, "/llama_cpp").contains("llama"),
        "llama_cpp: {}",
        p["llama_cpp"]
    );
    assert_eq!(str_at(&p, "/model/path"), path);
    assert_eq!(str_at(&p, "/model/architecture"), "gemma3");
    let n_params = u64_at(&p, "/model/n_params");
    assert!(
        (265_000_000..272_000_000).contains(&n_params),
        "Gemma 3 270M has ~268M parameters, got {n_params}"
    );
    assert_eq!(
        u64_at(&p, "/model/file_bytes"),
        headroom::source::demo::SIZE
    );
    assert_eq!(u64_at(&p, "/model/file_bytes"), 253_113_024);
    assert_eq!(str_at(&p, "/verdict"), "fits");
    assert_eq!(str_at(&p, "/quant"), "Q4_K_M");
    assert_eq!(u64_at(&p, "/n_gpu_layers"), 0);
    let n_ctx = u64_at(&p, "/n_ctx");
    assert!(
        (4096..=32768).contains(&n_ctx),
        "n_ctx {n_ctx}: at least the 4096 default, at most the training context"
    );
    assert_eq!(u64_at(&p, "/n_parallel"), 1);
    for key in [
        "n_batch",
        "n_ubatch",
        "cache_type_k",
        "cache_type_v",
        "flash_attn",
        "swa_full",
        "mmap",
        "repack",
        "tensor_split",
    ] {
        assert!(p["settings"].get(key).is_some(), "settings.{key} missing");
    }

    check_devices(&p);
    assert_eq!(arr_at(&p, "/devices").len(), 1, "--vram 0: only the CPU");
    assert_eq!(u64_at(&p, "/devices/0/budget_bytes"), 8 * GIB);
    let weights = u64_at(&p, "/devices/0/weights_bytes");
    assert!(
        weights > 200_000_000 && weights < headroom::source::demo::SIZE,
        "weights {weights}"
    );
    assert!(u64_at(&p, "/devices/0/kv_bytes") > 0);

    assert_eq!(u64_at(&p, "/ram/budget_bytes"), 8 * GIB);
    let (peak, anon, mapped) = (
        u64_at(&p, "/ram/peak_bytes"),
        u64_at(&p, "/ram/anonymous_bytes"),
        u64_at(&p, "/ram/mapped_bytes"),
    );
    assert_eq!(peak, anon + mapped);
    assert!(mapped > 0, "weights are memory-mapped by default");
    assert!(
        anon + u64_at(&p, "/devices/0/margin_bytes") <= 8 * GIB,
        "verdict fits, so the RAM need is within budget"
    );

    let decode = f64_at(&p, "/est_decode_tokens_per_s");
    let prompt = f64_at(&p, "/est_prompt_tokens_per_s");
    assert!(decode > 0.0 && decode.is_finite(), "decode {decode}");
    assert!(prompt > 0.0 && prompt.is_finite(), "prompt {prompt}");
    assert!(
        prompt > decode,
        "prompt processing is batched, so faster than decoding"
    );
    check_warnings(&p);

    assert_eq!(arg_after(&p, "-m"), Some(path.as_str()));
    assert_eq!(arg_after(&p, "-c"), Some(n_ctx.to_string().as_str()));
    assert_eq!(arg_after(&p, "-ngl"), Some("0"));
    assert_eq!(arr_at(&p, "/alternatives").len(), 0);
}

#[test]
fn plan_text_agrees_with_plan_json() {
    let p = json(
        [
            "plan",
            "demo-base",
            "--ram",
            "8GiB",
            "--vram",
            "0",
            "--json",
        ],
        0,
    );
    let out = run(["plan", "demo-base", "--ram", "8GiB", "--vram", "0"]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(
        out.stderr.is_empty(),
        "a plan that fits prints nothing on stderr: {}",
        out.stderr
    );
    let verdict = out
        .stdout
        .lines()
        .find(|l| l.starts_with("verdict"))
        .unwrap_or_else(|| panic!("no verdict line:\n{}", out.stdout));
    assert!(
        verdict.contains("fits") && verdict.contains("Q4_K_M"),
        "{verdict}"
    );
    assert!(
        verdict.contains(&format!("context {}", u64_at(&p, "/n_ctx"))),
        "{verdict}"
    );
    // The demo path needs no shell quoting, so the command line is the args joined.
    let args: Vec<&str> = arr_at(&p, "/llama_args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let expected = format!("llama.cpp llama-server {}", args.join(" "));
    assert!(
        out.stdout.lines().any(|l| l == expected),
        "no line {expected:?} in:\n{}",
        out.stdout
    );
}

#[test]
fn a_plan_that_does_not_fit_exits_3() {
    let out = run(["plan", "demo-base", "--ram", "64MiB", "--vram", "0"]);
    assert_eq!(out.code, Some(3), "stderr: {}", out.stderr);
    assert!(out.stdout.contains("does not fit"), "{}", out.stdout);
    assert!(
        !out.stderr.contains("error"),
        "not fitting is a verdict, not an error: {}",
        out.stderr
    );

    let p = json(
        [
            "plan",
            "demo-base",
            "--ram",
            "64MiB",
            "--vram",
            "0",
            "--json",
        ],
        3,
    );
    assert_eq!(str_at(&p, "/verdict"), "does not fit");
    check_devices(&p);
    check_warnings(&p);
    let why = arr_at(&p, "/warnings")
        .iter()
        .find(|w| w["code"] == "does_not_fit")
        .unwrap_or_else(|| panic!("no does_not_fit warning: {}", p["warnings"]));
    let msg = why["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("RAM") && msg.contains("64.00 MiB"),
        "the reason names RAM and its budget: {msg}"
    );
}

#[test]
fn a_missing_model_is_a_one_line_error() {
    let out = run(["plan", "/nonexistent/model.gguf"]);
    assert_one_line_error(
        &out,
        1,
        &["/nonexistent/model.gguf", "no such file"],
        "missing model",
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let out = run([std::ffi::OsStr::new("plan"), dir.path().as_os_str()]);
    assert_one_line_error(&out, 1, &["no .gguf files"], "empty directory");
}

#[test]
fn bad_usage_exits_2() {
    // clap's own errors: several lines, exit 2.
    for args in [
        &["plan", "--ctx-size", "abc"][..],
        &["plan", "--flash-attn", "maybe", "demo-base"],
        &["plan", "--no-such-flag"],
        &["frobnicate"],
    ] {
        let out = run(args);
        assert_eq!(out.code, Some(2), "{args:?}: stderr {}", out.stderr);
        assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
        assert!(out.stderr.starts_with("error:"), "{args:?}: {}", out.stderr);
        assert!(!out.stderr.contains("panicked"));
    }
    // Values clap accepts but headroom refuses: one line, exit 2.
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["plan", "--cache-type-k", "q4_k", "demo-base"],
            &["--cache-type-k", "q4_k"],
        ),
        (
            &["plan", "--cache-type-v", "nonsense", "demo-base"],
            &["--cache-type-v", "nonsense"],
        ),
        (&["plan", "--ctx-size", "0", "demo-base"], &["--ctx-size"]),
        (
            &["plan", "--ubatch-size", "0", "demo-base"],
            &["--ubatch-size"],
        ),
        (&["plan", "--ram", "lots", "demo-base"], &["--ram", "lots"]),
        (
            &["plan", "--margin", "5XB", "demo-base"],
            &["--margin", "5XB"],
        ),
    ];
    for (args, needles) in cases {
        assert_one_line_error(&run(*args), 2, needles, &format!("{args:?}"));
    }
}

#[test]
fn llama_cpp_short_flags_reach_the_plan() {
    let p = json(
        [
            "plan",
            "demo-base",
            "--ram",
            "8GiB",
            "--vram",
            "0",
            "-ngl",
            "0",
            "-fa",
            "on",
            "-ctk",
            "q8_0",
            "-ctv",
            "q8_0",
            "-c",
            "8192",
            "-ub",
            "256",
            "-np",
            "2",
            "-b",
            "1024",
            "--json",
        ],
        0,
    );
    assert_eq!(u64_at(&p, "/n_ctx"), 8192);
    assert_eq!(u64_at(&p, "/n_parallel"), 2);
    assert_eq!(u64_at(&p, "/n_gpu_layers"), 0);
    assert_eq!(u64_at(&p, "/settings/n_ubatch"), 256);
    assert_eq!(u64_at(&p, "/settings/n_batch"), 1024);
    assert_eq!(str_at(&p, "/settings/cache_type_k"), "q8_0");
    assert_eq!(str_at(&p, "/settings/cache_type_v"), "q8_0");
    assert_eq!(p["settings"]["flash_attn"], true);
    for (flag, value) in [
        ("-c", "8192"),
        ("-ub", "256"),
        ("-b", "1024"),
        ("-np", "2"),
        ("-ngl", "0"),
        ("-fa", "on"),
        ("-ctk", "q8_0"),
        ("-ctv", "q8_0"),
    ] {
        assert_eq!(
            arg_after(&p, flag),
            Some(value),
            "llama_args {flag}: {}",
            p["llama_args"]
        );
    }

    // The `=` form, and flash attention off with a quantized K (llama.cpp
    // allows that: only a quantized V needs flash attention).
    let q = json(
        [
            "plan",
            "demo-base",
            "--ram",
            "8GiB",
            "--vram",
            "0",
            "-fa=off",
            "-ctk=q8_0",
            "-c",
            "4096",
            "--json",
        ],
        0,
    );
    assert_eq!(q["settings"]["flash_attn"], false);
    assert_eq!(str_at(&q, "/settings/cache_type_k"), "q8_0");
    assert_eq!(str_at(&q, "/settings/cache_type_v"), "f16");
    assert_eq!(arg_after(&q, "-fa"), Some("off"));
    assert!(
        u64_at(&q, "/devices/0/kv_bytes")
            < u64_at(
                &json(
                    [
                        "plan",
                        "demo-base",
                        "--ram",
                        "8GiB",
                        "--vram",
                        "0",
                        "-fa",
                        "off",
                        "-c",
                        "4096",
                        "--json"
                    ],
                    0
                ),
                "/devices/0/kv_bytes"
            ),
        "a q8_0 K cache is smaller than an f16 one"
    );
}

#[test]
fn flash_attention_off_with_a_quantized_v_cache_never_yields_a_plan_llama_cpp_refuses() {
    // llama.cpp (llama-context.cpp, llama_init_from_model) refuses a quantized
    // V cache when flash attention is explicitly disabled; it only turns it on
    // by itself under `-fa auto`. So headroom must either refuse the
    // combination as bad usage, or plan with flash attention on and say so in
    // the llama.cpp arguments — never hand back `-fa off -ctv q8_0`.
    let out = run([
        "plan",
        "demo-base",
        "--ram",
        "8GiB",
        "--vram",
        "0",
        "-ngl",
        "0",
        "-fa",
        "off",
        "-ctk",
        "q8_0",
        "-ctv",
        "q8_0",
        "-c",
        "8192",
        "-ub",
        "256",
        "--json",
    ]);
    match out.code {
        Some(0) => {
            let p: Value = serde_json::from_str(&out.stdout).expect("JSON");
            assert_eq!(u64_at(&p, "/n_ctx"), 8192);
            assert_eq!(u64_at(&p, "/settings/n_ubatch"), 256);
            assert_eq!(str_at(&p, "/settings/cache_type_v"), "q8_0");
            assert_eq!(p["settings"]["flash_attn"], true);
            assert_eq!(arg_after(&p, "-fa"), Some("on"));
        }
        Some(2) => assert_one_line_error(&out, 2, &["flash"], "-fa off -ctv q8_0"),
        other => panic!("-fa off -ctv q8_0: exit {other:?}, stderr {}", out.stderr),
    }
}

/// Runs `headroom ARGS…` with stdout a pipe whose reading end is already
/// closed, as in `headroom plan … | head -1` after `head` has exited.
#[allow(
    clippy::incompatible_msrv,
    reason = "std::io::pipe is 1.87; the workspace already needs 1.88 (let chains in planner/src/hw/overrides.rs)"
)]
fn run_into_closed_pipe(args: &[&str]) -> crate::common::Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let mut cmd = std::process::Command::new(crate::common::bin());
    cmd.args(args).stdout(writer);
    crate::common::output_of(cmd)
}

#[test]
fn a_closed_stdout_is_not_an_error_for_text() {
    let out = run_into_closed_pipe(&["plan", "demo-base", "--ram", "8GiB", "--vram", "0"]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(out.stderr.is_empty(), "{}", out.stderr);
}

#[test]
fn a_closed_stdout_is_not_an_error_for_json() {
    for args in [
        &[
            "plan",
            "demo-base",
            "--ram",
            "8GiB",
            "--vram",
            "0",
            "--json",
        ][..],
        &["hw", "--json"],
    ] {
        let out = run_into_closed_pipe(args);
        assert_eq!(out.code, Some(0), "{args:?}: stderr: {}", out.stderr);
        assert!(out.stderr.is_empty(), "{args:?}: {}", out.stderr);
    }
}

#[test]
fn vram_mixing_zero_with_sizes_is_bad_usage() {
    assert_one_line_error(
        &run(["plan", "demo-base", "--vram", "8GiB,0"]),
        2,
        &["--vram"],
        "--vram 8GiB,0",
    );
}

/// `--logits`: `batch` plans what llama.cpp's default reserves (a logits row
/// per token of the physical batch), `sequence` one row per sequence. On
/// the base demo (262k vocabulary) at `-ub 8 -np 2` the logits stage is
/// the CPU compute buffer's high-water mark either way, so the two plans
/// differ by exactly n_vocab × 4 × (n_ubatch − n_seq) bytes, and llama.cpp's
/// own accounting, asked for each setting, differs by that within 1%. At the
/// default `-ub 512` each plan is held to llama.cpp's figure for its own
/// setting (the compute bound of the accounting matrix, 15%), and the batch
/// one holds all 512 rows. Each plan names the llama.cpp tool whose buffers
/// it shows.
#[test]
fn logits_rows_per_sequence_or_per_batch_match_llama_cpp_s_own_figures() {
    let path = match headroom::source::demo::named("demo-base") {
        Some(Ok(p)) => p,
        other => panic!("the base demo model is not available: {other:?}"),
    };
    let n_vocab = headroom::source::load_profile(&path)
        .expect("the base demo's header")
        .n_vocab;
    let cpu_compute = |logits: &str, ub: &str, np: &str| -> (u64, u64, Value) {
        let ctx = [
            "-c",
            "4096",
            "-ub",
            ub,
            "--parallel",
            np,
            "--logits",
            logits,
        ];
        let mut plan_args = vec!["plan", "demo-base", "--vram", "0", "--json"];
        plan_args.extend(ctx);
        let p = json(&plan_args, 0);
        assert_eq!(str_at(&p, "/settings/logits"), logits);
        let mut acc_args = vec!["llama-accounting", "demo-base", "--json"];
        acc_args.extend(ctx);
        let a = json(&acc_args, 0);
        let llama: u64 = arr_at(&a, "/buffers")
            .iter()
            .filter(|b| b["name"].as_str().is_some_and(|n| n.starts_with("CPU")))
            .filter_map(|b| b["compute_bytes"].as_u64())
            .sum();
        (u64_at(&p, "/devices/0/compute_bytes"), llama, p)
    };
    // The exact difference, where the logits are the high-water mark.
    let (plan_seq, llama_seq, _) = cpu_compute("sequence", "8", "2");
    let (plan_batch, llama_batch, _) = cpu_compute("batch", "8", "2");
    let expected = n_vocab * 4 * (8 - 2);
    assert_eq!(plan_batch - plan_seq, expected, "the plan's difference");
    let llama_diff = llama_batch as f64 - llama_seq as f64;
    assert!(
        (llama_diff / expected as f64 - 1.0).abs() < 0.01,
        "llama.cpp's difference {llama_diff} against {expected}"
    );
    // The defaults: each setting against llama.cpp's own figure for it.
    for logits in ["sequence", "batch"] {
        let (plan, llama, p) = cpu_compute(logits, "512", "1");
        let ratio = plan as f64 / llama as f64;
        assert!(
            (0.85..=1.15).contains(&ratio),
            "--logits {logits}: planned {plan} B of CPU compute, llama.cpp {llama} B"
        );
        let rows = if logits == "batch" { 512 } else { 1 };
        assert!(plan >= n_vocab * 4 * rows && llama >= n_vocab * 4 * rows);
        let out = run([
            "plan",
            "demo-base",
            "--vram",
            "0",
            "-c",
            "4096",
            "--logits",
            logits,
        ]);
        let tool = if logits == "batch" {
            "llama-completion"
        } else {
            "llama-server"
        };
        let args: Vec<&str> = arr_at(&p, "/llama_args")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let expected = format!("llama.cpp {tool} {}", args.join(" "));
        assert!(
            out.stdout.lines().any(|l| l == expected),
            "no line {expected:?} in:\n{}",
            out.stdout
        );
    }
}
