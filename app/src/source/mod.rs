//! From a MODEL argument to a GGUF header and a model profile: local files and
//! split models, references as people type them (`org/repo[:QUANT]`, catalog
//! ids), the demo models, and the Hugging Face hub (`hub/`: one client, one
//! cache layout, one resumable transfer, one progress display).
//!
//! Nothing here loads llama.cpp: everything below plans from headers alone.

pub mod demo;
pub mod hub;
pub mod modelref;
pub mod split;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use headroom_planner::profile::{self, ModelProfile};

/// Resolve MODEL arguments to GGUF files: paths, directories of GGUF files,
/// `demo` (the instruct demo model, also when none is given) or `demo-base`.
///
/// # Errors
/// A missing file, or a directory without GGUF files.
pub fn resolve_models(models: &[String]) -> Result<Vec<PathBuf>> {
    if models.is_empty() {
        return Ok(vec![crate::source::demo::instruct_model()?]);
    }
    let mut out = Vec::new();
    for m in models {
        if let Some(demo) = crate::source::demo::named(m) {
            out.push(demo?);
            continue;
        }
        let path = Path::new(m);
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("reading directory {m}"))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    // Models only: no projectors, split sets by their first part.
                    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                        crate::source::modelref::is_model_file(n)
                            && crate::source::modelref::split_part(n).is_none_or(|s| s.index == 1)
                    })
                })
                .collect();
            if found.is_empty() {
                bail!("{m}: no .gguf files in this directory");
            }
            found.sort();
            out.extend(found);
        } else if path.exists() {
            out.push(path.to_path_buf());
        } else {
            out.push(resolve_named(m)?);
        }
    }
    Ok(out)
}

/// A MODEL that is not on disk: `org/repo[:QUANT]` or a catalog id, as
/// downloaded into the Hugging Face cache.
fn resolve_named(m: &str) -> Result<PathBuf> {
    use crate::source::modelref::{self, ModelArg};
    match modelref::classify(m)? {
        ModelArg::Hub(h) => crate::source::hub::pull::downloaded(&h),
        ModelArg::Catalog { id, quant } => {
            crate::source::hub::pull::downloaded(&modelref::catalog_ref(&id, quant.as_deref())?)
        }
        ModelArg::Path(p) => Ok(p),
        ModelArg::Demo => crate::source::demo::instruct_model(),
        ModelArg::DemoBase => crate::source::demo::demo_model(),
    }
}

/// MODEL arguments as `plan` takes them, each with its label and profile:
/// files and directories (as [`resolve_models`]), and models on the hub
/// (`org/repo[:QUANT]`, catalog ids), planned from their GGUF header alone
/// when they are not downloaded.
///
/// # Errors
/// As [`resolve_models`] and [`load_profile`]; a hub that refuses.
pub fn plan_inputs(
    models: &[String],
    target: crate::source::hub::choose::Target<'_>,
) -> Result<Vec<(String, ModelProfile)>> {
    use crate::source::modelref::{self, ModelArg};
    let mut out = Vec::new();
    for m in models {
        if !Path::new(m).exists() {
            let hub = match modelref::classify(m) {
                Ok(ModelArg::Hub(h)) => Some(h),
                Ok(ModelArg::Catalog { id, quant }) => {
                    Some(modelref::catalog_ref(&id, quant.as_deref())?)
                }
                _ => None,
            };
            if let Some(h) = hub {
                let input = crate::source::hub::pull::plan_input(&h, target)?;
                if input.header_bytes > 0 {
                    eprintln!(
                        "headroom: {h}: planned from its GGUF header alone ({} read of {})",
                        crate::source::hub::progress::size(input.header_bytes),
                        crate::source::hub::progress::size(input.size)
                    );
                }
                out.push((input.label, input.profile));
                continue;
            }
        }
        let paths = resolve_models(std::slice::from_ref(m))?;
        for p in paths {
            let profile = load_profile(&p)?;
            out.push((p.display().to_string(), profile));
        }
    }
    if models.is_empty() {
        let p = crate::source::demo::instruct_model()?;
        let profile = load_profile(&p)?;
        out.push((p.display().to_string(), profile));
    }
    Ok(out)
}

/// Read a model's header (never its weights) and build its profile.
///
/// # Errors
/// An unreadable or invalid GGUF, named with its path.
pub fn load_profile(path: &Path) -> Result<ModelProfile> {
    // A split model is read from its first part: every part's header, merged.
    let header =
        crate::source::split::read_local(path).with_context(|| format!("{}", path.display()))?;
    if let Some(key) = header.nested_array_key() {
        bail!(
            "{}: metadata key '{key}' holds nested arrays, which llama.cpp cannot load",
            path.display()
        );
    }
    profile::profile(&header).with_context(|| format!("{}: invalid model", path.display()))
}

/// Other GGUF files beside `path` whose headers read: the candidates for a
/// smaller quantization of the same model when a plan does not fit.
#[must_use]
pub fn siblings(path: &Path) -> Vec<(PathBuf, ModelProfile)> {
    let Some(dir) = path.parent() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p != path
                && p.extension()
                    .is_some_and(|x| x.eq_ignore_ascii_case("gguf"))
        })
        .filter_map(|p| load_profile(&p).ok().map(|profile| (p, profile)))
        .collect()
}
