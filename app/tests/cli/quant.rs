//! Choosing among quantizations of one model (`plan DIR`), on synthetic
//! Llama-3-8B files, and that planning a 16 GB file reads only its header.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use headroom_planner::synth::{self, Mix, Shape};
use serde_json::Value;

use crate::common::{GIB, MIB, arr_at, hw_fixture, json, output_of, str_at, u64_at};

/// A temporary directory with Llama-3-8B in each of `mixes` (sparse files,
/// so ~25 GB of model costs a few MB of disk). Each test writes its own: a
/// shared static would never be dropped, leaking the directory.
fn llama8b_dir(mixes: &[Mix]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for &mix in mixes {
        let name = format!("llama8b-{}.gguf", mix.name().to_lowercase());
        synth::write_sparse(&dir.path().join(&name), Shape::Llama8B, mix)
            .unwrap_or_else(|e| panic!("writing {name}: {e}"));
    }
    dir
}

const ALL_MIXES: [Mix; 3] = [Mix::Q4KM, Mix::Q8_0, Mix::F16];

fn f16_path(dir: &Path) -> PathBuf {
    dir.join(format!("llama8b-{}.gguf", Mix::F16.name().to_lowercase()))
}

/// `(quant, verdict)` of a plan.
fn quant_verdict(p: &Value) -> (&str, &str) {
    (str_at(p, "/quant"), str_at(p, "/verdict"))
}

#[test]
fn an_8_gb_gpu_gets_q4_k_m() {
    let tmp = llama8b_dir(&ALL_MIXES);
    let dir = tmp.path();
    let p = json(
        [
            "plan".as_ref(),
            dir.as_os_str(),
            "--json".as_ref(),
            "--hw".as_ref(),
            hw_fixture("gpu-8g-ram-16g.toml").as_os_str(),
        ],
        0,
    );
    assert_eq!(
        quant_verdict(&p),
        ("Q4_K_M", "fits"),
        "Q4_K_M (~4.6 GiB) fits whole on a 7.5 GiB GPU"
    );
    assert!(str_at(&p, "/model/path").ends_with("llama8b-q4_k_m.gguf"));
    assert_eq!(
        u64_at(&p, "/n_gpu_layers"),
        33,
        "all 32 layers and the output layer on the GPU"
    );
    let alts = arr_at(&p, "/alternatives");
    assert_eq!(alts.len(), 2);
    let mut quants: Vec<&str> = alts
        .iter()
        .map(|a| a["quant"].as_str().unwrap_or_default())
        .collect();
    quants.sort_unstable();
    assert_eq!(quants, ["F16", "Q8_0"]);
    for a in alts {
        assert_ne!(
            a["verdict"], "fits",
            "a higher-quality file that fits whole would have been chosen: {}",
            a["quant"]
        );
        assert_eq!(
            arr_at(a, "/alternatives").len(),
            0,
            "alternatives do not nest"
        );
    }
}

#[test]
fn a_24_gb_gpu_gets_the_best_quantization_that_fits() {
    let tmp = llama8b_dir(&ALL_MIXES);
    let dir = tmp.path();
    let p = json(
        [
            "plan".as_ref(),
            dir.as_os_str(),
            "--json".as_ref(),
            "--vram".as_ref(),
            "24GiB".as_ref(),
            "--ram".as_ref(),
            "32GiB".as_ref(),
        ],
        0,
    );
    let f16 = json(
        [
            "plan".as_ref(),
            f16_path(dir).as_os_str(),
            "--json".as_ref(),
            "--vram".as_ref(),
            "24GiB".as_ref(),
            "--ram".as_ref(),
            "32GiB".as_ref(),
        ],
        0,
    );
    assert_eq!(
        u64_at(&f16, "/model/file_bytes"),
        std::fs::metadata(f16_path(dir)).expect("metadata").len()
    );
    println!(
        "24 GiB GPU: F16 alone is {}; chose {:?}",
        f16["verdict"],
        quant_verdict(&p)
    );
    if f16["verdict"] == "fits" {
        assert_eq!(
            quant_verdict(&p),
            ("F16", "fits"),
            "F16 fits whole in 24 GiB, so it must be chosen"
        );
    } else {
        assert_eq!(
            quant_verdict(&p),
            ("Q8_0", "fits"),
            "F16 does not fit whole ({}), so Q8_0 must be chosen",
            f16["verdict"]
        );
    }
    assert_eq!(arr_at(&p, "/alternatives").len(), 2);
    assert!(
        arr_at(&p, "/alternatives")
            .iter()
            .any(|a| a["quant"] == "Q4_K_M" && a["verdict"] == "fits")
    );
    assert_eq!(
        arr_at(&p, "/devices").len(),
        2,
        "the CPU and the simulated 24 GiB GPU"
    );
    assert_eq!(u64_at(&p, "/devices/1/budget_bytes"), 24 * GIB);
}

/// Bytes the process read from `model`, from an strace log of
/// `openat`/`read`/`pread64`/`close` (single-threaded: no interleaved lines).
fn bytes_read_from(log: &str, model: &Path) -> u64 {
    let quoted = format!("\"{}\"", model.display());
    let mut fd: Option<String> = None;
    let mut total = 0u64;
    for line in log.lines() {
        let (call, ret) = match line.rsplit_once(" = ") {
            Some((c, r)) => (c, r.split_whitespace().next().unwrap_or("")),
            None => continue,
        };
        // With -f each line starts with the pid.
        let call = call
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .trim_start();
        if call.starts_with("openat(") && call.contains(&quoted) {
            fd = Some(ret.to_string());
        } else if let Some(f) = &fd {
            let on_fd = |name: &str| {
                call.strip_prefix(name)
                    .is_some_and(|r| r.split([',', ')']).next() == Some(f.as_str()))
            };
            if on_fd("read(") || on_fd("pread64(") {
                total += ret.parse::<u64>().unwrap_or(0);
            } else if on_fd("close(") {
                fd = None;
            } else if call.starts_with("mmap(")
                && call.split(',').nth(4).map(str::trim) == Some(f.as_str())
            {
                // mmap(addr, length, prot, flags, fd, offset)
                panic!("the model file was memory-mapped: {line}");
            }
        }
    }
    total
}

#[test]
fn strace_log_parsing_counts_reads_of_the_model_only() {
    let log = r#"12  openat(AT_FDCWD, "/m.gguf", O_RDONLY|O_CLOEXEC) = 3
12  read(3, "GGUF\3\0"..., 262144) = 262144
12  read(4, "x = 1", 10) = 5
12  pread64(3, "", 8, 0) = 8
12  close(3)                          = 0
12  openat(AT_FDCWD, "/other", O_RDONLY) = 3
12  read(3, "", 100) = 100
"#;
    assert_eq!(bytes_read_from(log, Path::new("/m.gguf")), 262_152);
}

#[test]
fn planning_a_16_gb_file_reads_only_its_header() {
    let tmp = llama8b_dir(&[Mix::F16]);
    let f16 = f16_path(tmp.path());
    let meta = std::fs::metadata(&f16).expect("metadata");
    assert!(
        meta.len() > 15_000_000_000,
        "F16 Llama-3-8B is ~16 GB, got {}",
        meta.len()
    );
    assert!(
        meta.blocks() * 512 < 64 * MIB,
        "the file is sparse: {} bytes on disk",
        meta.blocks() * 512
    );

    let profile = hw_fixture("gpu-8g-ram-16g.toml");
    let mut cmd = Command::new(crate::common::bin());
    cmd.args([
        "plan".as_ref(),
        f16.as_os_str(),
        "--json".as_ref(),
        "--hw".as_ref(),
        profile.as_os_str(),
    ]);
    let start = Instant::now();
    let out = output_of(cmd);
    let took = start.elapsed();
    // 16 GB of F16 weights on an 8 GiB GPU and 16 GiB of RAM: the layers that
    // miss the GPU stay mapped in RAM, so the plan fits with offload (exit 0),
    // planned from the header alone.
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(took < Duration::from_secs(2), "plan took {took:?}");

    let strace = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("strace"))
        .find(|p| p.is_file())
        .expect("strace is not installed (scripts/setup.sh installs it)");
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("strace.log");
    let mut cmd = Command::new(strace);
    cmd.args([
        "-f".as_ref(),
        "-qq".as_ref(),
        "-e".as_ref(),
        "trace=openat,read,pread64,mmap,close".as_ref(),
        "-o".as_ref(),
        log.as_os_str(),
    ]);
    cmd.arg(crate::common::bin());
    cmd.args([
        "plan".as_ref(),
        f16.as_os_str(),
        "--json".as_ref(),
        "--hw".as_ref(),
        profile.as_os_str(),
    ]);
    let traced = output_of(cmd);
    let text = std::fs::read_to_string(&log)
        .unwrap_or_else(|e| panic!("strace wrote no log ({e}): {}", traced.stderr.trim()));
    assert!(
        text.contains("openat("),
        "strace logged no system calls: {}",
        traced.stderr.trim()
    );
    assert_eq!(traced.code, out.code, "under strace: {}", traced.stderr);
    let header = headroom_planner::gguf::read_header_from_file(&f16)
        .expect("header")
        .data_offset;
    let read = bytes_read_from(&text, &f16);
    println!(
        "read {read} bytes of a {} byte file (header {header} bytes)",
        meta.len()
    );
    assert!(
        read >= header,
        "read {read} bytes, less than the {header} byte header: is the log parsed right?"
    );
    assert!(
        read <= header + 1024 * 1024,
        "read {read} bytes; the header is {header} bytes"
    );
}
