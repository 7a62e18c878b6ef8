//! `headroom list` against a prepared Hugging Face cache (written by hand in
//! the layout `hf-hub`, the Python client and llama.cpp share) and a
//! `--models-dir` folder: every model once, split sets as one, projectors
//! left out, unfinished downloads reported, each with a plan.
//!
//! Run with `cargo test --release -p headroom --test cli list::`.

use crate::models;
use crate::sandbox;

use std::path::Path;

use headroom_planner::gguf::GgmlType;
use sandbox::Sandbox;
use serde_json::Value;

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
const OLD_COMMIT: &str = "89abcdef0123456789abcdef0123456789abcdef";

/// Put `bytes` in `repo`'s cache as blob `etag`, linked from `file` in
/// the snapshot of `commit`.
fn cache_file(hub: &Path, repo: &str, commit: &str, file: &str, etag: &str, bytes: &[u8]) {
    let root = hub.join(format!("models--{}", repo.replace('/', "--")));
    std::fs::create_dir_all(root.join("blobs")).expect("mkdir");
    std::fs::write(root.join("blobs").join(etag), bytes).expect("blob");
    let link = root.join("snapshots").join(commit).join(file);
    std::fs::create_dir_all(link.parent().expect("dir")).expect("mkdir");
    let up = "../".repeat(2 + file.matches('/').count());
    std::os::unix::fs::symlink(format!("{up}blobs/{etag}"), &link).expect("link");
    std::fs::create_dir_all(root.join("refs")).expect("mkdir");
    std::fs::write(root.join("refs/main"), COMMIT).expect("ref");
}

#[test]
fn lists_the_cache_and_a_models_dir_with_a_verdict_each() {
    let sb = Sandbox::new();
    let hub = sb.hub_cache();
    let q8 = models::file_bytes(&models::tiny_header(GgmlType::Q8_0), 1);
    let alpha = "org/alpha-GGUF";
    cache_file(&hub, alpha, COMMIT, "alpha-Q8_0.gguf", &"a".repeat(64), &q8);
    // An older snapshot of the same blob: listed once.
    cache_file(
        &hub,
        alpha,
        OLD_COMMIT,
        "alpha-Q8_0.gguf",
        &"a".repeat(64),
        &q8,
    );

    let beta = "org/beta-GGUF";
    let parts = models::split_headers(&models::tiny_header(GgmlType::Q8_0), 2);
    let mut split_size = 0;
    for (i, h) in parts.iter().enumerate() {
        let bytes = models::file_bytes(h, 5 + i as u64);
        split_size += bytes.len() as u64;
        let name = format!("Q8_0/{}", models::part_name("beta-Q8_0", i + 1, 2));
        cache_file(
            &hub,
            beta,
            COMMIT,
            &name,
            &format!("{i}").repeat(64),
            &bytes,
        );
    }
    let partial = hub
        .join("models--org--beta-GGUF/blobs")
        .join(format!("{}.incomplete", "c".repeat(64)));
    std::fs::write(&partial, vec![0u8; 12_345]).expect("partial");

    let gamma = "org/gamma-GGUF";
    let first = models::file_bytes(&parts[0], 7);
    cache_file(
        &hub,
        gamma,
        COMMIT,
        &models::part_name("gamma-Q8_0", 1, 2),
        &"d".repeat(64),
        &first,
    );

    let dir = sb.dir.path().join("my-models");
    let f16 = models::file_bytes(&models::tiny_header(GgmlType::F16), 2);
    models::write(&dir, "tiny-F16.gguf", &f16);
    models::write(&dir, "sub/deeper/tiny-Q8_0.gguf", &q8);
    models::write(&dir, "mmproj-tiny-f16.gguf", &[0u8; 64]);
    models::write(&dir, "notes.txt", b"not a model");

    let dir_arg = dir.to_str().expect("utf-8");
    let args = [
        "list",
        "--json",
        "--ram",
        "8GiB",
        "--vram",
        "0",
        "--models-dir",
        dir_arg,
    ];
    let run = sb.run("http://127.0.0.1:1", &args, &[("HF_HUB_OFFLINE", "1")]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let json = run.json();
    let listed = json["models"].as_array().expect("models");
    let by_name = |name: &str| -> &Value {
        listed
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed in {json:#}"))
    };
    assert_eq!(listed.len(), 5, "{json:#}");

    let a = by_name("org/alpha-GGUF:alpha-Q8_0.gguf");
    assert_eq!(a["size_bytes"], q8.len());
    assert_eq!(a["repo"], alpha);
    assert_eq!(a["commit"], COMMIT, "the snapshot refs/main names");
    assert_eq!(a["quant"], "Q8_0");
    assert_eq!(a["verdict"], "fits");

    let b = by_name("org/beta-GGUF:Q8_0/beta-Q8_0-00001-of-00002.gguf");
    assert_eq!(b["size_bytes"], split_size, "both parts");
    assert_eq!(b["verdict"], "fits", "planned from both parts: {b:#}");

    let g = by_name("org/gamma-GGUF:gamma-Q8_0-00001-of-00002.gguf");
    assert_eq!(g["missing_parts"], 1);
    assert!(
        g["error"].as_str().is_some_and(|e| e.contains("missing")),
        "{g:#}"
    );

    let f = by_name("tiny-F16.gguf");
    assert_eq!(f["quant"], "F16");
    assert_eq!(f["size_bytes"], f16.len());
    assert!(f["repo"].is_null());
    by_name("tiny-Q8_0.gguf");

    let partials = json["partial_downloads"].as_array().expect("partials");
    assert_eq!(partials.len(), 1, "{json:#}");
    assert_eq!(partials[0]["repo"], beta);
    assert_eq!(partials[0]["bytes"], 12_345);

    // The table says the same in words.
    let text = sb.run("http://127.0.0.1:1", &args[..1], &[("HF_HUB_OFFLINE", "1")]);
    assert_eq!(text.code, Some(0), "{text:?}");
    for want in [
        "org/alpha-GGUF:alpha-Q8_0.gguf",
        "fits — Q8_0",
        "partial download of org/beta-GGUF",
    ] {
        assert!(text.stdout.contains(want), "{want:?} in:\n{}", text.stdout);
    }
}

#[test]
fn an_empty_machine_says_how_to_get_a_model() {
    let sb = Sandbox::new();
    let run = sb.run("http://127.0.0.1:1", &["list"], &[]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("headroom pull"), "{}", run.stdout);
    let bad = sb.run(
        "http://127.0.0.1:1",
        &["list", "--models-dir", "/nonexistent/dir"],
        &[],
    );
    assert_eq!(bad.code, Some(2), "{bad:?}");
}
