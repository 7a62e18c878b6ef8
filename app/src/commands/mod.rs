//! One short file per subcommand: turn the validated request into calls of
//! the stages (`source`, `runner`, `render`, `tui`) and an exit code. Nothing
//! imports this module but `main`.

mod accounting;
mod catalog;
pub mod chat;
pub mod fit;
mod hw;
mod list;
mod plan;
mod pull;
pub mod run;
mod serve;

use std::process::ExitCode;

use anyhow::Result;
use headroom_planner::hw::{self as phw, HardwareSnapshot, ProbeOptions};

use crate::cli::{Cli, Command, ContextArgs, GenArgs, MachineArgs};
use crate::runner::calibration;
use crate::runner::preflight::{self, Decision, Request};

pub use crate::error::{EXIT_DOES_NOT_FIT, UsageError};

/// Run the parsed command.
///
/// # Errors
/// Any failure, with context for the one-line message `main` prints.
pub fn dispatch(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Plan(args) => plan::run(&args, &cli.machine),
        Command::Run(args) => run::run(&args, &cli.machine, cli.verbose),
        Command::Chat(args) => chat::run(&args, &cli.machine, cli.verbose),
        Command::Serve(args) => serve::run(&args, &cli.machine, cli.verbose),
        Command::Fit(args) => fit::run(&args, &cli.machine),
        Command::Hw(args) => hw::run(&args, &cli.machine),
        Command::LlamaAccounting(args) => accounting::run(&args, &cli.machine),
        Command::Pull(args) => pull::run(&args, &cli.machine),
        Command::List(args) => list::run(&args, &cli.machine),
        Command::Catalog(args) => catalog::run(&args),
        Command::Completions(args) => {
            let mut cmd = crate::cli::command();
            let name = cmd.get_name().to_string();
            // Into memory first: clap_complete panics on a write error, and a
            // closed pipe (`| head`) is not worth a panic.
            let mut script = Vec::new();
            clap_complete::generate(args.shell, &mut cmd, name, &mut script);
            std::io::Write::write_all(&mut std::io::stdout().lock(), &script)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::ProbeDevice(args) => {
            let json = crate::llama::device_speed::probe_json(&args.name).ok_or_else(|| {
                anyhow::anyhow!("{}: the device could not be measured", args.name)
            })?;
            println!("{json}");
            Ok(ExitCode::SUCCESS)
        }
        Command::DemoModel(args) => {
            let path = crate::source::demo::named(&args.name)
                .ok_or_else(|| UsageError(format!("{}: not a demo model", args.name)))??;
            println!("{}", path.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Detect this machine, or load the profile, then apply `--ram`/`--vram`,
/// then `--gpu`.
///
/// Whose CPU and RAM bandwidth the plan prices ([`phw::Host`]): this
/// machine's when probed, `--ram`/`--vram` only resizing its memory (its
/// measured bandwidth and calibration hold); the profile's
/// with `--hw`; a named unified part's, or a typical desktop's for named
/// discrete cards, with `--gpu` (`phw::apply_named_gpus`). Only this
/// machine's plans are calibrated by its runs, and only its runs are
/// recorded as this machine's.
///
/// # Errors
/// A profile that cannot be read, or an override that does not parse.
pub fn hardware(machine: &MachineArgs) -> Result<HardwareSnapshot> {
    let mut overrides = machine
        .overrides()
        .map_err(|e| UsageError(format!("{e:#}")))?;
    let cards = machine
        .named_gpus()
        .map_err(|e| UsageError(format!("{e:#}")))?;
    // The profile is loaded here once; `apply_overrides` then only applies sizes.
    let base = match overrides.profile.take() {
        Some(path) => phw::load_profile(&path)?,
        None => {
            let mut hw = phw::probe(&ProbeOptions {
                measure_bandwidth: true,
                cache_dir: crate::files::cache_dir().ok(),
            });
            // Named cards (`--gpu`) plan for another host: the registry is
            // not read (nor its backends started). Otherwise reading it
            // starts the backends, whose cost every plan of this machine
            // counts (a run here starts them too, `--vram` or not).
            if crate::llama::gpu_build() && cards.is_none() {
                // `--vram` replaces the GPUs: no registry is needed, and the
                // cost is taken from the cache when it holds it, without
                // starting the backends (about 55 ms of CPU with Vulkan, from
                // fit_speed's CLI rows).
                let cached = overrides
                    .vram_bytes
                    .is_some()
                    .then(crate::llama::devices::cached_runtime)
                    .flatten();
                let (rss, virt) = cached.unwrap_or_else(|| {
                    (
                        crate::llama::devices::runtime_bytes(),
                        crate::llama::devices::runtime_virtual_bytes(),
                    )
                });
                hw.ram.runtime_bytes = Some(rss);
                hw.ram.runtime_virtual_bytes = Some(virt);
                // The GPUs a load in this build will use are the ones
                // llama.cpp's registry lists.
                if overrides.vram_bytes.is_none() {
                    hw = phw::use_registry_devices(hw, &crate::llama::devices::registry());
                    // A device no driver or table gives a speed for is
                    // measured (once per machine and build, then cached).
                    hw = phw::use_measured_speeds(hw, crate::llama::device_speed::speed_of);
                    if let Some(why) = crate::llama::devices::none_reason() {
                        hw.notes.push(format!("no GPU: {why}"));
                    }
                }
            }
            // This machine's CPU: earlier runs here calibrate its speed
            // (`--gpu` drops the factors when it names another host).
            hw.ram.speed_calibration = crate::files::data_dir()
                .ok()
                .and_then(|dir| calibration::speed_calibration(&dir, &hw.cpu));
            hw
        }
    };
    let hw = phw::apply_overrides(base, &overrides).map_err(|e| UsageError(e.to_string()))?;
    let hw = match cards {
        None => hw,
        Some(cards) => phw::apply_named_gpus(hw, &cards, overrides.ram_bytes.is_some())
            .map_err(|e| UsageError(e.to_string()))?,
    };
    if hw.host == phw::Host::ThisMachine {
        // This process's runs are recorded as this machine's.
        calibration::set_this_machine(&hw.cpu);
    }
    let workers = machine
        .rpc_workers()
        .map_err(|e| UsageError(format!("{e:#}")))?;
    match workers {
        None => Ok(hw),
        Some((endpoints, budgets)) => {
            // Probed and connected through llama.cpp now, so the plan reads
            // the memory the workers report and the load that follows in
            // this process uses the same devices.
            let devices = crate::llama::rpc::connect(&endpoints)?;
            let devices: Vec<phw::RpcDevice> = devices
                .iter()
                .map(|d| {
                    let at = endpoints.iter().position(|e| *e == d.endpoint);
                    phw::RpcDevice {
                        name: d.buffer_name.clone(),
                        free_bytes: d.free_bytes,
                        total_bytes: d.total_bytes,
                        budget_bytes: at.and_then(|i| budgets[i]),
                    }
                })
                .collect();
            let mut hw = phw::add_rpc_devices(hw, &devices);
            hw.rpc_link_bytes_per_s = machine.rpc_bandwidth;
            Ok(hw)
        }
    }
}

/// Resolve MODEL and the machine, then plan, guard and cross-check the load
/// (`run` and `chat`).
///
/// # Errors
/// Bad options, an unreadable model, or llama.cpp's accounting failing.
pub fn preflight(
    model: Option<&str>,
    ctx: &ContextArgs,
    gen_args: &GenArgs,
    machine: &MachineArgs,
) -> Result<Decision> {
    if ctx.parallel == Some(crate::cli::Parallel::Auto) {
        return Err(UsageError(
            "--parallel auto chooses a server's slots: give it to plan or serve, or give a number"
                .into(),
        )
        .into());
    }
    let settings = ctx.settings().map_err(|e| UsageError::from_chain(&e))?;
    let hw = hardware(machine)?;
    let models: Vec<String> = model.map(str::to_string).into_iter().collect();
    let paths = crate::source::resolve_models(&models)?;
    let [path] = paths.as_slice() else {
        return Err(UsageError(format!(
            "{}: a directory of {} GGUF files; give one file",
            model.unwrap_or("demo"),
            paths.len()
        ))
        .into());
    };
    let profile = crate::source::load_profile(path)?;
    let mut decision = preflight::decide(Request {
        path,
        profile: &profile,
        settings: &settings,
        hw,
        force: gen_args.force,
        threads: gen_args.threads,
        siblings: &crate::source::siblings,
    })?;
    let gpu_flag = if machine.gpu.is_some() {
        Some("--gpu")
    } else {
        machine
            .vram
            .as_deref()
            .is_some_and(|v| v != "0")
            .then_some("--vram")
    };
    if let Decision::Ready(go) = &mut decision
        && let Some(flag) = gpu_flag
        && !crate::llama::gpu_build()
    {
        go.warnings.insert(
            0,
            format!("this build has no GPU backend: {flag} is ignored when running"),
        );
    }
    Ok(decision)
}
