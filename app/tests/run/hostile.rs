//! Hostile GGUF files through `headroom run` (issue #6): every case of the
//! corpus (`tests/cli/corpus.rs`) ends in exit 1 with one `headroom: error:`
//! line naming the file and the problem, and llama.cpp never sees the file.
//!
//! "Never sees" is read from llama.cpp's own log, which `-v` shows: its model
//! loader names itself on the first line it logs about a file. The tiny
//! control model and the demo model show that line, so its absence on a
//! hostile file means the file was refused before llama.cpp opened it.
//!
//! Last, the reason for the guards: on the cases built to trip llama.cpp's
//! `load_hparams` checks, llama.cpp itself kills the process (SIGABRT, or
//! SIGFPE for a division by zero) instead of returning an error.

use std::ffi::OsStr;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::Path;
use std::process::Command;

use crate::corpus::{Tiny, corpus, llama_cpp_aborts, whole, write};
use crate::support::{Output, Sandbox, assert_one_line, model, one_at_a_time, output_of};

/// What llama.cpp's loader logs (at `-v`) once it has opened a file
/// (`llama_model_loader: loaded meta data…`, `llama_model_load: error…`).
const LOADER: &str = "llama_model_load";

/// `headroom run FILE -p hi ARGS…` with a private data directory.
fn run_file(sb: &Sandbox, file: &Path, args: &[&str]) -> Output {
    let mut all: Vec<&OsStr> = vec![
        "run".as_ref(),
        file.as_os_str(),
        "-p".as_ref(),
        "hi".as_ref(),
    ];
    all.extend(args.iter().map(OsStr::new));
    sb.run(all)
}

#[test]
fn llama_cpp_logs_its_loader_at_verbose() {
    // Without this, "no loader line" below would hold for any file.
    let _gate = one_at_a_time();
    let sb = Sandbox::new();
    let out = run_file(&sb, model(), &["-n", "1", "-v"]);
    assert_eq!(out.code, Some(0), "demo model: {}", out.stderr);
    assert!(
        out.stderr.contains(LOADER),
        "the demo model at -v shows no {LOADER:?} line: {}",
        out.stderr
    );
    // The model every hostile case breaks reaches llama.cpp too.
    let tiny = write(sb.path(), "tiny", &whole(&Tiny::default().header()));
    let out = run_file(&sb, &tiny, &["-n", "1", "-v"]);
    assert!(
        out.stderr.contains(LOADER),
        "the tiny control model at -v shows no {LOADER:?} line (exit {:?}): {}",
        out.code,
        out.stderr
    );
}

/// The tiny model's made-up SPM vocabulary has no byte tokens, so llama.cpp's
/// tokenizer throws `std::out_of_range` on "hi" (`llama_vocab::byte_to_token`).
/// Through llama-cpp-2 that exception aborted the process (exit 134, "Rust
/// cannot catch foreign exceptions"); the shim turns it into one error line.
#[test]
fn a_tokenizer_that_throws_is_an_error_not_an_abort() {
    let _gate = one_at_a_time();
    let sb = Sandbox::new();
    let tiny = write(sb.path(), "tiny", &whole(&Tiny::default().header()));
    let out = run_file(&sb, &tiny, &["-n", "1"]);
    println!("{}", out.stderr.trim_end());
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    // headroom's own lines only (a warning that llama.cpp's accounting of
    // this odd model differs may come first): none of llama.cpp's log.
    assert!(
        out.stderr.lines().all(|l| l.starts_with("headroom: ")),
        "{}",
        out.stderr
    );
    let errors: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("headroom: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{}", out.stderr);
    assert!(
        errors[0].contains("tokenizer") && errors[0].contains("vocabulary"),
        "{}",
        errors[0]
    );
}

#[test]
fn hostile_files_are_refused_before_llama_cpp_sees_them() {
    let sb = Sandbox::new();
    let dir = tempfile::tempdir().expect("temp dir");
    let corpus = corpus();
    assert!(corpus.len() >= 45, "corpus shrank to {}", corpus.len());
    for (name, file, needles) in &corpus {
        let path = write(dir.path(), name, file);
        let file_name = format!("{name}.gguf");
        let mut all: Vec<&str> = vec![&file_name];
        all.extend(needles.iter().map(String::as_str));
        let out = run_file(&sb, &path, &[]);
        assert_one_line(&out, 1, "headroom: error:", &all, name);

        let out = run_file(&sb, &path, &["-v"]);
        assert_eq!(out.code, Some(1), "{name} -v: stderr: {}", out.stderr);
        assert!(
            !out.stderr.contains(LOADER),
            "{name}: llama.cpp opened the file: {}",
            out.stderr
        );
        let last = out.stderr.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("headroom: error:") && last.contains(&file_name),
            "{name} -v: the last line is not the error: {}",
            out.stderr
        );
    }
}

/// Set (to a GGUF path) for [`llama_cpp_loads_the_file_named_in_the_environment`].
const CHILD_MODEL: &str = "HEADROOM_TEST_LLAMA_CPP_LOADS";

/// Run in a child process by [`llama_cpp_itself_dies_on_what_the_profile_refuses`]:
/// llama.cpp's `no_alloc` accounting of the file named by [`CHILD_MODEL`],
/// bypassing the planner.
#[test]
#[ignore = "run in a child process by llama_cpp_itself_dies_on_what_the_profile_refuses"]
fn llama_cpp_loads_the_file_named_in_the_environment() {
    let Some(path) = std::env::var_os(CHILD_MODEL) else {
        eprintln!("{CHILD_MODEL} is not set: nothing to load");
        return;
    };
    let params = headroom::llama::AccountingParams::for_model(path);
    match headroom::llama::breakdown(&params) {
        Ok(b) => println!("llama.cpp accepted the file: {b:?}"),
        Err(e) => println!("llama.cpp refused the file: {e}"),
    }
}

/// Each case of [`llama_cpp_aborts`] and the `GGML_ASSERT` it trips in
/// `llama_model_base::load_hparams` (llama-model.cpp), or "" for a
/// division by zero (SIGFPE).
const TRIPS: [(&str, &str); 13] = [
    (
        "nextn-past-block-count",
        "n_layer_nextn <= hparams.n_layer_all",
    ),
    ("experts-2000", "n_expert <= LLAMA_MAX_EXPERTS"),
    (
        "experts-used-past-count",
        "n_expert_used_max <= hparams.n_expert",
    ),
    ("experts-used-zero", "n_expert_used_max > 0"),
    (
        "experts-used-per-layer-past-count",
        "n_expert_used_max <= hparams.n_expert",
    ),
    // Checked before llama.cpp's "no experts, none used" (1374).
    (
        "experts-used-without-experts",
        "n_expert_used_max <= hparams.n_expert",
    ),
    ("expert-groups-without-experts", "n_expert_groups == 0"),
    (
        "expert-groups-as-many-as-experts",
        "n_expert_groups < hparams.n_expert",
    ),
    (
        "expert-groups-not-dividing",
        "n_expert % hparams.n_expert_groups == 0",
    ),
    ("expert-groups-none-used", "n_group_used > 0"),
    (
        "expert-groups-all-used",
        "n_group_used < hparams.n_expert_groups",
    ),
    (
        "rope-scaling-unknown",
        "rope_scaling_type_train != LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED",
    ),
    // models/qwen3next.cpp: `(i + 1) % full_attn_interval`.
    ("full-attention-interval-zero", ""),
];

#[test]
fn llama_cpp_itself_dies_on_what_the_profile_refuses() {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = tempfile::tempdir().expect("temp dir");
    let child = |path: &Path| {
        let mut cmd = Command::new(&exe);
        cmd.args([
            "--exact",
            "hostile::llama_cpp_loads_the_file_named_in_the_environment",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_MODEL, path)
        // ggml's abort handler would otherwise attach gdb for a backtrace.
        .env("GGML_NO_BACKTRACE", "1");
        // SAFETY: setrlimit is async-signal-safe; no core files from the
        // crashes this test expects.
        unsafe {
            cmd.pre_exec(|| {
                let none = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                if libc::setrlimit(libc::RLIMIT_CORE, &raw const none) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd
    };

    // The control: llama.cpp loads the tiny model's header and says so.
    let tiny = write(dir.path(), "tiny", &whole(&Tiny::default().header()));
    let out = output_of(child(&tiny));
    assert!(
        out.code == Some(0) && out.stdout.contains("llama.cpp accepted the file"),
        "the tiny control model (exit {:?}): {}\n{}",
        out.code,
        out.stdout,
        out.stderr
    );

    let cases = llama_cpp_aborts();
    assert_eq!(
        cases.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(),
        TRIPS.iter().map(|t| t.0).collect::<Vec<_>>(),
        "every case says which llama.cpp check it trips"
    );
    for ((name, file, _), (_, trips)) in cases.iter().zip(TRIPS) {
        let path = write(dir.path(), name, file);
        let mut cmd = child(&path);
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let out = cmd.output().unwrap_or_else(|e| panic!("{name}: {e}"));
        let signal = out.status.signal();
        let expected = if trips.is_empty() {
            libc::SIGFPE
        } else {
            libc::SIGABRT
        };
        assert_eq!(
            signal,
            Some(expected),
            "{name}: llama.cpp did not die by signal {expected} ({:?}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        let assert_line = stderr.lines().find(|l| l.contains("GGML_ASSERT"));
        // Shown with --nocapture: which check each case trips.
        eprintln!("{name}: signal {expected}: {}", assert_line.unwrap_or("-"));
        if expected == libc::SIGABRT {
            assert!(
                assert_line.is_some_and(|l| l.contains(trips)),
                "{name}: aborted, but not by GGML_ASSERT({trips}): {stderr}"
            );
        }
    }
}
