//! The layout rule of `app/src`, checked on the source itself: folders follow
//! the data path and their dependencies point one way. Nothing imports
//! `commands/` (a thin leaf that `main` dispatches to), `source/` never reaches
//! into `runner/` (planning from a header must not need llama.cpp), and no two
//! top-level modules import each other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read app/src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Top-level module → (module it names through `crate::`, file that does).
fn edges() -> BTreeMap<String, BTreeSet<(String, String)>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
    for file in files {
        let rel = file
            .strip_prefix(&src)
            .expect("under src")
            .to_string_lossy()
            .into_owned();
        let top = rel
            .split('/')
            .next()
            .unwrap_or_default()
            .trim_end_matches(".rs")
            .to_string();
        let text = std::fs::read_to_string(&file).expect("read a source file");
        for (i, _) in text.match_indices("crate::") {
            let name: String = text[i + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() && name != top {
                edges
                    .entry(top.clone())
                    .or_default()
                    .insert((name, rel.clone()));
            }
        }
    }
    edges
}

#[test]
fn dependencies_point_one_way() {
    let edges = edges();
    assert!(
        edges.len() >= 6,
        "the scan found too few modules: {edges:?}"
    );
    let mut wrong = Vec::new();
    for (from, targets) in &edges {
        for (to, file) in targets {
            if to == "commands" {
                wrong.push(format!("{file} imports commands/, which is a leaf"));
            }
            if from == "source" && to == "runner" {
                wrong.push(format!("{file}: source/ must not import runner/"));
            }
            if edges
                .get(to)
                .is_some_and(|back| back.iter().any(|(t, _)| t == from))
            {
                wrong.push(format!("{file}: {from} imports {to}, which imports {from}"));
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
}
