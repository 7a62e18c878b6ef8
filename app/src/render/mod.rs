//! Turning plans into text for people: the device table, the RAM residency
//! line, what the speed estimate assumes, warnings and the llama.cpp command
//! line. JSON is serde's job.

pub mod basis;
pub mod curve;
pub mod gpus;

use std::fmt::Write as _;

use comfy_table::presets::UTF8_BORDERS_ONLY;
use comfy_table::{CellAlignment, Table};
use headroom_planner::hw::{HardwareSnapshot, format_size};
use headroom_planner::plan::{Plan, Verdict};

fn mib(b: u64) -> String {
    format_size(b)
}

/// A one-line summary: verdict, quantization, layers, context, speed.
#[must_use]
pub fn summary(p: &Plan) -> String {
    let gpu: u32 = p.devices.iter().skip(1).map(|d| d.n_layers).sum();
    let n_layer: u32 = p.devices.iter().map(|d| d.n_layers).sum();
    let layers = if p.devices.len() > 1 {
        format!("{gpu}/{n_layer} layers on GPU")
    } else {
        format!("{n_layer} layers on CPU")
    };
    format!(
        "{} — {}, {layers}, context {}, est. {:.1} tok/s",
        p.verdict.as_str(),
        p.quant,
        p.n_ctx,
        p.est_decode_tokens_per_s
    )
}

/// The calibration line: the last measured run with the same model and
/// settings, next to this plan's prediction.
#[must_use]
pub fn last_run_line(p: &Plan, run: &crate::runner::calibration::Entry) -> String {
    let ratio = if run.measured_peak_bytes > 0 {
        p.ram.peak_bytes as f64 / run.measured_peak_bytes as f64
    } else {
        0.0
    };
    let mut line = format!(
        "measured  last run: peak RSS {} (planned now {}, ×{ratio:.2})",
        mib(run.measured_peak_bytes),
        mib(p.ram.peak_bytes),
    );
    if run.measured_decode_tokens_per_s > 0.0 {
        let _ = write!(
            line,
            ", decode {:.1} tok/s (est. {:.1})",
            run.measured_decode_tokens_per_s, p.est_decode_tokens_per_s
        );
    }
    let age = crate::runner::calibration::now().saturating_sub(run.unix_time);
    let _ = write!(line, ", {} ago", ago(age));
    line
}

fn ago(secs: u64) -> String {
    match secs {
        0..120 => format!("{secs} s"),
        120..7200 => format!("{} min", secs / 60),
        7200..172_800 => format!("{} h", secs / 3600),
        _ => format!("{} days", secs / 86400),
    }
}

/// The full text rendering of a plan.
#[must_use]
pub fn plan_text(p: &Plan, hw: &HardwareSnapshot) -> String {
    let mut s = String::new();
    let name = p.model.name.as_deref().unwrap_or(&p.model.architecture);
    let _ = writeln!(
        s,
        "model     {} ({}, {}, {:.2}B params, {}, file {})",
        p.model.path,
        name,
        p.model.architecture,
        p.model.n_params as f64 / 1e9,
        p.quant,
        format_size(p.model.file_bytes)
    );
    let _ = writeln!(s, "machine   {}", machine_line(hw));
    let mark = match p.verdict {
        Verdict::Fits => "✔",
        Verdict::FitsWithOffload => "◐",
        Verdict::DoesNotFit => "✘",
    };
    let _ = writeln!(s, "verdict   {mark} {}", summary(p));
    let _ = writeln!(
        s,
        "context   {} tokens ({} per sequence × {}), batch {}/{}, KV {}/{}, flash attention {}{}",
        p.n_ctx,
        p.n_ctx / p.n_parallel.max(1),
        p.n_parallel,
        p.settings.n_batch,
        p.settings.n_ubatch,
        p.settings.cache_type_k,
        p.settings.cache_type_v,
        if p.settings.flash_attn { "on" } else { "off" },
        if p.model.n_ctx_train > 0 {
            format!(", trained for {}", p.model.n_ctx_train)
        } else {
            String::new()
        }
    );
    if let Some(kv) = kv_line(p) {
        let _ = writeln!(s, "KV cache  {kv}");
    }
    let mut speed = format!(
        "speed     est. {:.1} tok/s decode, {:.0} tok/s prompt",
        p.est_decode_tokens_per_s, p.est_prompt_tokens_per_s
    );
    if let Some(full) = p.est_full_gpu_decode_tokens_per_s {
        let _ = write!(speed, " ({full:.1} tok/s fully on GPU)");
    }
    let _ = writeln!(s, "{speed}");
    let _ = writeln!(s, "basis     {}\n", basis::plan_line(&p.speed_basis));

    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t.set_header(vec![
        "device", "layers", "weights", "KV", "compute", "overhead", "margin", "total", "budget",
    ]);
    for d in &p.devices {
        t.add_row(vec![
            d.name.clone(),
            d.n_layers.to_string(),
            mib(d.weights_bytes),
            mib(d.kv_bytes),
            mib(d.compute_bytes),
            mib(d.overhead_bytes),
            mib(d.margin_bytes),
            mib(d.total_bytes),
            mib(d.budget_bytes),
        ]);
    }
    for i in 1..9 {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let _ = writeln!(s, "{t}");
    let _ = writeln!(
        s,
        "RAM       peak {} resident = {} anonymous + {} mapped weights; budget {} (allocated {})",
        mib(p.ram.peak_bytes),
        mib(p.ram.anonymous_bytes),
        mib(p.ram.mapped_bytes),
        mib(p.ram.budget_bytes),
        mib(p.ram.allocated_bytes)
    );
    if p.settings.logits == headroom_planner::plan::Logits::Batch {
        let _ = writeln!(
            s,
            "          (--logits batch: the compute buffers hold a logits row per batch token, allocated but almost never touched)"
        );
    }
    for w in &p.warnings {
        let _ = writeln!(s, "warning   {}", w.message);
    }
    let _ = writeln!(
        s,
        "llama.cpp {} {}",
        p.settings.logits.llama_tool(),
        shell_join(&p.llama_args)
    );
    if !p.alternatives.is_empty() {
        let _ = writeln!(s, "\nalso considered:");
        for a in &p.alternatives {
            let _ = writeln!(s, "  {}  {}", a.model.path, summary(a));
        }
    }
    s
}

/// The layer kinds behind the KV cache (`12 full (32768 cells), 36
/// chunked (8704 cells), 1 mtp (no cache)`), when not every layer is plain
/// full attention: the rules `plan --json` spells out in `kv_rules`.
fn kv_line(p: &Plan) -> Option<String> {
    use headroom_planner::profile::LayerKind;
    if p.kv_rules.iter().all(|r| r.kind == LayerKind::Full) {
        return None;
    }
    let parts: Vec<String> = p
        .kv_rules
        .iter()
        .map(|r| {
            let kind = r.kind.name().replace('_', " ");
            let what = match (r.kind, r.cells_per_sequence) {
                (LayerKind::Recurrent, _) => format!("state {}", mib(r.bytes)),
                (_, Some(c)) => format!("{c} cells"),
                (_, None) => "no cache".into(),
            };
            format!("{} {kind} ({what})", r.n_layers)
        })
        .collect();
    Some(parts.join(", "))
}

fn machine_line(hw: &HardwareSnapshot) -> String {
    let mut parts = vec![format!("RAM budget {}", format_size(hw.ram.budget_bytes()))];
    if let Some(cg) = hw.ram.cgroup.as_ref().and_then(|c| c.limit_bytes) {
        parts.push(format!("cgroup limit {}", format_size(cg)));
    }
    for g in &hw.gpus {
        parts.push(format!("{} {} free", g.name, format_size(g.free_bytes)));
    }
    if hw.gpus.is_empty() {
        parts.push("no GPU".into());
    }
    parts.push(format!("{} cores", hw.cpu.physical_cores));
    parts.join(", ")
}

/// Quote arguments for a POSIX shell when they need it.
#[must_use]
pub fn shell_join(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=,:+".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_join_quotes_what_needs_it() {
        let args = vec![
            "-m".to_string(),
            "/tmp/my model's.gguf".to_string(),
            "-c".to_string(),
            "4096".to_string(),
        ];
        assert_eq!(shell_join(&args), r"-m '/tmp/my model'\''s.gguf' -c 4096");
    }
}
