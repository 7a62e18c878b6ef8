//! `headroom catalog refresh [ID|org/repo[:QUANT]…]`: read the catalog's
//! files on the hub (listing and GGUF header, no weights) and record what
//! was read as verified facts, which the catalog overlays.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, bail};

use super::UsageError;
use crate::cli::{CatalogArgs, CatalogCommand, RefreshArgs};
use crate::source::hub::header::HeaderCache;
use crate::source::hub::progress::size;
use crate::source::hub::refresh::{self, Target};
use crate::source::hub::verified;
use crate::source::hub::{FetchError, HubEnv};
use crate::source::hub::{Hub, Timeouts};
use crate::source::modelref::{self, ModelArg, Select};

/// Run `headroom catalog …`.
///
/// # Errors
/// Bad arguments, an unreachable hub, an unwritable facts file, or targets
/// that could not be verified.
pub fn run(args: &CatalogArgs) -> Result<ExitCode> {
    match &args.command {
        CatalogCommand::Refresh(r) => refresh_cmd(r),
    }
}

fn refresh_cmd(args: &RefreshArgs) -> Result<ExitCode> {
    let env = HubEnv::from_env()?;
    let hub = match Hub::new(&env, Timeouts::default()) {
        Ok(h) => h,
        Err(FetchError::Offline) => {
            bail!("catalog refresh reads the hub, and HF_HUB_OFFLINE is set (unset it)")
        }
        Err(e) => return Err(e.into()),
    };
    let mut targets = Vec::new();
    let mut ids = Vec::new();
    for arg in &args.models {
        match modelref::classify(arg).map_err(|e| UsageError(e.to_string()))? {
            ModelArg::Hub(h) => {
                let quant = match &h.select {
                    None => None,
                    Some(Select::Quant(q)) => Some(q.clone()),
                    Some(Select::File(f)) => {
                        targets.push(Target {
                            id: None,
                            repo: h.repo.clone(),
                            quant: modelref::quant_label(f),
                            files: vec![f.clone()],
                            listed: None,
                        });
                        continue;
                    }
                };
                targets.extend(refresh::repo_targets(&hub, &h.repo, quant.as_deref())?);
            }
            ModelArg::Catalog { id, quant } => ids.push((id, quant)),
            ModelArg::Path(_) | ModelArg::Demo | ModelArg::DemoBase => {
                return Err(UsageError(format!(
                    "{arg}: catalog refresh takes catalog ids or org/repo[:QUANT]"
                ))
                .into());
            }
        }
    }
    if args.models.is_empty() || !ids.is_empty() {
        targets.extend(catalog_targets(&ids)?);
    }
    let headers = HeaderCache::open_default()?;
    let checked = refresh::refresh(&hub, &headers, &targets);
    let path = verified::default_path()?;
    let mut facts = verified::load(&path)?;
    let mut failed = 0usize;
    let mut out = std::io::stdout().lock();
    for c in &checked {
        let name = c.target.id.clone().unwrap_or_else(|| c.target.repo.clone());
        let quant = c.target.quant.as_deref().unwrap_or("?");
        match &c.fact {
            Ok(f) => {
                let arch = f
                    .gguf
                    .get("general.architecture")
                    .and_then(|v| v.as_str())
                    .unwrap_or("?");
                writeln!(
                    out,
                    "✔ {name} {quant}: {} ({} bytes), {arch}, {:.2}B parameters, {}",
                    size(f.size_bytes),
                    f.size_bytes,
                    f.n_params as f64 / 1e9,
                    f.files.join(" + ")
                )?;
                facts.upsert(f.clone());
            }
            Err(e) => {
                failed += 1;
                writeln!(out, "✘ {name} {quant}: {e:#}")?;
            }
        }
        for note in &c.notes {
            writeln!(out, "  note: {note}")?;
        }
    }
    let verified_now = checked.len() - failed;
    if verified_now > 0 {
        verified::save(&path, &facts)?;
    }
    writeln!(
        out,
        "{verified_now} of {} verified (headers read: {}); facts in {}",
        checked.len(),
        size(hub.bytes_received()),
        path.display()
    )?;
    drop(out);
    if failed > 0 {
        bail!("{failed} of {} could not be verified", checked.len());
    }
    Ok(ExitCode::SUCCESS)
}

/// The catalog's quantizations to refresh: those of `ids` (all entries when
/// empty), with each quantization's repository, files and listed size.
///
/// # Errors
/// An unreadable catalog, an unknown id or quantization.
fn catalog_targets(ids: &[(String, Option<String>)]) -> Result<Vec<Target>> {
    let catalog = crate::catalog::load_default()?;
    let mut entries = Vec::new();
    if ids.is_empty() {
        entries.extend(catalog.entries().iter().map(|e| (e, None)));
    }
    for (id, quant) in ids {
        let entry = catalog.get(id).ok_or_else(|| {
            UsageError(format!(
                "{id}: not in the catalog ({}); `headroom fit` lists it",
                catalog.origin()
            ))
        })?;
        entries.push((entry, quant.as_deref()));
    }
    let mut targets = Vec::new();
    for (entry, quant) in entries {
        let before = targets.len();
        for q in entry
            .quants
            .iter()
            .filter(|q| quant.is_none_or(|want| q.matches(want)))
        {
            targets.push(Target {
                id: Some(entry.id.clone()),
                repo: q.repo.clone(),
                quant: Some(q.name.clone()),
                files: q.files.clone(),
                // Listed "4.92 GB" means ±5 MB: a unit of 10 MB.
                listed: q
                    .size_bytes
                    .map(|b| (b, q.size_precision.saturating_mul(2))),
            });
        }
        if targets.len() == before {
            bail!(
                "{}: the catalog lists no {} for it",
                entry.id,
                quant.unwrap_or("quantization")
            );
        }
    }
    Ok(targets)
}
