//! Compiles the C++ accounting shim (`app/shim/accounting.cpp`) against the exact
//! llama.cpp sources that `llama-cpp-sys-2` built, so the shim can call
//! llama.cpp's C++-only API (`llama_get_memory_breakdown` in `src/llama-ext.h`).
//!
//! llama.cpp itself is NOT rebuilt here: the shim only needs headers, and its
//! object is linked against the static libraries llama-cpp-sys-2 already links.
//!
//! Finding the sources, most reliable first:
//! 1. `HEADROOM_LLAMA_CPP_DIR` (explicit override, e.g. for vendored builds);
//! 2. the CMake cache of the build llama-cpp-sys-2 ran: it exports
//!    `DEP_LLAMA_GGML_CMAKE_DIR` = `<its OUT_DIR>/lib/cmake` (it declares
//!    `links = "llama"`), and `<OUT_DIR>/build/CMakeCache.txt` records
//!    `CMAKE_HOME_DIRECTORY`, the very source tree that was compiled;
//! 3. the crate in Cargo's registry cache (`$CARGO_HOME/registry/src/*/llama-cpp-sys-2-<ver>`).
//!
//! The build fails with a message listing what was tried if none has the headers.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

/// Must equal the `=` pin of llama-cpp-sys-2 in the workspace Cargo.toml: the shim
/// includes that version's private headers, whose C++ ABI is not stable.
const LLAMA_SYS_VERSION: &str = "0.1.160";

/// The shim's sources (compiled: the `.cpp` ones).
const SHIM_FILES: [&str; 7] = [
    "accounting.cpp",
    "quant.cpp",
    "vocab.cpp",
    "template.cpp",
    "accounting.h",
    "shim_log.h",
    "shim_guard.h",
];

/// Files that prove a directory is a llama.cpp source tree with what the shim needs.
const REQUIRED: [&str; 4] = [
    "include/llama.h",
    "src/llama-ext.h",
    "ggml/include/ggml.h",
    "ggml/include/ggml-backend.h",
];

fn main() {
    for f in SHIM_FILES {
        println!("cargo:rerun-if-changed=shim/{f}");
    }
    println!("cargo:rerun-if-env-changed=HEADROOM_LLAMA_CPP_DIR");
    println!("cargo:rerun-if-env-changed=DEP_LLAMA_GGML_CMAKE_DIR");

    let mut tried = Vec::new();
    let src = match find_llama_src(&mut tried) {
        Some(dir) => dir,
        None => {
            // A build script reports a fatal configuration error by panicking;
            // the message is what the user sees.
            panic!(
                "headroom: cannot find the llama.cpp sources of llama-cpp-sys-2 {LLAMA_SYS_VERSION} \
                 (needed for the C++ accounting shim). Tried:\n  {}\n\
                 Set HEADROOM_LLAMA_CPP_DIR to the `llama.cpp` directory inside the \
                 llama-cpp-sys-2-{LLAMA_SYS_VERSION} crate.",
                tried.join("\n  ")
            );
        }
    };

    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .files(
            SHIM_FILES
                .iter()
                .filter(|f| f.ends_with(".cpp"))
                .map(|f| format!("shim/{f}")),
        )
        .include("shim")
        .include(src.join("include"))
        .include(src.join("src"))
        .include(src.join("ggml/include"))
        // llama.cpp's headers are not ours to keep warning-free.
        .warnings(false)
        .compile("headroom_shim");
}

/// Returns the first candidate directory that holds every file in [`REQUIRED`],
/// recording each rejected candidate (and why) in `tried`.
fn find_llama_src(tried: &mut Vec<String>) -> Option<PathBuf> {
    let mut candidates: Vec<(String, PathBuf)> = Vec::new();
    if let Some(dir) = env::var_os("HEADROOM_LLAMA_CPP_DIR") {
        candidates.push(("HEADROOM_LLAMA_CPP_DIR".into(), PathBuf::from(dir)));
    }
    match env::var_os("DEP_LLAMA_GGML_CMAKE_DIR") {
        Some(cmake_dir) => match source_dir_from_cmake_cache(Path::new(&cmake_dir)) {
            Ok(dir) => candidates.push(("llama-cpp-sys-2's CMakeCache.txt".into(), dir)),
            Err(why) => tried.push(format!("DEP_LLAMA_GGML_CMAKE_DIR: {why}")),
        },
        None => tried.push("DEP_LLAMA_GGML_CMAKE_DIR: not set by llama-cpp-sys-2".into()),
    }
    candidates.extend(
        registry_candidates()
            .into_iter()
            .map(|dir| ("Cargo registry".to_string(), dir)),
    );

    for (origin, dir) in candidates {
        let missing: Vec<&str> = REQUIRED
            .iter()
            .copied()
            .filter(|f| !dir.join(f).is_file())
            .collect();
        if missing.is_empty() {
            return Some(dir);
        }
        tried.push(format!(
            "{origin}: {} lacks {}",
            dir.display(),
            missing.join(", ")
        ));
    }
    None
}

/// `DEP_LLAMA_GGML_CMAKE_DIR` is `<OUT_DIR>/lib/cmake` (or `lib64/cmake`) of
/// llama-cpp-sys-2; its CMake build directory `<OUT_DIR>/build` records the
/// source tree it configured.
fn source_dir_from_cmake_cache(cmake_dir: &Path) -> Result<PathBuf, String> {
    let out_dir = cmake_dir
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| format!("{} has no grandparent", cmake_dir.display()))?;
    let cache = out_dir.join("build").join("CMakeCache.txt");
    let text =
        fs::read_to_string(&cache).map_err(|e| format!("cannot read {}: {e}", cache.display()))?;
    text.lines()
        .find_map(|line| line.strip_prefix("CMAKE_HOME_DIRECTORY:INTERNAL="))
        .map(|dir| PathBuf::from(dir.trim()))
        .ok_or_else(|| format!("{} has no CMAKE_HOME_DIRECTORY", cache.display()))
}

/// `$CARGO_HOME/registry/src/<index>/llama-cpp-sys-2-<ver>/llama.cpp` for every index.
fn registry_candidates() -> Vec<PathBuf> {
    let cargo_home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let Some(root) = cargo_home.map(|h| h.join("registry").join("src")) else {
        return Vec::new();
    };
    let Ok(entries) = fs::read_dir(&root) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| {
            e.path()
                .join(format!("llama-cpp-sys-2-{LLAMA_SYS_VERSION}"))
                .join("llama.cpp")
        })
        .collect();
    dirs.sort();
    dirs
}
