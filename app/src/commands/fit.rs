//! `headroom fit`: rank the catalog's models for this machine (or the one
//! `--ram/--vram/--gpu/--hw` describe), or lay out every quantization of one
//! model. Under the machine, the bandwidths the speeds rest on, and where
//! each figure came from.
//! The ranking itself lives in [`crate::catalog::fit`]; this is its text and
//! JSON.

use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use comfy_table::presets::UTF8_BORDERS_ONLY;
use comfy_table::{CellAlignment, ContentArrangement, Table};
use headroom_planner::hw::{HardwareSnapshot, format_size};
use headroom_planner::plan::{Plan, Verdict};
use headroom_planner::synth::facts::ArchFacts;
use serde::Serialize;

use super::{EXIT_DOES_NOT_FIT, UsageError, hardware};
use crate::catalog::fit::{self as rank, Purpose, QuantRow, Query, Row, Standing};
use crate::catalog::plan::ArchBasis;
use crate::catalog::{Catalog, Entry, USES};
use crate::cli::{FitArgs, MachineArgs};

/// Run `headroom fit`.
///
/// # Errors
/// Bad options, an invalid catalog (named `file:line`), unknown model.
pub fn run(args: &FitArgs, machine: &MachineArgs) -> Result<ExitCode> {
    let query = query(args)?;
    let mut catalog = crate::catalog::load(args.catalog.as_deref())?;
    overlay_verified(&mut catalog);
    let hw = hardware(machine)?;
    let build = machine.build();
    let mut out = std::io::stdout().lock();
    match &args.model {
        Some(id) => {
            let entry = catalog.get(id).ok_or_else(|| {
                UsageError(format!(
                    "'{id}' is not in the catalog ({}); `headroom fit` lists them",
                    catalog.origin()
                ))
            })?;
            let (arch, rows) = rank::quant_rows(&catalog, entry, &hw, build, &query)?;
            let any_fits = rows.iter().any(|r| r.plan.verdict.fits());
            if args.json {
                let doc = ModelDoc {
                    id: &entry.id,
                    name: &entry.name,
                    repo: &entry.repo,
                    arch_basis: basis_words(&arch.basis),
                    arch: &arch.facts,
                    quants: &rows,
                };
                writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
            } else {
                write!(
                    out,
                    "{}",
                    model_text(
                        entry,
                        &arch.basis,
                        &arch.facts,
                        &rows,
                        &hw,
                        args.catalog.is_some()
                    )
                )?;
            }
            Ok(exit(any_fits))
        }
        None => {
            let mut rows = rank::rank(&catalog, &hw, build, &query)?;
            let any_fits = rows.iter().any(|r| r.verdict.fits());
            if let Some(n) = args.top {
                rows.truncate(n);
            }
            if args.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
            } else {
                write!(out, "{}", ranking_text(&rows, &catalog, &hw, &query))?;
            }
            Ok(exit(any_fits))
        }
    }
}

/// Sizes `headroom catalog refresh` read from the hub replace the listed
/// ones. An unreadable record only costs that precision, so it is logged,
/// not fatal.
fn overlay_verified(catalog: &mut Catalog) {
    use crate::source::hub::verified;
    match verified::default_path().and_then(|p| verified::load(&p)) {
        Ok(facts) => {
            verified::overlay(catalog, &facts);
        }
        Err(e) => tracing::warn!("ignoring the verified catalog facts: {e:#}"),
    }
}

fn exit(any_fits: bool) -> ExitCode {
    if any_fits {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_DOES_NOT_FIT)
    }
}

/// Validate the typed options into a ranking query.
fn query(args: &FitArgs) -> Result<Query> {
    let usage = |m: String| anyhow::Error::new(UsageError(m));
    let settings = args.ctx.settings().map_err(|e| usage(format!("{e:#}")))?;
    if let Some(u) = args.uses.iter().find(|u| !USES.contains(&u.as_str())) {
        return Err(usage(format!(
            "--use {u}: not a use tag (known: {})",
            USES.join(", ")
        )));
    }
    if args.min_ctx == Some(0) {
        return Err(usage("--min-ctx must be at least 1".into()));
    }
    if let (Some(c), Some(min)) = (settings.n_ctx, args.min_ctx)
        && c < min
    {
        return Err(usage(format!("--ctx-size {c} is below --min-ctx {min}")));
    }
    let max_download = args
        .max_download
        .as_deref()
        .map(headroom_planner::hw::parse_size)
        .transpose()
        .map_err(|e| usage(format!("--max-download: {e}")))?;
    if let Some(m) = args
        .min_speed
        .filter(|m| !(m.is_finite() && *m > 0.0 && *m <= 1e6))
    {
        return Err(usage(format!(
            "--min-speed {m}: give a speed in tokens/s above 0"
        )));
    }
    Ok(Query {
        settings,
        min_ctx: args.min_ctx,
        uses: args.uses.clone(),
        max_download,
        purpose: Purpose::from_uses(&args.uses),
        min_speed: args.min_speed,
        all: args.all,
    })
}

/// `fit MODEL --json`.
#[derive(Serialize)]
struct ModelDoc<'a> {
    id: &'a str,
    name: &'a str,
    repo: &'a str,
    /// "own", "like ID" or "estimated".
    arch_basis: String,
    arch: &'a ArchFacts,
    quants: &'a [QuantRow],
}

fn basis_words(b: &ArchBasis) -> String {
    match b {
        ArchBasis::Own => "own".into(),
        ArchBasis::Like(id) => format!("like {id}"),
        ArchBasis::Estimated => "estimated".into(),
    }
}

/// Sizes the way READMEs list them (10^9 bytes), `~` when derived.
fn gb(bytes: u64, estimated: bool) -> String {
    format!(
        "{}{:.2} GB",
        if estimated { "~" } else { "" },
        bytes as f64 / 1e9
    )
}

fn mark(v: Verdict) -> &'static str {
    match v {
        Verdict::Fits => "✔",
        Verdict::FitsWithOffload => "◐",
        Verdict::DoesNotFit => "✘",
    }
}

fn machine_text(hw: &HardwareSnapshot) -> String {
    let mut s = format!("{} RAM", format_size(hw.ram.budget_bytes()));
    if hw.gpus.is_empty() {
        s.push_str(", no GPU");
    } else {
        for g in &hw.gpus {
            let _ = write!(s, ", {} {}", g.name, format_size(g.free_bytes));
        }
    }
    s
}

fn layers(p: &Plan, n_layer: Option<u32>) -> String {
    if p.devices.len() <= 1 {
        return "CPU".into();
    }
    let total = n_layer.unwrap_or_else(|| p.devices.iter().map(|d| d.n_layers).sum());
    let on_gpu: u32 = p.devices.iter().skip(1).map(|d| d.n_layers).sum();
    if p.n_cpu_moe > 0 {
        format!("{on_gpu}/{total}, {} MoE in RAM", p.n_cpu_moe)
    } else {
        format!("{on_gpu}/{total}")
    }
}

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t.set_header(header.to_vec());
    if let Some((w, _)) = terminal_width() {
        t.set_content_arrangement(ContentArrangement::Dynamic);
        t.set_width(w);
    }
    t
}

/// The terminal's width, when stdout is one.
fn terminal_width() -> Option<(u16, u16)> {
    use std::io::IsTerminal as _;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    crossterm::terminal::size().ok()
}

fn ranking_text(rows: &[Row], cat: &Catalog, hw: &HardwareSnapshot, q: &Query) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "machine   {}", machine_text(hw));
    if let Some(r) = rows.first() {
        let _ = writeln!(
            s,
            "speed     {}",
            crate::render::basis::machine_line(&r.speed_basis)
        );
    }
    let _ = writeln!(
        s,
        "purpose   {} (floor {:.0} tok/s{}){}",
        q.purpose.name(),
        q.floor(),
        if q.min_speed.is_some() {
            ", --min-speed"
        } else {
            ""
        },
        format!(
            ", {}k context where the model allows",
            q.purpose.min_ctx() / 1024
        )
    );
    let _ = writeln!(
        s,
        "catalog   {} models ({}); best first: at or above the floor by expected quality (quality less the quantization's loss), then slower ones by speed, then those that do not fit\n",
        cat.entries().len(),
        cat.origin()
    );
    let mut t = table(&[
        "#",
        "model",
        "params",
        "quant",
        "",
        "GPU layers",
        "context",
        "tok/s",
        "quality",
        "download",
        "why",
    ]);
    for (i, r) in rows.iter().enumerate() {
        let params = format!(
            "{}{:.1}B",
            if r.arch_estimated { "~" } else { "" },
            r.n_params as f64 / 1e9
        );
        let (layers_cell, ctx, tps, dl) = match &r.plan {
            Some(p) => (
                layers(p, None),
                p.n_ctx.to_string(),
                format!(
                    "{:.0}{}",
                    p.est_decode_tokens_per_s,
                    if r.standing == Standing::TooSlow {
                        "↓"
                    } else {
                        ""
                    }
                ),
                r.download_bytes
                    .map(|b| gb(b, r.size_estimated))
                    .unwrap_or_default(),
            ),
            None => ("—".into(), "—".into(), "—".into(), "—".into()),
        };
        let mut id = r.id.clone();
        if !r.arch_verified {
            id.push('†');
        }
        if !r.superseded_by.is_empty() {
            id.push('§');
        }
        if r.variant_of.is_some() {
            id.push('=');
        }
        t.add_row(vec![
            (i + 1).to_string(),
            id,
            params,
            r.quant.clone().unwrap_or_else(|| "—".into()),
            mark(r.verdict).to_string(),
            layers_cell,
            ctx,
            tps,
            r.expected_quality
                .map(|q| format!("{q:.0}"))
                .unwrap_or_else(|| "—".into()),
            dl,
            r.why.clone(),
        ]);
    }
    for c in [0, 2, 6, 7, 8, 9] {
        if let Some(col) = t.column_mut(c) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    let _ = writeln!(s, "{t}");
    if rows.iter().any(|r| r.estimated) {
        let _ = writeln!(
            s,
            "~ the architecture of the sibling its card names (arch_like), or a size not listed"
        );
    }
    if rows.iter().any(|r| !r.arch_verified) {
        let _ = writeln!(
            s,
            "† unverified: the planner has not been checked against llama.cpp's accounting on this architecture"
        );
    }
    if rows.iter().any(|r| !r.superseded_by.is_empty()) {
        let _ = writeln!(
            s,
            "§ superseded by a model that is usable here (shown because of --all)"
        );
    }
    if rows.iter().any(|r| r.variant_of.is_some()) {
        let _ = writeln!(
            s,
            "= the same model as a row above, another file of it (shown because of --all)"
        );
    }
    if rows.iter().any(|r| r.standing == Standing::TooSlow) {
        let _ = writeln!(s, "↓ under the speed floor");
    }
    let _ = writeln!(
        s,
        "quality: LMArena text Elo scale, less the quantization's loss (`--json` gives each figure's basis)"
    );
    let _ = writeln!(
        s,
        "✔ runs fully  ◐ layers or experts in RAM  ✘ does not fit — `headroom fit MODEL` shows every quantization"
    );
    s
}

fn model_text(
    e: &Entry,
    basis: &ArchBasis,
    facts: &ArchFacts,
    rows: &[QuantRow],
    hw: &HardwareSnapshot,
    custom_catalog: bool,
) -> String {
    let mut s = String::new();
    let n_params = rows.first().map_or(0, |r| r.plan.model.n_params);
    let ctx = if facts.context_length > 0 {
        format!(", context up to {}", facts.context_length)
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "model     {} — {} ({}, {}{:.2}B params{ctx})",
        e.id,
        e.name,
        facts.architecture,
        if *basis == ArchBasis::Own { "" } else { "~" },
        n_params as f64 / 1e9
    );
    let _ = writeln!(s, "repo      {}", e.repo);
    let arch = match basis {
        ArchBasis::Own => "its own facts (config.json or header)".to_string(),
        ArchBasis::Like(id) => format!(
            "estimated: that of {id} ({})",
            e.arch_like_why.as_deref().unwrap_or("same architecture")
        ),
        ArchBasis::Estimated => {
            "estimated: a generic shape for its parameter count, keeping the facts listed".into()
        }
    };
    let _ = writeln!(s, "arch      {arch}");
    let _ = writeln!(s, "machine   {}", machine_text(hw));
    if let Some(r) = rows.iter().find(|r| r.chosen).or(rows.first()) {
        let _ = writeln!(
            s,
            "speed     {}: {}",
            r.quant,
            crate::render::basis::plan_line(&r.speed_basis)
        );
    }
    s.push('\n');
    let mut t = table(&[
        "",
        "quant",
        "download",
        "bits/w",
        "",
        "GPU layers",
        "context",
        "tok/s",
        "RAM",
        "GPU",
        "file",
    ]);
    let n_layer = Some(facts.block_count);
    for r in rows {
        let p = &r.plan;
        let gpu: u64 = p.devices.iter().skip(1).map(|d| d.total_bytes).sum();
        t.add_row(vec![
            if r.chosen { "▶" } else { "" }.to_string(),
            r.quant.clone(),
            if r.verified {
                format!("{} ✓", gb(r.download_bytes, false))
            } else {
                r.size_listed
                    .clone()
                    .unwrap_or_else(|| gb(r.download_bytes, r.size_estimated))
            },
            format!("{:.2}", r.bits_per_weight),
            mark(p.verdict).to_string(),
            layers(p, n_layer),
            p.n_ctx.to_string(),
            format!("{:.1}", p.est_decode_tokens_per_s),
            format_size(p.ram.anonymous_bytes),
            if p.devices.len() > 1 {
                format_size(gpu)
            } else {
                "—".into()
            },
            r.files.join(", "),
        ]);
    }
    for c in [2, 3, 6, 7, 8, 9] {
        if let Some(col) = t.column_mut(c) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    let _ = writeln!(s, "{t}");
    let _ = writeln!(
        s,
        "▶ fit's pick: the best expected quality at or above the speed floor, else the fastest  ✔ runs fully  ◐ layers or experts in RAM  ✘ does not fit"
    );
    let _ = writeln!(
        s,
        "RAM: resident anonymous memory; mapped weights come on top and can page from disk; ✓ size verified on the hub"
    );
    if let Some(r) = rows.iter().find(|r| r.chosen) {
        s.push_str(&run_it(&e.id, r, custom_catalog));
    }
    s
}

/// The "run it" lines of `fit ID`: the commands that fetch and chat with the
/// chosen file, `headroom pull ID:QUANT` and `headroom chat ID:QUANT` (a
/// catalog given with `--catalog` is unknown to them, so they name the hub
/// reference llama.cpp's `-hf` gets instead), then llama.cpp's own chat
/// program with the plan's flags.
fn run_it(id: &str, r: &QuantRow, custom_catalog: bool) -> String {
    let args = &r.plan.llama_args;
    let hub = args
        .iter()
        .position(|a| a == "-hf")
        .and_then(|i| args.get(i + 1));
    let model = match hub {
        Some(h) if custom_catalog => h.clone(),
        _ => format!("{id}:{}", r.quant),
    };
    let model = crate::render::shell_join(std::slice::from_ref(&model));
    format!(
        "run it   headroom pull {model}\n         headroom chat {model}\n         llama.cpp {} {}\n",
        r.plan.settings.logits.llama_tool(),
        crate::render::shell_join(args)
    )
}
