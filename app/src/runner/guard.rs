//! The plan guards the load: a plan that does not fit is refused before any
//! weight is read, with the nearest plan that does fit; a plan that fits is
//! checked against llama.cpp's own `no_alloc` accounting of the same load.

use std::path::{Path, PathBuf};

use headroom_planner::gguf::GgmlType;
use headroom_planner::hw::{HardwareSnapshot, format_size};
use headroom_planner::plan::{FlashAttn, Plan, Settings};
use headroom_planner::profile::ModelProfile;
use headroom_planner::solve::{self, Build};

use crate::llama::Breakdown;

/// A plan that fits, and the change that gets there.
#[derive(Debug, Clone)]
pub struct Nearest {
    /// What to change, as flags (`-c 2048`, `-ctk q8_0 -ctv q8_0 -fa on`, a file).
    pub change: String,
    /// The plan with that change.
    pub plan: Plan,
    /// The settings that produce it.
    pub settings: Settings,
    /// The file, when the change is another quantization.
    pub path: PathBuf,
}

/// Why the plan does not fit, in one line (the planner's own reason).
#[must_use]
pub fn reason(plan: &Plan) -> String {
    plan.warnings
        .iter()
        .find(|w| w.code == headroom_planner::plan::WarningCode::DoesNotFit)
        .map_or_else(
            || "the plan does not fit".to_string(),
            |w| w.message.clone(),
        )
}

/// The nearest plan that fits, trying the smallest changes first: letting the
/// planner choose the GPU layers, a quantized KV cache, a smaller context,
/// both, then a smaller quantization of the same model found next to the file.
/// Reads headers only.
#[must_use]
pub fn nearest_fit(
    profile: &ModelProfile,
    path: &Path,
    settings: &Settings,
    plan: &Plan,
    hw: &HardwareSnapshot,
    build: Build,
    siblings: &dyn Fn(&Path) -> Vec<(PathBuf, ModelProfile)>,
) -> Option<Nearest> {
    let run = |p: &ModelProfile, path: &Path, s: &Settings| {
        solve::plan(p, &path.display().to_string(), s, hw, build)
    };
    let mut tries: Vec<(String, Settings)> = Vec::new();
    if settings.n_gpu_layers.is_some() {
        tries.push((
            "let headroom choose the GPU layers (drop -ngl)".into(),
            Settings {
                n_gpu_layers: None,
                ..settings.clone()
            },
        ));
    }
    let quant_kv = |s: &Settings| Settings {
        cache_type_k: GgmlType::Q8_0,
        cache_type_v: GgmlType::Q8_0,
        flash_attn: FlashAttn::On,
        ..s.clone()
    };
    let kv_is_f16 =
        settings.cache_type_k == GgmlType::F16 && settings.cache_type_v == GgmlType::F16;
    if kv_is_f16 {
        tries.push(("-ctk q8_0 -ctv q8_0 -fa on".into(), quant_kv(settings)));
    }
    let mut c = plan.n_ctx / 2;
    while c >= 256 {
        let s = Settings {
            n_ctx: Some(c),
            ..settings.clone()
        };
        tries.push((format!("-c {c}"), s.clone()));
        if kv_is_f16 {
            tries.push((format!("-c {c} -ctk q8_0 -ctv q8_0 -fa on"), quant_kv(&s)));
        }
        c /= 2;
    }
    for (change, s) in tries {
        let p = run(profile, path, &s);
        if p.verdict.fits() {
            return Some(Nearest {
                change,
                plan: p,
                settings: s,
                path: path.to_path_buf(),
            });
        }
    }
    smaller_quantization(profile, &siblings(path), settings, &run)
}

/// Other GGUF files of the same model (same architecture, layers and
/// parameter count) among the files beside it, smallest change first.
fn smaller_quantization(
    profile: &ModelProfile,
    siblings: &[(PathBuf, ModelProfile)],
    settings: &Settings,
    run: &dyn Fn(&ModelProfile, &Path, &Settings) -> Plan,
) -> Option<Nearest> {
    let mut found: Vec<(u64, &PathBuf, &ModelProfile)> = siblings
        .iter()
        .filter(|(_, other)| {
            other.arch == profile.arch
                && other.n_layer == profile.n_layer
                && other.n_params == profile.n_params
                && other.file_bytes() < profile.file_bytes()
        })
        .map(|(p, other)| (other.file_bytes(), p, other))
        .collect();
    // Largest (best quality) first.
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found.into_iter().find_map(|(_, p, other)| {
        let plan = run(other, p, settings);
        plan.verdict.fits().then(|| Nearest {
            change: format!("use {} ({})", p.display(), other.quant),
            plan,
            settings: settings.clone(),
            path: p.clone(),
        })
    })
}

/// Why even the smallest plan (context 256, q8_0 KV cache, headroom's choice
/// of GPU layers) does not fit: the floor this model needs here.
#[must_use]
pub fn floor_reason(
    profile: &ModelProfile,
    path: &Path,
    settings: &Settings,
    hw: &HardwareSnapshot,
    build: Build,
) -> String {
    let s = Settings {
        n_ctx: Some(256),
        n_gpu_layers: None,
        cache_type_k: GgmlType::Q8_0,
        cache_type_v: GgmlType::Q8_0,
        flash_attn: FlashAttn::On,
        ..settings.clone()
    };
    reason(&solve::plan(
        profile,
        &path.display().to_string(),
        &s,
        hw,
        build,
    ))
}

/// One device's planned bytes next to llama.cpp's accounting of the same load.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceCheck {
    /// The plan's device name.
    pub device: String,
    /// What the plan put in llama.cpp's buffers there (weights, KV, compute).
    pub planned_bytes: u64,
    /// What llama.cpp's `no_alloc` accounting reports for the same buffers.
    pub llama_bytes: u64,
    /// What must fit on the device, with llama.cpp's figure in place of the
    /// plan's where llama.cpp's is larger (for RAM: the resident anonymous
    /// part and the margin, as the planner counts it).
    pub total_bytes: u64,
    /// The device's budget (for the CPU: the RAM budget).
    pub budget_bytes: u64,
}

impl DeviceCheck {
    /// llama.cpp's figure relative to the plan's (0.05 = 5% more).
    #[must_use]
    pub fn difference(&self) -> f64 {
        if self.planned_bytes == 0 {
            return if self.llama_bytes == 0 { 0.0 } else { 1.0 };
        }
        self.llama_bytes as f64 / self.planned_bytes as f64 - 1.0
    }
}

/// Compare the plan, device by device, with llama.cpp's accounting. Buffers
/// are matched by llama.cpp's buffer-type names; buffers in RAM that the plan
/// does not name count against the CPU device.
#[must_use]
pub fn cross_check(plan: &Plan, acct: &Breakdown) -> Vec<DeviceCheck> {
    plan.devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let planned: u64 = d
                .buffers
                .iter()
                .map(|b| b.model_bytes + b.context_bytes + b.compute_bytes)
                .sum();
            let named = |name: &str| {
                plan.devices
                    .iter()
                    .any(|dd| dd.buffers.iter().any(|b| b.name == name))
            };
            let llama: u64 = acct
                .buffers
                .iter()
                .filter(|b| {
                    d.buffers.iter().any(|pb| pb.name == b.name)
                        || (i == 0 && b.in_ram() && !named(&b.name))
                })
                .map(crate::llama::BufferUse::total)
                .sum();
            let extra = llama.saturating_sub(planned);
            // RAM is judged as the planner judges it: what must stay resident
            // (anonymous memory plus the margin) against the RAM budget;
            // mapped weights can be paged back from the file.
            let (total, budget) = if i == 0 {
                (
                    plan.ram.anonymous_bytes + d.margin_bytes + extra,
                    plan.ram.budget_bytes,
                )
            } else {
                (d.total_bytes + extra, d.budget_bytes)
            };
            DeviceCheck {
                device: d.name.clone(),
                planned_bytes: planned,
                llama_bytes: llama,
                total_bytes: total,
                budget_bytes: budget,
            }
        })
        .collect()
}

/// One line per device where llama.cpp's accounting differs from the plan by
/// more than `tolerance` (0.05 = 5%).
#[must_use]
pub fn disagreements(checks: &[DeviceCheck], tolerance: f64) -> Vec<String> {
    checks
        .iter()
        .filter(|c| c.difference().abs() > tolerance)
        .map(|c| {
            format!(
                "{}: llama.cpp accounts {} where the plan has {} ({:+.1}%); using the larger",
                c.device,
                format_size(c.llama_bytes),
                format_size(c.planned_bytes),
                c.difference() * 100.0
            )
        })
        .collect()
}

/// The first device whose total, with the larger figure, exceeds its budget.
#[must_use]
pub fn over_budget(checks: &[DeviceCheck]) -> Option<&DeviceCheck> {
    checks.iter().find(|c| c.total_bytes > c.budget_bytes)
}

#[cfg(test)]
mod tests {
    //! The cross-check decides whether `run` refuses a plan that fits by the
    //! planner's own figures: these pin its arithmetic on plain values (a
    //! plan from the solver, llama.cpp's breakdown written out by hand).

    use headroom_planner::hw::{self, HardwareSnapshot};
    use headroom_planner::profile;
    use headroom_planner::synth::{self, Mix, Shape};

    use super::*;
    use crate::llama::{BufferUse, ContextInfo, DeviceKind};

    const MIB: u64 = 1 << 20;

    fn machine() -> HardwareSnapshot {
        hw::parse_profile(
            include_str!("../../../planner/tests/fixtures/hw/gpu-8g-ram-16g.toml"),
            Path::new("gpu-8g-ram-16g.toml"),
        )
        .expect("the fixture profile parses")
    }

    /// Llama 3.2 1B Q4_K_M at 4096 context with `ngl` layers on the 8 GiB GPU.
    fn plan(ngl: u32) -> Plan {
        let header = synth::build(Shape::Llama1B, Mix::Q4KM).expect("synthetic header");
        let p = profile::profile(&header).expect("profile");
        let s = Settings {
            n_ctx: Some(4096),
            n_gpu_layers: Some(ngl),
            ..Settings::default()
        };
        solve::plan(&p, "m.gguf", &s, &machine(), Build { gpu: true })
    }

    /// llama.cpp's breakdown that agrees with the plan buffer for buffer,
    /// each buffer scaled by `scale` (1.0 = the plan's own figures).
    fn breakdown(plan: &Plan, scale: f64) -> Breakdown {
        let buffers = plan
            .devices
            .iter()
            .flat_map(|d| {
                let gpu = d.kind != headroom_planner::plan::DeviceKind::Cpu;
                d.buffers.iter().map(move |b| BufferUse {
                    name: b.name.clone(),
                    device: d.name.clone(),
                    device_kind: if gpu {
                        DeviceKind::Gpu
                    } else {
                        DeviceKind::Cpu
                    },
                    model: (b.model_bytes as f64 * scale) as u64,
                    context: (b.context_bytes as f64 * scale) as u64,
                    compute: (b.compute_bytes as f64 * scale) as u64,
                    is_host: !gpu,
                })
            })
            .collect();
        Breakdown {
            buffers,
            info: ContextInfo::default(),
        }
    }

    #[test]
    fn agreeing_accounting_changes_nothing() {
        let plan = plan(16);
        assert!(plan.verdict.fits(), "{:?}", plan.warnings);
        let checks = cross_check(&plan, &breakdown(&plan, 1.0));
        assert_eq!(checks.len(), plan.devices.len());
        for (c, d) in checks.iter().zip(&plan.devices) {
            assert_eq!(c.planned_bytes, c.llama_bytes, "{}", c.device);
            assert_eq!(c.difference(), 0.0);
            if c.device == plan.devices[0].name {
                assert_eq!(c.total_bytes, plan.ram.anonymous_bytes + d.margin_bytes);
                assert_eq!(c.budget_bytes, plan.ram.budget_bytes);
            } else {
                assert_eq!(c.total_bytes, d.total_bytes);
                assert_eq!(c.budget_bytes, d.budget_bytes);
            }
        }
        assert!(disagreements(&checks, 0.05).is_empty());
        assert!(over_budget(&checks).is_none());
    }

    #[test]
    fn a_larger_llama_figure_is_added_and_named() {
        let plan = plan(16);
        let checks = cross_check(&plan, &breakdown(&plan, 1.10));
        let gpu = checks
            .iter()
            .find(|c| c.device != plan.devices[0].name)
            .expect("a GPU row");
        let d = plan
            .devices
            .iter()
            .find(|d| d.name == gpu.device)
            .expect("planned");
        // The extra 10% is carried into what must fit, not averaged away.
        assert_eq!(
            gpu.total_bytes,
            d.total_bytes + (gpu.llama_bytes - gpu.planned_bytes)
        );
        assert!(
            (gpu.difference() - 0.10).abs() < 0.001,
            "{}",
            gpu.difference()
        );
        let lines = disagreements(&checks, 0.05);
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&gpu.device) && l.contains("+10.0%")),
            "{lines:?}"
        );
        // Within tolerance, nothing is said.
        assert!(disagreements(&checks, 0.2).is_empty());
    }

    #[test]
    fn a_smaller_llama_figure_never_lowers_what_must_fit() {
        let plan = plan(16);
        let checks = cross_check(&plan, &breakdown(&plan, 0.5));
        for (c, d) in checks.iter().zip(&plan.devices).skip(1) {
            assert_eq!(c.total_bytes, d.total_bytes, "{}", c.device);
        }
        assert!(over_budget(&checks).is_none());
    }

    #[test]
    fn ram_buffers_the_plan_does_not_name_count_against_the_cpu() {
        let plan = plan(0);
        let mut acct = breakdown(&plan, 1.0);
        acct.buffers.push(BufferUse {
            name: "CPU_SOMETHING_NEW".into(),
            device: "CPU".into(),
            device_kind: DeviceKind::Cpu,
            model: 0,
            context: 0,
            compute: 64 * MIB,
            is_host: true,
        });
        let checks = cross_check(&plan, &acct);
        assert_eq!(checks[0].llama_bytes, checks[0].planned_bytes + 64 * MIB);
        assert_eq!(
            checks[0].total_bytes,
            plan.ram.anonymous_bytes + plan.devices[0].margin_bytes + 64 * MIB
        );
    }

    #[test]
    fn llama_cpp_needing_more_than_the_budget_refuses() {
        let plan = plan(16);
        let gpu = &plan.devices[1];
        // llama.cpp's accounting wants the whole budget again on the GPU.
        let mut acct = breakdown(&plan, 1.0);
        let row = acct
            .buffers
            .iter_mut()
            .find(|b| b.device == gpu.name)
            .expect("a GPU buffer");
        row.compute += gpu.budget_bytes;
        let checks = cross_check(&plan, &acct);
        let over = over_budget(&checks).expect("over budget");
        assert_eq!(over.device, gpu.name);
        assert!(over.total_bytes > over.budget_bytes);
    }
}
