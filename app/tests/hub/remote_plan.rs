//! Planning before downloading: `headroom plan org/repo:QUANT` reads only
//! the GGUF header over HTTP ranges, plans exactly what the local file would
//! plan, caches the header, and handles split models; `headroom catalog
//! refresh` records what it read as verified facts. Against the hub stand-in
//! on 127.0.0.1 serving the real demo model and sparse synthetic models.
//!
//! Run with `cargo test --release -p headroom --test hub remote_plan:: -- --nocapture`
//! (it prints the bytes each header-only plan read).

use crate::demo;
use crate::hf_server;
use crate::models;
use crate::sandbox;

use headroom::source::demo::{FILE_NAME, SHA256, SIZE};
use headroom_planner::synth::{Mix, Shape};
use hf_server::{Body, HfServer, RepoFile};
use sandbox::Sandbox;
use serde_json::Value;

const REPO: &str = "test-org/gemma-3-270m-GGUF";

fn real_repo() -> Vec<RepoFile> {
    vec![
        RepoFile::lfs(FILE_NAME, Body::File(demo::demo_model())).with_sha256(SHA256),
        RepoFile::git("README.md", b"# gemma-3-270m\n"),
    ]
}

/// The parts of two plans that must agree exactly.
fn core(plan: &Value) -> Value {
    serde_json::json!({
        "verdict": plan["verdict"],
        "quant": plan["quant"],
        "n_ctx": plan["n_ctx"],
        "n_gpu_layers": plan["n_gpu_layers"],
        "devices": plan["devices"],
        "ram": plan["ram"],
        "n_params": plan["model"]["n_params"],
        "architecture": plan["model"]["architecture"],
    })
}

#[test]
fn header_only_planning_reads_under_five_percent_and_plans_exactly() {
    let server = HfServer::builder().repo(REPO, real_repo()).start();
    let sb = Sandbox::new();
    let machine = ["--ram", "2GiB", "--vram", "0", "--json"];
    let model = format!("{REPO}:Q4_K_M");
    let mut args = vec!["plan", model.as_str()];
    args.extend(machine);
    let remote = sb.run(&server.url(), &args, &[]);
    assert_eq!(remote.code, Some(0), "{remote:?}");
    let served = server.bytes_served("");
    let file = server.bytes_served("/cdn/");
    println!(
        "header-only plan of {FILE_NAME}: {file} bytes of the file ({:.2}%), {served} bytes in all",
        100.0 * file as f64 / SIZE as f64
    );
    assert!(
        (served as f64) < 0.05 * SIZE as f64,
        "{served} bytes served"
    );
    for r in server.requests() {
        if r.target.starts_with("/cdn/") {
            assert!(
                r.header("range").is_some(),
                "only ranges of the file: {r:?}"
            );
        }
    }
    let local_path = demo::demo_model();
    let mut args = vec!["plan", local_path.to_str().expect("utf-8")];
    args.extend(machine);
    let local = sb.run(&server.url(), &args, &[]);
    assert_eq!(local.code, Some(0), "{local:?}");
    let (remote, local) = (remote.json(), local.json());
    assert_eq!(
        core(&remote),
        core(&local),
        "the same plan as the file on disk"
    );
    assert_eq!(remote["model"]["path"], model);
    let args: Vec<&str> = remote["llama_args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        args.windows(2).any(|w| w == ["-hf", model.as_str()]),
        "{args:?}"
    );

    // The header is cached: planning it again asks the hub nothing.
    server.clear_requests();
    let mut args = vec!["plan", model.as_str()];
    args.extend(machine);
    let again = sb.run(&server.url(), &args, &[]);
    assert_eq!(again.code, Some(0), "{again:?}");
    assert!(server.requests().is_empty(), "{:?}", server.requests());

    // Offline, too; and a model never seen fails clearly without a request.
    let offline = [("HF_HUB_OFFLINE", "1")];
    let cached = sb.run(&server.url(), &args, &offline);
    assert_eq!(core(&cached.json()), core(&again.json()));
    let empty = Sandbox::new();
    let none = empty.run(&server.url(), &["plan", &model], &offline);
    assert_eq!(none.code, Some(1), "{none:?}");
    assert!(
        none.error_line().contains("HF_HUB_OFFLINE"),
        "{}",
        none.stderr
    );
    assert!(server.requests().is_empty());
}

#[test]
fn split_models_are_planned_from_every_part_header() {
    let dir = tempfile::tempdir().expect("tempdir");
    let parts = models::sparse_split(dir.path(), "Llama-8B-Q8_0", Shape::Llama8B, Mix::Q8_0, 3);
    let total: u64 = parts
        .iter()
        .map(|p| std::fs::metadata(p).expect("part").len())
        .sum();
    let files: Vec<RepoFile> = parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let name = format!(
                "Llama-8B-Q8_0/{}",
                p.file_name().and_then(|n| n.to_str()).expect("name")
            );
            RepoFile::lfs(&name, Body::File(p.clone())).with_sha256(&models::fake_sha(i as u8))
        })
        .collect();
    let (whole, _) = models::sparse(dir.path(), "whole-Q8_0.gguf", Shape::Llama8B, Mix::Q8_0);
    let repo = "test-org/Llama-8B-GGUF";
    let server = HfServer::builder().repo(repo, files).start();
    let sb = Sandbox::new();
    let machine = ["--ram", "16GiB", "--vram", "0", "--json"];
    let model = format!("{repo}:q8_0");
    let mut args = vec!["plan", model.as_str()];
    args.extend(machine);
    let remote = sb.run(&server.url(), &args, &[]);
    assert_eq!(remote.code, Some(0), "{remote:?}");
    let served = server.bytes_served("");
    println!("header-only plan of a 3-part split model: {served} bytes of {total}");
    assert!((served as f64) < 0.05 * total as f64, "{served} of {total}");
    let parts_read: std::collections::BTreeSet<String> = server
        .requests()
        .iter()
        .filter(|r| r.target.contains("/resolve/"))
        .map(|r| r.target.clone())
        .collect();
    assert!(parts_read.len() >= 3, "every part's header: {parts_read:?}");

    let mut args = vec!["plan", whole.to_str().expect("utf-8")];
    args.extend(machine);
    let local = sb.run(&server.url(), &args, &[]);
    assert_eq!(local.code, Some(0), "{local:?}");
    let (remote, local) = (remote.json(), local.json());
    let weights = |p: &Value| p["devices"][0]["weights_bytes"].clone();
    assert_eq!(
        weights(&remote),
        weights(&local),
        "all parts' tensors are counted"
    );
    assert_eq!(remote["model"]["n_params"], local["model"]["n_params"]);
    assert_eq!(remote["verdict"], local["verdict"]);
    assert_eq!(remote["n_ctx"], local["n_ctx"]);
}

#[test]
fn catalog_refresh_records_what_it_read() {
    let server = HfServer::builder().repo(REPO, real_repo()).start();
    let sb = Sandbox::new();
    let run = sb.run(
        &server.url(),
        &["catalog", "refresh", &format!("{REPO}:Q4_K_M")],
        &[],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout.contains(&format!("✔ {REPO} Q4_K_M")),
        "{}",
        run.stdout
    );
    assert!((server.bytes_served("/cdn/") as f64) < 0.05 * SIZE as f64);
    let facts: Value = serde_json::from_str(
        &std::fs::read_to_string(sb.data_dir().join("catalog-verified.json")).expect("facts"),
    )
    .expect("JSON");
    let entries = facts["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 1, "{facts:#}");
    let e = &entries[0];
    assert_eq!(e["repo"], REPO);
    assert_eq!(e["files"][0], FILE_NAME);
    assert_eq!(e["size_bytes"], SIZE);
    assert_eq!(e["sha256"][0], SHA256);
    assert_eq!(e["commit"], server.commit());
    assert_eq!(e["gguf"]["general.architecture"], "gemma3");
    assert!(e["gguf"]["gemma3.block_count"].as_u64().is_some(), "{e:#}");
    assert!(
        e["n_params"].as_u64().is_some_and(|n| n > 200_000_000),
        "{e:#}"
    );

    let missing = sb.run(
        &server.url(),
        &["catalog", "refresh", &format!("{REPO}:Q8_0")],
        &[],
    );
    assert_eq!(missing.code, Some(1), "{missing:?}");
    assert!(missing.stdout.contains("✘"), "{}", missing.stdout);
    assert!(missing.error_line().contains("could not be verified"));
}

/// The catalog's own entry for the demo model, served by the stand-in hub:
/// `catalog refresh ID` reads it and records it under the entry's id.
#[test]
fn catalog_refresh_verifies_a_catalog_entry() {
    let server = HfServer::builder()
        .repo(headroom::source::demo::HF_REPO, real_repo())
        .start();
    let sb = Sandbox::new();
    let run = sb.run(&server.url(), &["catalog", "refresh", "gemma-3-270m"], &[]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout.contains("✔ gemma-3-270m Q4_K_M"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("note:"),
        "the listed size agrees: {}",
        run.stdout
    );
    let facts: Value = serde_json::from_str(
        &std::fs::read_to_string(sb.data_dir().join("catalog-verified.json")).expect("facts"),
    )
    .expect("JSON");
    let e = &facts["entries"][0];
    assert_eq!(e["id"], "gemma-3-270m");
    assert_eq!(e["quant"], "Q4_K_M");
    assert_eq!(e["size_bytes"], SIZE);

    // Catalog ids are model references for plan and pull too.
    let plan = sb.run(
        &server.url(),
        &[
            "plan",
            "gemma-3-270m:q4_k_m",
            "--json",
            "--ram",
            "2GiB",
            "--vram",
            "0",
        ],
        &[],
    );
    assert_eq!(plan.code, Some(0), "{plan:?}");
    assert_eq!(
        plan.json()["model"]["path"],
        format!("{}:Q4_K_M", headroom::source::demo::HF_REPO)
    );
    let pull = sb.run(
        &server.url(),
        &["pull", "gemma-3-270m", "--dry-run", "--json"],
        &[],
    );
    assert_eq!(pull.code, Some(0), "{pull:?}");
    assert_eq!(pull.json()["files"][0], FILE_NAME);

    // A catalog whose listed size is wrong gets a note, not a silent fix.
    let catalog = sb.dir.path().join("catalog.toml");
    std::fs::write(
        &catalog,
        format!(
            r#"[[model]]
id = "demo-misread"
name = "Demo, misread"
family = "Gemma 3"
params_b = 0.27
license = "gemma"
use = ["small"]
repo = "{repo}"
sources = ["a test"]

[model.arch]
architecture = "gemma3"

[[model.quant]]
name = "Q4_K_M"
file = "{FILE_NAME}"
size = "0.30 GB"
"#,
            repo = headroom::source::demo::HF_REPO
        ),
    )
    .expect("catalog");
    let catalog = catalog.to_str().expect("utf-8");
    let run = sb.run(
        &server.url(),
        &["catalog", "refresh", "demo-misread"],
        &[("HEADROOM_CATALOG", catalog)],
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout
            .contains("note: the catalog lists 300000000 bytes"),
        "{}",
        run.stdout
    );
}
