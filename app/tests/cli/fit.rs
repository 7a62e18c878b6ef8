//! `headroom fit` (issue #5): the acceptance machines, monotonicity in
//! memory, every listed fit within the plan's own verdict rule, agreement
//! with `headroom plan` on the same header written to a file, the filters,
//! and the catalog errors.

use std::path::Path;
use std::process::Command;

use headroom::catalog::Catalog;
use headroom::catalog::fit::{self, Query, fit_class};
use headroom::catalog::plan::resolve_arch;
use headroom_planner::plan::Verdict;
use headroom_planner::solve::Build;
use headroom_planner::synth::facts;
use headroom_planner::synth::mix::FileType;
use serde_json::Value;

const GIB: u64 = 1 << 30;

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// An empty data directory, so no verified facts of this machine leak in.
fn data_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("tempdir"))
        .path()
}

fn headroom<I: IntoIterator<Item = S>, S: AsRef<std::ffi::OsStr>>(args: I) -> Out {
    headroom_in(data_dir(), args)
}

fn headroom_in<I: IntoIterator<Item = S>, S: AsRef<std::ffi::OsStr>>(data: &Path, args: I) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(args)
        .env_remove("HEADROOM_CATALOG")
        .env_remove("RUST_LOG")
        .env("HEADROOM_DATA_DIR", data)
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .expect("headroom runs");
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `headroom fit --json ARGS…`, parsed. Every machine here is fully
/// specified, so the exit code is known: 0 when some model runs, 3 when none
/// does.
fn fit_json(args: &[&str]) -> Vec<Value> {
    let out = headroom(["fit", "--json"].iter().chain(args));
    let v: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("fit {args:?}: {e}: {:?} {}", out.code, out.stderr));
    let rows = v.as_array().expect("an array").clone();
    let expected = if rows.iter().any(runs) { 0 } else { 3 };
    assert_eq!(out.code, Some(expected), "fit {args:?}: {}", out.stderr);
    rows
}

fn params(r: &Value) -> f64 {
    r["n_params"].as_f64().expect("n_params")
}

fn runs(r: &Value) -> bool {
    r["verdict"] != "does not fit"
}

/// GPU devices of a plan and the layers on each.
fn gpu_layers(plan: &Value) -> Vec<u64> {
    plan["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .skip(1)
        .map(|d| d["n_layers"].as_u64().expect("n_layers"))
        .collect()
}

#[test]
fn json_rows_carry_the_issue_fields() {
    let rows = fit_json(&["--ram", "16GiB", "--vram", "8GiB", "--all"]);
    let cat = Catalog::builtin().expect("catalog");
    let chat = cat.entries().iter().filter(|e| e.has_use("chat")).count();
    assert_eq!(rows.len(), chat, "--all lists every chat model");
    for r in &rows {
        for key in [
            "id",
            "n_params",
            "quant",
            "verdict",
            "standing",
            "n_gpu_layers",
            "n_ctx",
            "est_decode_tokens_per_s",
            "download_bytes",
            "size_basis",
            "quality",
            "quality_basis",
            "quant_loss",
            "expected_quality",
            "release",
            "superseded_by",
            "also_as",
            "variant_of",
            "estimated",
            "plan",
        ] {
            assert!(r.get(key).is_some(), "{key} missing in {}", r["id"]);
        }
        if runs(r) {
            assert_eq!(
                r["plan"]["quant"].as_str(),
                Some(r["quant"].as_str().expect("quant")).map(|q| {
                    // The plan names the mix (Q4_K_M) even where the repo says Q4_K.
                    FileType::from_name(q).expect("mix").name()
                })
            );
            assert_eq!(r["plan"]["verdict"], r["verdict"]);
        } else {
            assert!(r["quant"].is_null() && r["plan"].is_null(), "{}", r["id"]);
        }
    }
}

#[test]
fn two_gib_and_no_gpu_fit_no_model_of_7b_or_more() {
    let rows = fit_json(&["--ram", "2GiB", "--vram", "0"]);
    let fitting: Vec<&Value> = rows.iter().filter(|r| runs(r)).collect();
    assert!(!fitting.is_empty(), "small models fit in 2 GiB");
    for r in &fitting {
        assert!(
            params(r) < 7e9,
            "{} ({:.2}B) fits in 2 GiB",
            r["id"],
            params(r) / 1e9
        );
    }
    // Those that fit are first.
    let first_miss = rows.iter().position(|r| !runs(r)).unwrap_or(rows.len());
    assert_eq!(first_miss, fitting.len());
}

/// The machines issue #20 names, as `fit` flags: a CPU-only 16 GB laptop,
/// 8, 16 and 24 GB desktop cards with 32-64 GB of RAM, a 64 GB Mac and a
/// 128 GB Strix Halo.
const COMMON_MACHINES: &[&[&str]] = &[
    &[
        "--hw",
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../assets/machines/laptop-16gb.toml"
        ),
    ],
    &["--ram", "32GiB", "--gpu", "rtx4060"],
    &["--ram", "64GiB", "--gpu", "RTX 4060 Ti 16GB"],
    &["--ram", "64GiB", "--gpu", "rtx3090"],
    &["--gpu", "M4 Max 64GB"],
    &["--gpu", "Ryzen AI Max+ 395 128GB"],
];

#[test]
fn on_common_machines_no_pick_under_the_floor_ranks_above_a_usable_one() {
    for machine in COMMON_MACHINES {
        for use_ in [&[][..], &["--use", "code"][..], &["--use", "reasoning"][..]] {
            let args = [*machine, use_].concat();
            let rows = fit_json(&args);
            let standing = |r: &Value| r["standing"].as_str().expect("standing").to_string();
            let first_not_usable = rows.iter().position(|r| standing(r) != "usable");
            if let Some(i) = first_not_usable {
                assert!(
                    rows[i..].iter().all(|r| standing(r) != "usable"),
                    "{args:?}: a usable row after {}",
                    rows[i]["id"]
                );
            }
            let usable: Vec<&Value> = rows.iter().filter(|r| standing(r) == "usable").collect();
            // Something chats at 10 tok/s on each of them (code's 20 tok/s
            // may be out of a CPU's reach).
            assert!(
                !usable.is_empty() || !use_.is_empty(),
                "{args:?}: nothing usable"
            );
            // Usable rows with a quality figure go best first.
            let q: Vec<f64> = usable
                .iter()
                .filter_map(|r| r["expected_quality"].as_f64())
                .collect();
            assert!(q.windows(2).all(|w| w[0] >= w[1]), "{args:?}: {q:?}");
            let floor = rows[0]["min_speed"].as_f64().expect("floor");
            for r in &usable {
                assert!(r["est_decode_tokens_per_s"].as_f64().expect("speed") >= floor);
            }
        }
    }
}

#[test]
fn an_8_gb_card_with_32_gb_of_ram_puts_a_moe_with_experts_in_ram_in_the_top_three() {
    let rows = fit_json(&["--ram", "32GiB", "--gpu", "rtx4060"]);
    let moe = rows[..3].iter().find(|r| {
        r["n_params_active"].as_f64() < r["n_params"].as_f64()
            && r["plan"]["n_cpu_moe"].as_u64().is_some_and(|n| n > 0)
    });
    assert!(
        moe.is_some(),
        "top three: {:?}",
        rows[..3]
            .iter()
            .map(|r| (r["id"].clone(), r["why"].clone()))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_superseded_model_is_hidden_when_its_successor_is_usable_and_listed_with_all() {
    let cat = Catalog::builtin().expect("catalog");
    let machine = ["--ram", "64GiB", "--gpu", "rtx3090"];
    let shown = fit_json(&machine);
    let all = fit_json(&[&machine[..], &["--all"]].concat());
    let usable = |rows: &[Value], id: &str| {
        rows.iter()
            .any(|r| r["id"] == id && r["standing"] == "usable")
    };
    let mut checked = 0;
    for e in cat.entries() {
        for old in &e.supersedes {
            if usable(&all, &e.id) {
                checked += 1;
                assert!(
                    shown.iter().all(|r| r["id"] != old.as_str()),
                    "{old} shown though {} is usable",
                    e.id
                );
                let row = all.iter().find(|r| r["id"] == old.as_str()).expect("--all");
                assert!(
                    row["superseded_by"]
                        .as_array()
                        .expect("superseded_by")
                        .iter()
                        .any(|s| s == e.id.as_str()),
                    "{old}: {}",
                    row["superseded_by"]
                );
            }
        }
    }
    assert!(checked > 0, "no supersession was exercised on {machine:?}");
}

#[test]
fn code_and_reasoning_get_the_context_their_use_needs_or_say_what_it_costs() {
    for (use_, want) in [("code", 32_768u64), ("reasoning", 16_384)] {
        let rows = fit_json(&["--ram", "64GiB", "--gpu", "rtx3090", "--use", use_]);
        for r in rows.iter().filter(|r| runs(r)) {
            let max = r["n_ctx_max"].as_u64().expect("max");
            let ctx = r["n_ctx"].as_u64().expect("ctx");
            let why = r["why"].as_str().expect("why");
            assert!(
                ctx >= want.min(max) || why.contains("kept"),
                "{use_} {}: context {ctx} of {max}: {why}",
                r["id"]
            );
        }
    }
}

#[test]
fn a_70b_at_q4_k_m_fits_across_two_24_gib_gpus() {
    let rows = fit_json(&["--ram", "64GiB", "--vram", "24GiB,24GiB"]);
    let seventy = rows
        .iter()
        .find(|r| params(r) >= 65e9 && r["quant"] == "Q4_K_M" && r["verdict"] == "fits")
        .expect("a 70B at Q4_K_M fits");
    let layers = gpu_layers(&seventy["plan"]);
    assert_eq!(layers.len(), 2, "two GPUs");
    assert!(
        layers.iter().all(|&n| n > 0),
        "both GPUs hold layers: {layers:?}"
    );
    let devices = seventy["plan"]["devices"].as_array().expect("devices");
    assert_eq!(devices[0]["n_layers"], 0, "nothing left on the CPU");
}

/// Per model: standing (0 usable, 1 too slow, 2 does not run) and the
/// merit of its pick (expected quality, or bits per weight without a
/// quality figure) on one machine.
fn picks(cat: &Catalog, ram: u64, vram: &[u64]) -> Vec<(String, u8, Option<f64>)> {
    let hw = fit::machine(ram, vram).expect("machine");
    let q = Query {
        all: true,
        ..Query::default()
    };
    let rows = fit::rank(cat, &hw, Build { gpu: true }, &q).expect("ranks");
    rows.into_iter()
        .map(|r| {
            let merit = r.expected_quality.or_else(|| {
                r.quant
                    .as_deref()
                    .and_then(FileType::from_name)
                    .map(|f| f.default_type().bits_per_weight())
            });
            let standing = match r.standing {
                fit::Standing::Usable => 0,
                fit::Standing::TooSlow => 1,
                fit::Standing::DoesNotRun => 2,
            };
            (r.id, standing, merit)
        })
        .collect()
}

#[test]
fn more_memory_never_gives_a_worse_pick() {
    let cat = Catalog::builtin().expect("catalog");
    let rams = [2, 4, 8, 16, 32, 64, 128].map(|g| g * GIB);
    // GPU counts are compared apart: a first GPU changes the device list.
    let gpu_sets: [&[u64]; 5] = [&[], &[4 * GIB], &[8 * GIB], &[24 * GIB], &[80 * GIB]];
    let mut grid = Vec::new();
    for (gi, vram) in gpu_sets.iter().enumerate() {
        for (ri, &ram) in rams.iter().enumerate() {
            grid.push(((gi, ri), picks(&cat, ram, vram)));
        }
    }
    let at = |gi: usize, ri: usize| &grid.iter().find(|(k, _)| *k == (gi, ri)).expect("cell").1;
    let mut violations = Vec::new();
    for gi in 0..gpu_sets.len() {
        for ri in 0..rams.len() {
            let here = at(gi, ri);
            let mut more = vec![(gi, ri + 1)];
            if gi > 0 {
                more.push((gi + 1, ri));
            }
            for (g2, r2) in more {
                if r2 >= rams.len() || g2 >= gpu_sets.len() {
                    continue;
                }
                for (id, standing, merit) in here {
                    let (_, s2, m2) = at(g2, r2)
                        .iter()
                        .find(|(i, _, _)| i == id)
                        .expect("same models");
                    if s2 > standing {
                        violations.push(format!(
                            "{id}: standing {standing} → {s2} ({gi},{ri})→({g2},{r2})"
                        ));
                    }
                    if *standing == 0 && *s2 == 0 && m2 < merit {
                        violations
                            .push(format!("{id}: {merit:?} → {m2:?} ({gi},{ri})→({g2},{r2})"));
                    }
                }
                // The machine's best pick never gets worse either.
                let top = |rows: &[(String, u8, Option<f64>)]| {
                    rows.iter()
                        .filter(|r| r.1 == 0)
                        .filter_map(|r| r.2)
                        .fold(None, |a: Option<f64>, m| Some(a.map_or(m, |a| a.max(m))))
                };
                if top(at(g2, r2)) < top(here) {
                    violations.push(format!("best pick worse ({gi},{ri})→({g2},{r2})"));
                }
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn nothing_listed_as_fitting_breaks_the_plan_s_verdict_rule() {
    for args in [
        ["--ram", "2GiB", "--vram", "0"],
        ["--ram", "16GiB", "--vram", "8GiB"],
        ["--ram", "64GiB", "--vram", "24GiB,24GiB"],
        ["--ram", "32GiB", "--vram", "0"],
    ] {
        for r in fit_json(&args).iter().filter(|r| runs(r)) {
            let p = &r["plan"];
            let id = &r["id"];
            let devices = p["devices"].as_array().expect("devices");
            for d in &devices[1..] {
                assert!(
                    d["total_bytes"].as_u64() <= d["budget_bytes"].as_u64(),
                    "{id} {args:?}: {} over budget",
                    d["name"]
                );
            }
            let ram = &p["ram"];
            let margin = devices[0]["margin_bytes"].as_u64().expect("margin");
            let budget = ram["budget_bytes"].as_u64().expect("budget");
            let anon = ram["anonymous_bytes"].as_u64().expect("anon");
            assert!(anon + margin <= budget, "{id} {args:?}: RAM over budget");
            // fit's own rule on top: the weights read on every token stay in
            // RAM (the plan warns `pages_from_disk` when they would not).
            assert!(
                p["warnings"]
                    .as_array()
                    .expect("warnings")
                    .iter()
                    .all(|w| w["code"] != "pages_from_disk"),
                "{id} {args:?}: pages from disk"
            );
            let all = devices
                .iter()
                .map(|d| d["n_layers"].as_u64().unwrap_or(0))
                .sum::<u64>();
            let on_gpu = gpu_layers(p).iter().sum::<u64>();
            match r["verdict"].as_str() {
                Some("fits") => assert!(devices.len() == 1 || on_gpu == all, "{id}"),
                Some("fits with offload") => {
                    assert!(on_gpu < all || p["n_cpu_moe"].as_u64() > Some(0), "{id}")
                }
                v => panic!("{id}: verdict {v:?}"),
            }
        }
    }
}

#[test]
fn fit_plans_what_plan_plans_from_the_same_header_on_disk() {
    let cat = Catalog::builtin().expect("catalog");
    let dir = tempfile::tempdir().expect("tempdir");
    // fit plans every file at one context (4096, `-c` replaces it) where
    // plan grows it while it is free: the same context makes the same plan.
    let machine = ["--ram", "16GiB", "--vram", "8GiB", "-c", "4096"];
    for (id, quant) in [
        ("llama-3.1-8b-instruct", "Q4_K_M"),
        ("qwen3-30b-a3b", "Q4_K_M"),
        ("gemma-2-9b-it", "Q6_K"),
        ("gpt-oss-20b", "MXFP4"),
        ("deepseek-v2-lite", "Q8_0"),
        ("qwen2.5-32b-instruct", "Q3_K_M"),
    ] {
        let e = cat.get(id).expect("entry");
        let q = e.quant(quant).expect("quant");
        let arch = resolve_arch(&cat, e).expect("arch");
        let header = facts::header(&arch.facts, q.file_type).expect("header");
        let path = dir.path().join(format!("{id}-{quant}.gguf"));
        headroom_planner::gguf::writer::create_sparse_file(&path, &header).expect("write");
        let planned = headroom(
            ["plan".as_ref(), path.as_os_str(), "--json".as_ref()]
                .into_iter()
                .chain(machine.iter().map(|s| std::ffi::OsStr::new(*s))),
        );
        let from_file: Value = serde_json::from_str(&planned.stdout).expect("plan JSON");
        let fits = from_file["verdict"] != "does not fit";
        assert_eq!(
            planned.code,
            Some(if fits { 0 } else { 3 }),
            "{}",
            planned.stderr
        );
        let out = headroom(["fit", id, "--json"].iter().chain(&machine));
        let doc: Value = serde_json::from_str(&out.stdout).expect("fit JSON");
        let from_fit = &doc["quants"]
            .as_array()
            .expect("quants")
            .iter()
            .find(|r| r["quant"] == quant)
            .expect("listed")["plan"];
        for key in [
            "verdict",
            "quant",
            "n_gpu_layers",
            "n_ctx",
            "n_cpu_moe",
            "devices",
            "ram",
            "est_decode_tokens_per_s",
            "est_prompt_tokens_per_s",
            "settings",
        ] {
            assert_eq!(from_fit[key], from_file[key], "{id} {quant}: {key}");
        }
        let codes = |p: &Value| -> Vec<Value> {
            p["warnings"]
                .as_array()
                .expect("warnings")
                .iter()
                .map(|w| w["code"].clone())
                .collect()
        };
        assert_eq!(codes(from_fit), codes(&from_file), "{id} {quant}: warnings");
        // Same llama.cpp flags, but fetched with -hf instead of read with -m.
        let args =
            |p: &Value| -> Vec<Value> { p["llama_args"].as_array().expect("args")[2..].to_vec() };
        assert_eq!(args(from_fit), args(&from_file), "{id} {quant}: llama args");
        assert_eq!(from_fit["llama_args"][0], "-hf");
        assert_eq!(from_fit["llama_args"][1], format!("{}:{}", q.repo, q.name));
    }
}

#[test]
fn filters_narrow_the_ranking() {
    let machine = ["--ram", "32GiB", "--vram", "12GiB"];
    let code = fit_json(&[&["--use", "code"][..], &machine].concat());
    assert!(!code.is_empty());
    let cat = Catalog::builtin().expect("catalog");
    for r in &code {
        let e = cat.get(r["id"].as_str().expect("id")).expect("entry");
        assert!(e.has_use("code"), "{}", e.id);
    }
    let small = fit_json(&[&["--max-download", "5GB"][..], &machine].concat());
    for r in small.iter().filter(|r| runs(r)) {
        assert!(
            r["download_bytes"].as_u64().expect("bytes") <= 5_000_000_000,
            "{}",
            r["id"]
        );
    }
    let long = fit_json(&[&["--min-ctx", "65536"][..], &machine].concat());
    assert!(!long.is_empty());
    for r in &long {
        assert!(
            r["n_ctx_max"].as_u64().expect("max") >= 65536,
            "{}",
            r["id"]
        );
        if runs(r) {
            assert!(r["n_ctx"].as_u64().expect("ctx") >= 65536, "{}", r["id"]);
        }
    }
    assert!(
        long.iter().all(|r| r["id"] != "gemma-2-9b-it"),
        "trained for 8192"
    );
    let top = fit_json(&[&["--top", "3"][..], &machine].concat());
    assert_eq!(top.len(), 3);
    let bad = headroom(["fit", "--use", "poetry"]);
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    assert!(bad.stderr.contains("--use poetry"), "{}", bad.stderr);
}

#[test]
fn one_model_lays_out_every_quantization() {
    let out = headroom([
        "fit",
        "llama-3.1-8b-instruct",
        "--ram",
        "16GiB",
        "--vram",
        "8GiB",
    ]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let cat = Catalog::builtin().expect("catalog");
    let e = cat.get("llama-3.1-8b-instruct").expect("entry");
    for q in &e.quants {
        assert!(
            out.stdout.contains(&q.name),
            "{} missing:\n{}",
            q.name,
            out.stdout
        );
    }
    assert_eq!(
        out.stdout.matches('▶').count(),
        2,
        "one pick (and the legend)"
    );
    // Run it: commands a user has, headroom's and llama.cpp's real program.
    let pick = e
        .quants
        .iter()
        .find(|q| {
            out.stdout
                .lines()
                .any(|l| l.contains('▶') && l.contains(&format!(" {} ", q.name)))
        })
        .expect("the pick is a listed quantization");
    let run_it: Vec<&str> = out
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("run it"))
        .collect();
    let model = format!("llama-3.1-8b-instruct:{}", pick.name);
    assert_eq!(run_it.len(), 3, "{}", out.stdout);
    assert_eq!(run_it[0], format!("run it   headroom pull {model}"));
    assert_eq!(run_it[1], format!("         headroom chat {model}"));
    assert!(
        run_it[2].starts_with("         llama.cpp llama-server -hf ")
            && run_it[2].contains(&format!(":{} ", pick.name)),
        "{}",
        run_it[2]
    );
    let unknown = headroom(["fit", "llama-9000b"]);
    assert_eq!(unknown.code, Some(2));
    assert!(
        unknown.stderr.contains("not in the catalog"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn text_ranking_names_the_machine_and_every_model() {
    let out = headroom(["fit", "--ram", "16GiB", "--vram", "8GiB", "--all"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout
            .starts_with("machine   16.00 GiB RAM, GPU0 8.00 GiB"),
        "{}",
        out.stdout
    );
    let cat = Catalog::builtin().expect("catalog");
    for e in cat.entries().iter().filter(|e| e.has_use("chat")) {
        assert!(out.stdout.contains(&e.id), "{} missing", e.id);
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write");
}

#[test]
fn a_malformed_catalog_is_one_line_naming_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("models.toml");
    let good = headroom::catalog::BUILTIN;
    let at = good.find("[[model.quant]]").expect("a quant");
    let line = good[..at].lines().count() + 2;
    write(
        &path,
        &format!(
            "{}[[model.quant]]\nsha256 = \"x\"\n{}",
            &good[..at],
            &good[at + 16..]
        ),
    );
    let shown = path.display().to_string();
    for out in [headroom(["fit", "--catalog", shown.as_str()]), {
        let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
            .arg("fit")
            .env("HEADROOM_CATALOG", &path)
            .output()
            .expect("runs");
        Out {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }] {
        assert_eq!(out.code, Some(1), "{}", out.stderr);
        assert!(out.stdout.is_empty());
        let err = out.stderr.trim_end();
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.contains(&format!("{shown}:{line}:")), "{err}");
        assert!(err.contains("sha256"), "{err}");
    }
    let missing = headroom(["fit", "--catalog", "/nonexistent/models.toml"]);
    assert_eq!(missing.code, Some(1));
    assert!(
        missing.stderr.contains("/nonexistent/models.toml"),
        "{}",
        missing.stderr
    );
}

#[test]
fn a_catalog_file_replaces_the_built_in_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mine.toml");
    let cat = Catalog::builtin().expect("catalog");
    let e = cat.get("llama-3.1-8b-instruct").expect("entry");
    let f = e.arch.complete().expect("facts");
    write(
        &path,
        &format!(
            r#"[[model]]
id = "mine"
name = "Mine"
family = "Test"
use = ["chat"]
repo = "me/mine-GGUF"

[model.arch]
architecture = "llama"
block_count = {}
embedding_length = {}
feed_forward_length = {}
head_count = {}
head_count_kv = {}
vocab_size = {}

[[model.quant]]
name = "Q4_K_M"
file = "mine-Q4_K_M.gguf"
"#,
            f.block_count,
            f.embedding_length,
            f.feed_forward_length,
            f.head_count,
            f.head_count_kv,
            f.vocab_size
        ),
    );
    let shown = path.display().to_string();
    let out = headroom([
        "fit",
        "--json",
        "--catalog",
        shown.as_str(),
        "--ram",
        "16GiB",
        "--vram",
        "0",
    ]);
    let rows: Value = serde_json::from_str(&out.stdout).expect("JSON");
    let rows = rows.as_array().expect("rows");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["id"], "mine");
    // No size listed: derived from the architecture, and said so.
    assert_eq!(rows[0]["estimated"], true);
    let derived = rows[0]["download_bytes"].as_u64().expect("bytes") as f64;
    assert!((derived / 4.92e9 - 1.0).abs() < 0.05, "{derived}");
    assert_eq!(fit_class(Verdict::Fits), 2);
    // `pull` and `chat` know only the built-in catalog (or
    // $HEADROOM_CATALOG): run it names the hub reference instead.
    let text = headroom([
        "fit",
        "mine",
        "--catalog",
        shown.as_str(),
        "--ram",
        "16GiB",
        "--vram",
        "0",
    ]);
    assert!(
        text.stdout
            .contains("run it   headroom pull me/mine-GGUF:Q4_K_M\n         headroom chat me/mine-GGUF:Q4_K_M\n"),
        "{}",
        text.stdout
    );
}

#[test]
fn sizes_verified_by_catalog_refresh_replace_the_listed_ones() {
    use headroom::source::hub::verified::{self, Fact, Facts};
    let data = tempfile::tempdir().expect("tempdir");
    let cat = Catalog::builtin().expect("catalog");
    let e = cat.get("llama-3.1-8b-instruct").expect("entry");
    let q = e.quant("Q6_K").expect("Q6_K");
    let facts = Facts {
        schema: verified::SCHEMA,
        entries: vec![Fact {
            id: Some(e.id.clone()),
            quant: Some(q.name.clone()),
            repo: q.repo.clone(),
            files: q.files.clone(),
            commit: "0".repeat(40),
            size_bytes: 6_596_011_424,
            sha256: vec![None],
            n_params: 8_030_261_248,
            weight_bytes: 6_590_000_000,
            gguf: std::collections::BTreeMap::new(),
            checked_at: 0,
            endpoint: "http://127.0.0.1:1".into(),
        }],
    };
    verified::save(&data.path().join(verified::FILE_NAME), &facts).expect("save");
    let out = headroom_in(
        data.path(),
        [
            "fit",
            e.id.as_str(),
            "--json",
            "--ram",
            "16GiB",
            "--vram",
            "8GiB",
        ],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).expect("JSON");
    let rows = doc["quants"].as_array().expect("quants");
    let six = rows.iter().find(|r| r["quant"] == "Q6_K").expect("Q6_K");
    assert_eq!(six["verified"], true);
    assert_eq!(six["download_bytes"], 6_596_011_424u64);
    let eight = rows.iter().find(|r| r["quant"] == "Q8_0").expect("Q8_0");
    assert_eq!(eight["verified"], false);
}

/// Named GPUs (issue #14): `fit --gpu NAME` plans for every card of the
/// table, and each row with layers on the card says, at its top level, that
/// the speed rests on the card's bandwidth (looked up by name) and how many
/// bytes it reads per token there.
#[test]
fn fit_plans_for_every_named_gpu_and_names_its_bandwidth() {
    use headroom_planner::hw::gpus::{self, NamedGpu};
    let cards: Vec<NamedGpu> = gpus::table()
        .iter()
        .map(|gpu| NamedGpu {
            gpu,
            memory_gb: *gpu.memory_gb.last().expect("a size"),
        })
        .collect();
    assert!(cards.len() >= 40);
    let check = |card: &NamedGpu| -> Result<usize, String> {
        let name = card.display_name();
        // A discrete card goes into a 32 GiB machine; an integrated one is the RAM.
        let mut args = vec!["fit", "--json", "--gpu", name.as_str()];
        if !card.gpu.unified {
            args.extend(["--ram", "32GiB"]);
        }
        let out = headroom(&args);
        let rows: Vec<Value> = serde_json::from_str(&out.stdout)
            .map_err(|e| format!("{name}: {e}: {:?} {}", out.code, out.stderr))?;
        let expected = if rows.iter().any(runs) { 0 } else { 3 };
        if out.code != Some(expected) {
            return Err(format!("{name}: exit {:?}: {}", out.code, out.stderr));
        }
        let mut on_gpu = 0;
        for r in &rows {
            let basis = &r["speed_basis"];
            let gpu = &basis["gpus"][0];
            if basis["ram"]["bandwidth_bytes_per_s"].as_f64().is_none() || gpu.is_null() {
                return Err(format!("{name}, {}: speed_basis {basis}", r["id"]));
            }
            if r["n_gpu_layers"].as_u64().unwrap_or(0) == 0 {
                continue;
            }
            on_gpu += 1;
            let ok = gpu["name"] == name.as_str()
                && gpu["bandwidth_bytes_per_s"].as_f64() == Some(card.gpu.bandwidth_gb_s * 1e9)
                && gpu["source"] == "looked_up"
                && gpu["bytes_per_token"].as_u64().is_some_and(|b| b > 0)
                && gpu["n_layers"].as_u64().is_some_and(|n| n > 0);
            if !ok {
                return Err(format!("{name}, {}: speed_basis {basis}", r["id"]));
            }
        }
        Ok(on_gpu)
    };
    // A few at a time: each is a whole ranking of the catalog.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<(String, Result<usize, String>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    while let Some(c) =
                        cards.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                    {
                        done.push((c.display_name(), check(c)));
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("worker"))
            .collect()
    });
    let failures: Vec<&String> = results
        .iter()
        .filter_map(|(_, r)| r.as_ref().err())
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
    for (name, r) in &results {
        assert!(
            r.as_ref().is_ok_and(|&n| n > 0),
            "{name}: no model has a layer on it"
        );
    }
}

#[test]
fn speed_basis_is_on_every_row_even_when_nothing_fits() {
    // Nothing runs in 256 MiB without a GPU: the rows still say what the
    // (closest) estimate assumed.
    let rows = fit_json(&["--ram", "256MiB", "--vram", "0"]);
    assert!(!rows.iter().any(runs));
    for r in &rows {
        let b = &r["speed_basis"];
        assert!(r["plan"].is_null(), "{}", r["id"]);
        assert!(
            b["ram"]["bytes_per_token"].as_u64().is_some_and(|n| n > 0),
            "{}: {b}",
            r["id"]
        );
        assert_eq!(b["gpus"], serde_json::json!([]), "{}", r["id"]);
        assert!(
            matches!(
                b["ram"]["source"].as_str(),
                Some("measured" | "calibrated" | "default")
            ),
            "{b}"
        );
    }
    // --vram names no card: the bandwidth is assumed, and the screen says how to name it.
    let rows = fit_json(&["--ram", "16GiB", "--vram", "8GiB"]);
    let gpu = &rows[0]["speed_basis"]["gpus"][0];
    assert_eq!(gpu["source"], "assumed", "{gpu}");
    assert_eq!(
        gpu["bandwidth_bytes_per_s"].as_f64(),
        Some(headroom_planner::hw::DEFAULT_GPU_BANDWIDTH_BYTES_PER_S)
    );
    let text = headroom(["fit", "--ram", "16GiB", "--vram", "8GiB", "--top", "1"]);
    assert!(
        text.stdout
            .contains("GPU0 360 GB/s (assumed: name the card with --gpu)"),
        "{}",
        text.stdout
    );
    let text = headroom(["fit", "--ram", "16GiB", "--gpu", "RTX 4060", "--top", "1"]);
    assert!(
        text.stdout
            .contains("NVIDIA GeForce RTX 4060 272 GB/s (looked up by name)"),
        "{}",
        text.stdout
    );
    // `fit MODEL`: every quantization carries it too.
    let out = headroom([
        "fit",
        "llama-3.1-8b-instruct",
        "--json",
        "--ram",
        "16GiB",
        "--gpu",
        "rtx4060",
    ]);
    let doc: Value = serde_json::from_str(&out.stdout).expect("JSON");
    for q in doc["quants"].as_array().expect("quants") {
        assert_eq!(q["speed_basis"], q["plan"]["speed_basis"], "{}", q["quant"]);
        assert_eq!(q["speed_basis"]["gpus"][0]["bandwidth_bytes_per_s"], 272e9);
    }
}

#[test]
fn a_gpu_name_that_is_not_one_card_is_a_one_line_usage_error() {
    for (name, needles) in [
        (
            "rtx4060ti",
            &["ambiguous", "RTX 4060 Ti 8GB", "RTX 4060 Ti 16GB"][..],
        ),
        ("rtx4065", &["unknown GPU", "RTX 4060", "hw --gpus"][..]),
        ("RTX 4090 48GB", &["comes with 24GB"][..]),
        ("rtx4060,", &["empty name"][..]),
        ("M4 Max 64GB,RTX 4090", &["named alone"][..]),
    ] {
        let out = headroom(["fit", "--gpu", name]);
        assert_eq!(out.code, Some(2), "--gpu {name}: {}", out.stderr);
        assert_eq!(
            out.stderr.lines().count(),
            1,
            "--gpu {name}: {}",
            out.stderr
        );
        for n in needles {
            assert!(out.stderr.contains(n), "--gpu {name}: {}", out.stderr);
        }
    }
    // --gpu and --vram say different things about the same GPUs.
    let out = headroom(["fit", "--gpu", "rtx4060", "--vram", "8GiB"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("cannot be used with"), "{}", out.stderr);
}

#[test]
fn one_row_per_model_the_other_files_of_it_folded_in() {
    let machine = ["--ram", "64GiB", "--gpu", "rtx3090"];
    let shown = fit_json(&machine);
    let all = fit_json(&[&machine[..], &["--all"]].concat());
    let mut folded = 0;
    for r in all.iter().filter(|r| !r["variant_of"].is_null()) {
        folded += 1;
        let id = r["id"].as_str().expect("id");
        let of = r["variant_of"].as_str().expect("variant_of");
        assert!(
            shown.iter().all(|s| s["id"] != id),
            "{id} shown beside {of}"
        );
        let kept = shown
            .iter()
            .find(|s| s["id"] == of)
            .expect("the row it is folded into");
        assert!(
            kept["also_as"]
                .as_array()
                .expect("also_as")
                .iter()
                .any(|a| a == id),
            "{of}: {}",
            kept["also_as"]
        );
        // Same model: same quality figure, and it ranks no higher.
        assert_eq!(kept["quality"], r["quality"], "{id} vs {of}");
        let pos = |rows: &[Value], id: &str| rows.iter().position(|x| x["id"] == id);
        assert!(pos(&all, of) < pos(&all, id), "{of} ranks above {id}");
    }
    assert!(
        folded > 0,
        "the Gemma 3 QAT checkpoints fold into their models"
    );
}
