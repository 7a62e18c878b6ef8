//! Compiles the C++ shim (every `app/shim/*.cpp`) against the exact llama.cpp
//! sources, with the exact C++ compiler, that `llama-cpp-sys-2` built, so the
//! shim can call llama.cpp's C++-only API (`llama_get_memory_breakdown` in
//! `src/llama-ext.h`) and catch its exceptions; and records which llama.cpp
//! that was (`HEADROOM_LLAMA_CPP_VERSION`, for plans and `--version`).
//!
//! llama.cpp itself is NOT rebuilt here: the shim only needs headers, and its
//! object is linked against the static libraries llama-cpp-sys-2 already links.
//! Nothing here may change what llama-cpp-sys-2's own build sees (no new
//! build-dependencies, no features of `cc`), or cargo would compile llama.cpp
//! again.
//!
//! Finding the sources, most reliable first:
//! 1. `HEADROOM_LLAMA_CPP_DIR` (explicit override, e.g. for vendored builds);
//!    its `include/llama.h` must be byte-identical to the built one;
//! 2. the CMake cache of the build llama-cpp-sys-2 ran: it exports
//!    `DEP_LLAMA_GGML_CMAKE_DIR` = `<its OUT_DIR>/lib/cmake` (it declares
//!    `links = "llama"`), and `<OUT_DIR>/build/CMakeCache.txt` records
//!    `CMAKE_HOME_DIRECTORY`, the very source tree that was compiled, and
//!    `CMAKE_CXX_COMPILER`, the compiler that compiled it;
//! 3. the crate in Cargo's registry cache
//!    (`$CARGO_HOME/registry/src/*/llama-cpp-sys-2-<version in Cargo.lock>`).
//!
//! The build fails (a build script reports a fatal configuration error by
//! panicking) with a message saying what was tried and what to do.

use std::env;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Files that prove a directory is a llama.cpp source tree with what the shim needs.
const REQUIRED: [&str; 4] = [
    "include/llama.h",
    "src/llama-ext.h",
    "ggml/include/ggml.h",
    "ggml/include/ggml-backend.h",
];

/// Why the shim cannot be built as asked.
#[derive(Debug)]
enum BuildError {
    /// A file the build needs could not be read.
    Read { path: PathBuf, source: io::Error },
    /// `DEP_LLAMA_GGML_CMAKE_DIR` is not `<OUT_DIR>/lib/cmake`.
    CmakeDirShape(PathBuf),
    /// The CMake cache lacks a key the build needs.
    MissingKey { cache: PathBuf, key: &'static str },
    /// No candidate directory holds llama.cpp's headers.
    NoSources { tried: Vec<String> },
    /// `HEADROOM_LLAMA_CPP_DIR`'s llama.h is not the one llama.cpp was built from.
    HeaderMismatch { ours: PathBuf, built: PathBuf },
    /// The shim directory holds no C++ source.
    NoShimSources(PathBuf),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Read { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            Self::CmakeDirShape(dir) => write!(
                f,
                "DEP_LLAMA_GGML_CMAKE_DIR={} is not <OUT_DIR>/lib/cmake",
                dir.display()
            ),
            Self::MissingKey { cache, key } => {
                write!(f, "{} has no {key}", cache.display())
            }
            Self::NoSources { tried } => write!(
                f,
                "cannot find the llama.cpp sources of llama-cpp-sys-2 (needed for the C++ shim). \
                 Tried:\n  {}\nSet HEADROOM_LLAMA_CPP_DIR to the `llama.cpp` directory inside \
                 the llama-cpp-sys-2 crate that Cargo.lock pins.",
                tried.join("\n  ")
            ),
            Self::HeaderMismatch { ours, built } => write!(
                f,
                "HEADROOM_LLAMA_CPP_DIR's {} differs from {}, the llama.h llama.cpp was built \
                 from: the shim would be compiled against another llama.cpp than the one it is \
                 linked with (struct layouts and enums may differ). Point \
                 HEADROOM_LLAMA_CPP_DIR at the same llama.cpp, or unset it.",
                ours.display(),
                built.display()
            ),
            Self::NoShimSources(dir) => write!(f, "no .cpp file in {}", dir.display()),
        }
    }
}

fn read(path: &Path) -> Result<String, BuildError> {
    fs::read_to_string(path).map_err(|source| BuildError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn main() {
    if let Err(e) = run() {
        panic!("headroom build: {e}");
    }
}

fn run() -> Result<(), BuildError> {
    // A directory: cargo rescans it, so a new or edited shim file is seen.
    println!("cargo:rerun-if-changed=shim");
    println!("cargo:rerun-if-env-changed=HEADROOM_LLAMA_CPP_DIR");
    println!("cargo:rerun-if-env-changed=DEP_LLAMA_GGML_CMAKE_DIR");

    let built = match env::var_os("DEP_LLAMA_GGML_CMAKE_DIR") {
        Some(dir) => Some(CmakeBuild::read(Path::new(&dir))?),
        None => None,
    };
    if let Some(b) = &built {
        println!("cargo:rerun-if-changed={}", b.cache.display());
    }

    let mut tried = Vec::new();
    let (origin, src) = find_llama_src(built.as_ref(), &mut tried)?;
    if origin == Origin::Override {
        check_same_header(&src, built.as_ref())?;
    }

    let shim_dir = Path::new("shim");
    let sources = shim_sources(shim_dir)?;

    let mut build = cc::Build::new();
    build.cpp(true).std("c++17");
    if let Some(cxx) = built.as_ref().and_then(|b| b.cxx.as_ref()) {
        // The compiler that compiled llama.cpp: the shim includes its private
        // C++ headers (std::map, std::string in their types), so the two
        // must agree on the C++ ABI and standard library.
        build.compiler(cxx);
    }
    let system_includes =
        build.get_compiler().is_like_gnu() || build.get_compiler().is_like_clang();
    build.files(&sources).include(shim_dir);
    for dir in ["include", "src", "ggml/include"] {
        let dir = src.join(dir);
        if system_includes {
            // llama.cpp's headers are not ours to keep warning-free: as
            // system headers they are exempt from the warnings below, while
            // the shim's own code is not.
            build.flag(format!("-isystem{}", dir.display()));
        } else {
            build.include(dir);
        }
    }
    build
        .warnings(true)
        .extra_warnings(true)
        .compile("headroom_shim");

    // Every call to llama_decode goes through the shim's guard
    // (shim/decode.cpp), which catches the C++ exceptions a backend throws
    // while decoding; `-u` pulls the guard out of the shim's archive
    // wherever the linker meets the first call.
    println!("cargo:rustc-link-arg=-Wl,--wrap=llama_decode");
    println!("cargo:rustc-link-arg=-Wl,-u,__wrap_llama_decode");
    println!(
        "cargo:rustc-env=HEADROOM_LLAMA_CPP_VERSION={}",
        version_string(built.as_ref(), &src)
    );
    Ok(())
}

/// Every `.cpp` directly in `dir`, sorted (the headers come in through them).
fn shim_sources(dir: &Path) -> Result<Vec<PathBuf>, BuildError> {
    let entries = fs::read_dir(dir).map_err(|source| BuildError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cpp"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(BuildError::NoShimSources(dir.to_path_buf()));
    }
    Ok(files)
}

/// What llama-cpp-sys-2's CMake build left behind that the shim needs.
struct CmakeBuild {
    /// llama-cpp-sys-2's `OUT_DIR`.
    out_dir: PathBuf,
    /// `DEP_LLAMA_GGML_CMAKE_DIR`, `<out_dir>/lib/cmake`.
    cmake_dir: PathBuf,
    /// `<out_dir>/build/CMakeCache.txt`.
    cache: PathBuf,
    /// `CMAKE_HOME_DIRECTORY`: the llama.cpp source tree that was compiled.
    home: PathBuf,
    /// `CMAKE_CXX_COMPILER`, when recorded.
    cxx: Option<PathBuf>,
}

impl CmakeBuild {
    /// `cmake_dir` is `<OUT_DIR>/lib/cmake` (or `lib64/cmake`) of
    /// llama-cpp-sys-2; its CMake build directory `<OUT_DIR>/build` holds
    /// the cache.
    fn read(cmake_dir: &Path) -> Result<Self, BuildError> {
        let out_dir = cmake_dir
            .parent()
            .and_then(Path::parent)
            .ok_or_else(|| BuildError::CmakeDirShape(cmake_dir.to_path_buf()))?
            .to_path_buf();
        let cache = out_dir.join("build").join("CMakeCache.txt");
        let text = read(&cache)?;
        let home = cache_value(&text, "CMAKE_HOME_DIRECTORY")
            .map(PathBuf::from)
            .ok_or_else(|| BuildError::MissingKey {
                cache: cache.clone(),
                key: "CMAKE_HOME_DIRECTORY",
            })?;
        let cxx = cache_value(&text, "CMAKE_CXX_COMPILER")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        Ok(Self {
            out_dir,
            cmake_dir: cmake_dir.to_path_buf(),
            cache,
            home,
            cxx,
        })
    }
}

/// The value of `KEY:TYPE=value` in a CMake cache, whatever the type.
fn cache_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|line| {
        let (lhs, value) = line.split_once('=')?;
        let (k, _ty) = lhs.split_once(':')?;
        (k == key).then(|| value.trim())
    })
}

/// Where the llama.cpp sources came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Override,
    CmakeCache,
    Registry,
}

/// Returns the first candidate directory that holds every file in [`REQUIRED`],
/// recording each rejected candidate (and why) in `tried`.
fn find_llama_src(
    built: Option<&CmakeBuild>,
    tried: &mut Vec<String>,
) -> Result<(Origin, PathBuf), BuildError> {
    let mut candidates: Vec<(Origin, String, PathBuf)> = Vec::new();
    if let Some(dir) = env::var_os("HEADROOM_LLAMA_CPP_DIR") {
        candidates.push((
            Origin::Override,
            "HEADROOM_LLAMA_CPP_DIR".into(),
            PathBuf::from(dir),
        ));
    }
    match built {
        Some(b) => candidates.push((
            Origin::CmakeCache,
            "llama-cpp-sys-2's CMakeCache.txt".into(),
            b.home.clone(),
        )),
        None => tried.push("DEP_LLAMA_GGML_CMAKE_DIR: not set by llama-cpp-sys-2".into()),
    }
    // The registry copy is a guess at what was built: only without the cache.
    if built.is_none() {
        match locked_sys_version() {
            Some(version) => candidates.extend(
                registry_candidates(&version)
                    .into_iter()
                    .map(|dir| (Origin::Registry, "Cargo registry".to_string(), dir)),
            ),
            None => tried.push("Cargo registry: no llama-cpp-sys-2 in Cargo.lock".into()),
        }
    }

    for (origin, what, dir) in candidates {
        let missing: Vec<&str> = REQUIRED
            .iter()
            .copied()
            .filter(|f| !dir.join(f).is_file())
            .collect();
        if missing.is_empty() {
            return Ok((origin, dir));
        }
        tried.push(format!(
            "{what}: {} lacks {}",
            dir.display(),
            missing.join(", ")
        ));
    }
    Err(BuildError::NoSources {
        tried: std::mem::take(tried),
    })
}

/// Fails when the override's `llama.h` is not byte-identical to the one
/// llama.cpp was built from; warns when there is nothing to compare with.
fn check_same_header(src: &Path, built: Option<&CmakeBuild>) -> Result<(), BuildError> {
    let ours = src.join("include/llama.h");
    let Some(b) = built else {
        println!(
            "cargo:warning=HEADROOM_LLAMA_CPP_DIR is used without llama-cpp-sys-2's CMake cache: \
             cannot check that {} is the llama.h llama.cpp was built from",
            ours.display()
        );
        return Ok(());
    };
    let theirs = b.home.join("include/llama.h");
    println!("cargo:rerun-if-changed={}", ours.display());
    let bytes = |p: &Path| {
        fs::read(p).map_err(|source| BuildError::Read {
            path: p.to_path_buf(),
            source,
        })
    };
    if bytes(&ours)? != bytes(&theirs)? {
        return Err(BuildError::HeaderMismatch {
            ours,
            built: theirs,
        });
    }
    Ok(())
}

/// The llama-cpp-sys-2 version Cargo.lock pins (the workspace's lock, one
/// directory above this crate). Only needed without the CMake cache.
fn locked_sys_version() -> Option<String> {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR")?);
    let lock = manifest_dir.parent()?.join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = fs::read_to_string(lock).ok()?;
    // [[package]] blocks: `name = "..."` then `version = "..."`.
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "name = \"llama-cpp-sys-2\"" {
            return lines
                .next()
                .and_then(|l| l.trim().strip_prefix("version = "))
                .map(|v| v.trim_matches('"').to_string());
        }
    }
    None
}

/// `$CARGO_HOME/registry/src/<index>/llama-cpp-sys-2-<version>/llama.cpp` for every index.
fn registry_candidates(version: &str) -> Vec<PathBuf> {
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
                .join(format!("llama-cpp-sys-2-{version}"))
                .join("llama.cpp")
        })
        .collect();
    dirs.sort();
    dirs
}

/// `llama-cpp-sys-2 0.1.160 (llama.cpp 0.6.0-dev b1234 abc1234, ggml 0.26.0)`:
/// the crate's version from its manifest (the directory above the llama.cpp
/// sources that were built, else above `src`, else Cargo.lock), llama.cpp's version, build number and commit from the files its
/// CMake configure generated (a number of 0 and a commit of "unknown" mean
/// the sources had no git history, as in the crate: left out), and ggml's
/// package version. Parts that cannot be read are left out.
fn version_string(built: Option<&CmakeBuild>, src: &Path) -> String {
    let crate_version = built
        .map_or(src, |b| b.home.as_path())
        .parent()
        .map(|d| d.join("Cargo.toml"))
        .and_then(|m| fs::read_to_string(m).ok())
        .and_then(|text| package_version(&text))
        .or_else(locked_sys_version)
        .unwrap_or_else(|| "(unknown version)".to_string());
    let mut out = format!("llama-cpp-sys-2 {crate_version}");
    let Some(b) = built else {
        return out;
    };
    let generated = |rel: &str| {
        let path = b.out_dir.join("build").join(rel);
        println!("cargo:rerun-if-changed={}", path.display());
        fs::read_to_string(path).ok()
    };
    let mut parts = Vec::new();
    if let Some(h) = generated("src/llama-version.h") {
        let mut llama = String::new();
        if let Some(v) = c_define(&h, "LLAMA_VERSION") {
            llama = format!("llama.cpp {v}");
        }
        let number = generated("common/build-info.cpp")
            .and_then(|c| c_int(&c, "LLAMA_BUILD_NUMBER"))
            .filter(|&n| n > 0);
        if let Some(n) = number {
            llama.push_str(&format!(" b{n}"));
        }
        if let Some(commit) = c_define(&h, "LLAMA_COMMIT").filter(|c| *c != "unknown") {
            llama.push_str(&format!(" {commit}"));
        }
        if !llama.is_empty() {
            parts.push(llama);
        }
    }
    let ggml = fs::read_to_string(b.cmake_dir.join("ggml/ggml-config-version.cmake"))
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.trim()
                    .strip_prefix("set(PACKAGE_VERSION \"")
                    .and_then(|r| r.strip_suffix("\")"))
                    .map(str::to_string)
            })
        });
    if let Some(v) = ggml {
        parts.push(format!("ggml {v}"));
    }
    if !parts.is_empty() {
        out.push_str(&format!(" ({})", parts.join(", ")));
    }
    out
}

/// `version = "..."` of a manifest's `[package]` table.
fn package_version(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package && let Some(v) = line.strip_prefix("version = ") {
            return Some(v.trim_matches('"').to_string());
        }
    }
    None
}

/// The string of `#define NAME "value"`.
fn c_define<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("#define ")?.trim_start();
        let value = rest.strip_prefix(name)?.trim();
        value.strip_prefix('"')?.strip_suffix('"')
    })
}

/// The value of `int NAME = value;`.
fn c_int(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("int ")?.trim_start();
        let value = rest.strip_prefix(name)?.trim().strip_prefix('=')?;
        value.trim().strip_suffix(';')?.trim().parse().ok()
    })
}
