//! Which file of a repository to take: the one asked for, or the one the
//! planner picks for this machine — and why, in a sentence.
//!
//! Picking reads as few headers as it can. One header (the Q4_K_M file when
//! there is one) gives the architecture, tokenizer and tensor shapes every
//! quantization of the model shares; each other file's profile is that one
//! with its weights scaled to the file's exact size, and every file is
//! planned with the same solver and ranked by `solve::choose` (the rule
//! `plan` uses for several files). The winner's own header is then read and
//! planned exactly; if the exact plan ranks differently, the ranking is
//! redone with it, until the chosen file's plan is exact. llama.cpp and
//! ollama take Q4_K_M whatever the machine; headroom says when it differs.

use anyhow::{Result, bail};
use headroom_planner::hw::HardwareSnapshot;
use headroom_planner::plan::{Plan, Settings, Verdict};
use headroom_planner::profile::ModelProfile;
use headroom_planner::solve::{self, Build};

use super::progress::size;
use crate::source::hub::RemoteFile;
use crate::source::modelref::{self, Select};

/// A downloadable model: one file, or all parts of a split one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its quantization label (from the file name).
    pub quant: Option<String>,
    /// Its files, parts in order.
    pub files: Vec<RemoteFile>,
}

impl Candidate {
    /// Total bytes of all parts.
    #[must_use]
    pub fn size(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// The path llama.cpp is given: the file, or the first part.
    #[must_use]
    pub fn first(&self) -> &str {
        self.files.first().map_or("", |f| f.path.as_str())
    }

    /// The quantization label, or the file name when there is none.
    #[must_use]
    pub fn label(&self) -> String {
        self.quant.clone().unwrap_or_else(|| {
            self.first()
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_string()
        })
    }
}

/// The models in a listing: GGUF model files (no projectors), split parts
/// grouped (a set with a missing part is left out), sorted by size.
#[must_use]
pub fn candidates(files: &[RemoteFile]) -> Vec<Candidate> {
    let mut out = Vec::new();
    for f in files.iter().filter(|f| modelref::is_model_file(&f.path)) {
        match modelref::split_part(&f.path) {
            None => out.push(Candidate {
                quant: modelref::quant_label(&f.path),
                files: vec![f.clone()],
            }),
            Some(part) if part.index == 1 => {
                let parts: Option<Vec<RemoteFile>> = (1..=part.count)
                    .map(|i| {
                        let name = modelref::split_name(part.base, i, part.count);
                        files.iter().find(|g| g.path == name).cloned()
                    })
                    .collect();
                if let Some(parts) = parts {
                    out.push(Candidate {
                        quant: modelref::quant_label(&f.path),
                        files: parts,
                    });
                }
            }
            Some(_) => {}
        }
    }
    out.sort_by(|a, b| {
        a.size()
            .cmp(&b.size())
            .then_with(|| a.first().cmp(b.first()))
    });
    out
}

/// The candidate `select` names.
///
/// # Errors
/// None matches (the message lists what there is), or several do.
pub fn select<'a>(repo: &str, cands: &'a [Candidate], select: &Select) -> Result<&'a Candidate> {
    let matches: Vec<&Candidate> = match select {
        Select::Quant(q) => cands
            .iter()
            .filter(|c| {
                c.quant
                    .as_deref()
                    .is_some_and(|l| l.eq_ignore_ascii_case(q))
            })
            .collect(),
        Select::File(f) => cands
            .iter()
            .filter(|c| {
                let first = c.first();
                first.eq_ignore_ascii_case(f)
                    || first
                        .rsplit('/')
                        .next()
                        .is_some_and(|n| n.eq_ignore_ascii_case(f))
            })
            .collect(),
    };
    match matches.as_slice() {
        [one] => Ok(one),
        [] => {
            let what = match select {
                Select::Quant(q) => format!("no {q} file"),
                Select::File(f) => format!("no file {f}"),
            };
            bail!("{repo} has {what}; it has: {}", available(cands));
        }
        several => bail!(
            "{repo} has several files for that: {}; name one (org/repo:FILE.gguf)",
            several
                .iter()
                .map(|c| c.first())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `Q4_K_M (4.92 GB), Q8_0 (8.54 GB), …`.
#[must_use]
pub fn available(cands: &[Candidate]) -> String {
    if cands.is_empty() {
        return "no GGUF model files".into();
    }
    cands
        .iter()
        .map(|c| format!("{} ({})", c.label(), size(c.size())))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the plans are made for.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The machine.
    pub hw: &'a HardwareSnapshot,
    /// The settings (context, batch, cache types…).
    pub settings: &'a Settings,
    /// The build.
    pub build: Build,
}

/// The planner's pick.
#[derive(Debug, Clone)]
pub struct Choice {
    /// Index into the candidates.
    pub index: usize,
    /// Its exact plan.
    pub plan: Plan,
    /// Why, in one sentence.
    pub why: String,
    /// Headers read (exact profiles made).
    pub headers_read: usize,
}

/// Choose among `cands` for `target`; `exact` gives a candidate's real
/// profile (reading its header).
///
/// # Errors
/// No candidates, or a header that cannot be read.
pub fn choose(
    cands: &[Candidate],
    target: Target<'_>,
    exact: &mut dyn FnMut(&Candidate) -> Result<ModelProfile>,
) -> Result<Choice> {
    if cands.is_empty() {
        bail!("no GGUF model files to choose from");
    }
    let reference = cands
        .iter()
        .position(|c| c.quant.as_deref() == Some("Q4_K_M"))
        .unwrap_or(cands.len() / 2);
    let base = exact(&cands[reference])?;
    let mut profiles: Vec<(ModelProfile, bool)> = cands
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if i == reference {
                (base.clone(), true)
            } else {
                (scaled(&base, c), false)
            }
        })
        .collect();
    let mut headers_read = 1;
    loop {
        let plans: Vec<Plan> = profiles
            .iter()
            .zip(cands)
            .map(|((p, _), c)| solve::plan(p, c.first(), target.settings, target.hw, target.build))
            .collect();
        let bpw: Vec<f64> = profiles
            .iter()
            .map(|(p, _)| solve::bits_per_weight(p))
            .collect();
        let best = solve::choose(plans, &bpw).ok_or_else(|| anyhow::anyhow!("nothing to plan"))?;
        let index = cands
            .iter()
            .position(|c| c.first() == best.model.path)
            .unwrap_or(0);
        if !profiles[index].1 {
            profiles[index] = (exact(&cands[index])?, true);
            headers_read += 1;
            continue;
        }
        let why = explain(cands, index, &best);
        return Ok(Choice {
            index,
            plan: best,
            why,
            headers_read,
        });
    }
}

/// `base` with its weights scaled to `c`'s size: the same architecture and
/// tensors, at the bits per weight of `c`. Only the quantized matrices
/// scale; norms and other small tensors stay as they are.
fn scaled(base: &ModelProfile, c: &Candidate) -> ModelProfile {
    let mut p = base.clone();
    let scales = |t: &headroom_planner::profile::Tensor| t.dims.len() >= 2;
    let fixed: u64 = all_tensors(base)
        .filter(|t| !scales(t))
        .map(|t| t.bytes)
        .sum();
    let header = base.data_offset;
    let target = c.size().saturating_sub(header).saturating_sub(fixed);
    let scalable = base.weight_bytes.saturating_sub(fixed).max(1);
    let factor = target as f64 / scalable as f64;
    let mut total = 0u64;
    let mut apply = |t: &mut headroom_planner::profile::Tensor| {
        if scales(t) {
            t.bytes = (t.bytes as f64 * factor).round() as u64;
        }
        total += t.bytes;
    };
    for layer in &mut p.layers {
        layer.tensors.iter_mut().for_each(&mut apply);
    }
    p.token_embd.iter_mut().for_each(&mut apply);
    p.output.iter_mut().for_each(&mut apply);
    p.globals.iter_mut().for_each(&mut apply);
    p.weight_bytes = total;
    p.quant = c.label();
    p
}

fn all_tensors(p: &ModelProfile) -> impl Iterator<Item = &headroom_planner::profile::Tensor> {
    p.layers
        .iter()
        .flat_map(|l| l.tensors.iter())
        .chain(p.token_embd.iter())
        .chain(p.output.iter())
        .chain(p.globals.iter())
}

/// One sentence: what was chosen, against what it beat.
fn explain(cands: &[Candidate], index: usize, plan: &Plan) -> String {
    let chosen = &cands[index];
    let label = chosen.label();
    let bigger: Vec<&Plan> = plan
        .alternatives
        .iter()
        .filter(|a| {
            cands
                .iter()
                .find(|c| c.first() == a.model.path)
                .is_some_and(|c| c.size() > chosen.size())
        })
        .collect();
    let next_up = bigger.iter().min_by_key(|a| a.model.file_bytes);
    let layers = |p: &Plan| {
        let gpu: u32 = p.devices.iter().skip(1).map(|d| d.n_layers).sum();
        let all: u32 = p.devices.iter().map(|d| d.n_layers).sum();
        (gpu, all)
    };
    let mut why = match plan.verdict {
        Verdict::Fits => match next_up {
            None => format!("{label} is the largest file and it fits here"),
            Some(up) => {
                let up_label = cands
                    .iter()
                    .find(|c| c.first() == up.model.path)
                    .map(Candidate::label)
                    .unwrap_or_default();
                let what = match up.verdict {
                    Verdict::DoesNotFit => "would not fit".to_string(),
                    Verdict::FitsWithOffload => {
                        let (g, a) = layers(up);
                        format!(
                            "would run only {g}/{a} layers on the GPU (est. {:.1} tok/s against {:.1})",
                            up.est_decode_tokens_per_s, plan.est_decode_tokens_per_s
                        )
                    }
                    Verdict::Fits
                        if up.warnings.iter().any(|w| {
                            w.code == headroom_planner::plan::WarningCode::PagesFromDisk
                        }) =>
                    {
                        format!(
                            "would not fit in RAM and would page from disk (est. {:.1} tok/s against {:.1})",
                            up.est_decode_tokens_per_s, plan.est_decode_tokens_per_s
                        )
                    }
                    Verdict::Fits => "fits too, but ranks lower".to_string(),
                };
                format!(
                    "{label} is the highest-quality file that fits entirely here; {up_label} {what}"
                )
            }
        },
        Verdict::FitsWithOffload => {
            let (g, a) = layers(plan);
            format!(
                "no file fits entirely in GPU memory; {label} runs {g}/{a} layers on the GPU at est. {:.1} tok/s",
                plan.est_decode_tokens_per_s
            )
        }
        Verdict::DoesNotFit => {
            format!("nothing in this repository fits here; the smallest need is {label}'s")
        }
    };
    let q4 = cands.iter().any(|c| c.quant.as_deref() == Some("Q4_K_M"));
    if q4 && chosen.quant.as_deref() != Some("Q4_K_M") && plan.verdict.fits() {
        why.push_str(" (llama.cpp and ollama would take Q4_K_M)");
    }
    why
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_planner::hw;
    use headroom_planner::synth::{self, Mix, Shape};

    fn file(path: &str, size: u64) -> RemoteFile {
        RemoteFile {
            path: path.into(),
            size,
            sha256: None,
        }
    }

    #[test]
    fn split_sets_group_and_projectors_drop() {
        let files = vec![
            file("M-Q8_0-00002-of-00002.gguf", 5),
            file("M-Q8_0-00001-of-00002.gguf", 6),
            file("M-Q4_K_M.gguf", 7),
            file("mmproj-M-f16.gguf", 1),
            file("M-F16-00001-of-00002.gguf", 9),
            file("README.md", 1),
        ];
        let c = candidates(&files);
        assert_eq!(c.len(), 2, "the F16 set misses a part: {c:?}");
        assert_eq!(c[0].quant.as_deref(), Some("Q4_K_M"));
        assert_eq!(c[1].quant.as_deref(), Some("Q8_0"));
        assert_eq!(c[1].size(), 11);
        assert_eq!(c[1].first(), "M-Q8_0-00001-of-00002.gguf");
        let q8 = select("o/n", &c, &Select::Quant("Q8_0".into())).expect("found");
        assert_eq!(q8.files.len(), 2);
        let err = select("o/n", &c, &Select::Quant("Q2_K".into())).expect_err("none");
        assert!(err.to_string().contains("Q4_K_M (7 B)"), "{err}");
        let by_file = select("o/n", &c, &Select::File("m-q4_k_m.gguf".into())).expect("found");
        assert_eq!(by_file.quant.as_deref(), Some("Q4_K_M"));
    }

    fn synthetic_repo() -> (Vec<Candidate>, Vec<ModelProfile>) {
        let mut cands = Vec::new();
        let mut profiles = Vec::new();
        for (mix, q) in [
            (Mix::Q4KM, "Q4_K_M"),
            (Mix::Q8_0, "Q8_0"),
            (Mix::F16, "F16"),
        ] {
            let h = synth::build(Shape::Llama8B, mix).expect("synthetic");
            let len = h.data_offset + h.data_size().expect("size");
            cands.push(Candidate {
                quant: Some(q.into()),
                files: vec![file(&format!("L-{q}.gguf"), len)],
            });
            profiles.push(headroom_planner::profile::profile(&h).expect("profile"));
        }
        (cands, profiles)
    }

    fn machine(ram: &str, vram: Option<&str>) -> HardwareSnapshot {
        let base = hw::load_profile(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../planner/tests/fixtures/hw/gpu-8g-ram-16g.toml"
        )))
        .expect("fixture");
        let overrides = hw::Overrides {
            ram_bytes: Some(hw::parse_size(ram).expect("size")),
            vram_bytes: vram.map(|v| vec![hw::parse_size(v).expect("size")]),
            profile: None,
        };
        hw::apply_overrides(base, &overrides).expect("overrides")
    }

    #[test]
    fn the_pick_grows_with_memory_and_reads_few_headers() {
        let (cands, profiles) = synthetic_repo();
        let settings = Settings::default();
        let pick = |ram: &str| {
            let hw = machine(ram, Some("0"));
            let target = Target {
                hw: &hw,
                settings: &settings,
                build: Build { gpu: false },
            };
            let mut reads = 0;
            let choice = choose(&cands, target, &mut |c| {
                reads += 1;
                let i = cands.iter().position(|x| x == c).expect("known");
                Ok(profiles[i].clone())
            })
            .expect("chooses");
            (cands[choice.index].label(), choice, reads)
        };
        let (small, c_small, reads) = pick("6GiB");
        assert_eq!(small, "Q4_K_M", "{}", c_small.why);
        assert_eq!(reads, 1, "the reference header was enough");
        let (big, c_big, _) = pick("64GiB");
        assert_eq!(big, "F16", "{}", c_big.why);
        assert!(c_big.plan.verdict.fits());
        assert!(c_big.why.contains("would take Q4_K_M"), "{}", c_big.why);
        // More memory never picks a smaller file.
        let order = ["Q4_K_M", "Q8_0", "F16"];
        let mut last = 0;
        for ram in [
            "6GiB", "7GiB", "8GiB", "10GiB", "12GiB", "16GiB", "24GiB", "64GiB",
        ] {
            let (label, choice, _) = pick(ram);
            let rank = order.iter().position(|q| *q == label).expect("known");
            assert!(rank >= last, "{ram}: {label} after {}", order[last]);
            if label == "Q8_0" {
                assert!(choice.why.contains("F16 would not fit"), "{}", choice.why);
            }
            last = rank;
        }
    }

    #[test]
    fn scaled_profiles_are_close_to_the_real_ones() {
        let (cands, profiles) = synthetic_repo();
        for (i, c) in cands.iter().enumerate() {
            let s = scaled(&profiles[0], c);
            let real = profiles[i].weight_bytes as f64;
            let err = (s.weight_bytes as f64 - real).abs() / real;
            assert!(err < 0.01, "{}: {err}", c.label());
        }
    }
}
