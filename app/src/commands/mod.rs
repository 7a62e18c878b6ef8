//! Subcommand dispatch, the shared model and hardware resolution, and the
//! mapping from errors to exit codes.

mod accounting;
mod catalog;
pub mod chat;
pub mod fit;
mod hw;
mod list;
mod plan;
pub mod prepare;
mod pull;
pub mod run;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use headroom_planner::hw::{self as phw, HardwareSnapshot, ProbeOptions};
use headroom_planner::profile::{self, ModelProfile};

use crate::cli::{Cli, Command, MachineArgs};

/// Exit code: the plan does not fit.
pub const EXIT_DOES_NOT_FIT: u8 = 3;
/// Exit code: bad usage.
pub const EXIT_USAGE: u8 = 2;

/// An error that is the user's way of calling us, not a failure (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Run the parsed command.
///
/// # Errors
/// Any failure, with context for the one-line message `main` prints.
pub fn dispatch(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Plan(args) => plan::run(&args, &cli.machine),
        Command::Run(args) => run::run(&args, &cli.machine, cli.verbose),
        Command::Chat(args) => chat::run(&args, &cli.machine, cli.verbose),
        Command::Fit(args) => fit::run(&args, &cli.machine),
        Command::Hw(args) => hw::run(&args, &cli.machine),
        Command::LlamaAccounting(args) => accounting::run(&args),
        Command::Pull(args) => pull::run(&args, &cli.machine),
        Command::List(args) => list::run(&args, &cli.machine),
        Command::Catalog(args) => catalog::run(&args),
        Command::DemoModel => {
            println!("{}", crate::demo::demo_model()?.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The exit code for an error.
#[must_use]
pub fn exit_code_for(err: &anyhow::Error) -> u8 {
    if err
        .chain()
        .any(|c| c.downcast_ref::<UsageError>().is_some())
    {
        EXIT_USAGE
    } else {
        1
    }
}

/// Detect this machine, or load the profile, then apply `--ram`/`--vram`.
///
/// # Errors
/// A profile that cannot be read, or an override that does not parse.
pub fn hardware(machine: &MachineArgs) -> Result<HardwareSnapshot> {
    let mut overrides = machine
        .overrides()
        .map_err(|e| UsageError(format!("{e:#}")))?;
    // The profile is loaded here once; `apply_overrides` then only applies sizes.
    let base = match overrides.profile.take() {
        Some(path) => phw::load_profile(&path)?,
        None => phw::probe(&ProbeOptions {
            measure_bandwidth: true,
            cache_dir: crate::demo::cache_dir().ok(),
        }),
    };
    phw::apply_overrides(base, &overrides).map_err(|e| UsageError(e.to_string()).into())
}

/// The build the plan is for: this binary's backends, or, when planning for
/// another machine (`--vram`, `--hw`), a build that can use its GPUs.
#[must_use]
pub fn build_for(machine: &MachineArgs) -> headroom_planner::solve::Build {
    headroom_planner::solve::Build {
        gpu: gpu_build() || machine.vram.is_some() || machine.hw_file.is_some(),
    }
}

/// Resolve MODEL arguments to GGUF files: paths, directories of GGUF files,
/// or `demo` (also when none is given).
///
/// # Errors
/// A missing file, or a directory without GGUF files.
pub fn resolve_models(models: &[String]) -> Result<Vec<PathBuf>> {
    if models.is_empty() {
        return Ok(vec![crate::demo::demo_model()?]);
    }
    let mut out = Vec::new();
    for m in models {
        if m == "demo" {
            out.push(crate::demo::demo_model()?);
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
                        crate::modelref::is_model_file(n)
                            && crate::modelref::split_part(n).is_none_or(|s| s.index == 1)
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
    use crate::modelref::{self, ModelArg};
    match modelref::classify(m)? {
        ModelArg::Hub(h) => crate::pull::downloaded(&h),
        ModelArg::Catalog { id, quant } => {
            crate::pull::downloaded(&modelref::catalog_ref(&id, quant.as_deref())?)
        }
        ModelArg::Path(p) => Ok(p),
        ModelArg::Demo => crate::demo::demo_model(),
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
    target: crate::pull::choose::Target<'_>,
) -> Result<Vec<(String, ModelProfile)>> {
    use crate::modelref::{self, ModelArg};
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
                let input = crate::pull::plan_input(&h, target)?;
                if input.header_bytes > 0 {
                    eprintln!(
                        "headroom: {h}: planned from its GGUF header alone ({} read of {})",
                        crate::pull::progress::size(input.header_bytes),
                        crate::pull::progress::size(input.size)
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
        let p = crate::demo::demo_model()?;
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
    let header = crate::split::read_local(path).with_context(|| format!("{}", path.display()))?;
    if let Some(key) = header.nested_array_key() {
        bail!(
            "{}: metadata key '{key}' holds nested arrays, which llama.cpp cannot load",
            path.display()
        );
    }
    profile::profile(&header).with_context(|| format!("{}: invalid model", path.display()))
}

/// The llama.cpp build this binary links (the vendored llama-cpp-sys-2 version).
#[must_use]
pub fn llama_cpp_version() -> String {
    "llama-cpp-sys-2 0.1.160".to_string()
}

/// Whether this build can use GPUs.
#[must_use]
pub fn gpu_build() -> bool {
    cfg!(any(feature = "cuda", feature = "vulkan", feature = "metal"))
}
