//! The pure decisions behind `headroom fit`'s ranking, held to properties
//! here without llama.cpp or a catalog; the app's `catalog::fit` plans the
//! configurations and sorts by these rules.
//!
//! **What is ranked.** Each model is planned at each of its quantizations
//! (the solver places layers and MoE experts as `plan` would). A
//! configuration's *expected quality* is the model's quality figure on the
//! LMArena text Elo scale (`quality` in the catalog, with its basis) less
//! its quantization's loss ([`quant_loss_elo`]): one number, one unit.
//!
//! **The order** ([`cmp_rows`]):
//! 1. [`Standing`]: configurations that run at or above the purpose's speed
//!    floor ([`Purpose::min_speed`]: 10 tok/s for chat, 20 for code) first,
//!    then those that run below it, then those that do not run;
//! 2. architectures the planner was held to llama.cpp's accounting on
//!    before the others ([`trust_class`]);
//! 3. within "usable", expected quality, highest first (a model without a
//!    quality figure after every model with one, by its size class
//!    [`quality_class`]); within "too slow", speed, fastest first;
//! 4. then speed, then the id.
//!
//! Full GPU, partial offload and MoE experts in RAM compete on speed and
//! quality alone. Each model shows its best configuration ([`pick`]): the
//! highest expected quality among those over the floor, else the fastest.
//! A model is hidden when a successor that lists it in `supersedes` is
//! usable on the same machine ([`superseded_by`]).
//!
//! The older size-based quality class stays for models without a quality
//! figure: ⌊2 · (log2(effective parameters in billions) − bits + speed)⌋,
//! where the effective parameters of an MoE model are √(total × active);
//! `bits` is 1 for a 3-bit mix and 2 for 2-bit and below; `speed` is
//! log2(tok/s ÷ 10) below 10 tok/s and 0 above.

use std::cmp::Ordering;

use crate::plan::Verdict;
use crate::synth::mix::FileType;

/// Decode speed at and above which a model reads as fast as one can read:
/// slower runs lose quality classes, faster ones gain none.
pub const READABLE_TOKENS_PER_S: f64 = 10.0;

/// Octaves of model size a mix costs: 1 for 3-bit mixes, 2 for 2-bit and below.
#[must_use]
pub fn quant_penalty(ft: FileType) -> i32 {
    let bits = ft.default_type().bits_per_weight();
    if bits < 3.0 {
        2
    } else if bits < 4.0 {
        1
    } else {
        0
    }
}

/// Fit class of a verdict (2 fully, 1 with offload, 0 not).
#[must_use]
pub fn fit_class(v: Verdict) -> u8 {
    match v {
        Verdict::Fits => 2,
        Verdict::FitsWithOffload => 1,
        Verdict::DoesNotFit => 0,
    }
}

/// Trust class of an architecture: 1 when the planner was held to
/// llama.cpp's own accounting on it ([`crate::arch::VERIFIED`]), 0 when its
/// plan follows the generic rules unchecked. `fit` ranks the unverified
/// below the verified within a fit class: a plan that may be off should not
/// push out one that was measured.
#[must_use]
pub fn trust_class(architecture: &str) -> u8 {
    u8::from(crate::arch::is_verified(architecture))
}

/// Effective parameters in billions: √(total × active) for MoE.
fn effective_b(total: u64, active: u64) -> f64 {
    ((total as f64) * (active as f64)).sqrt() / 1e9
}

/// The quality class (see the module docs) of a model of `total` (`active`)
/// parameters run as `ft` at `tokens_per_s` (`None`: not running).
#[must_use]
pub fn quality_class(total: u64, active: u64, ft: FileType, tokens_per_s: Option<f64>) -> i32 {
    let size = effective_b(total, active).max(1e-3).log2();
    let slow = tokens_per_s.map_or(0.0, |t| {
        (t.max(1e-3) / READABLE_TOKENS_PER_S).log2().min(0.0)
    });
    (2.0 * (size - f64::from(quant_penalty(ft)) + slow)).floor() as i32
}

/// What the user runs the model for: it sets the speed floor and the
/// context `fit` plans. The first `--use` tag names it; chat when none does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Purpose {
    /// Conversation: read as it is written.
    Chat,
    /// Code: edits and completions are long, and the user waits for them.
    Code,
    /// Reasoning and thinking models: thousands of thinking tokens come
    /// before the answer.
    Reasoning,
}

impl Purpose {
    /// The purpose the first of `uses` names (`code`, `reasoning`); chat for
    /// any other tag, and when none is given.
    #[must_use]
    pub fn from_uses<S: AsRef<str>>(uses: &[S]) -> Purpose {
        match uses
            .first()
            .map(|u| u.as_ref().to_ascii_lowercase())
            .as_deref()
        {
            Some("code") => Purpose::Code,
            Some("reasoning") => Purpose::Reasoning,
            _ => Purpose::Chat,
        }
    }

    /// Its name, as `--use` writes it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Purpose::Chat => "chat",
            Purpose::Code => "code",
            Purpose::Reasoning => "reasoning",
        }
    }

    /// The decode speed under which a configuration is not usable for this
    /// purpose (`--min-speed` replaces it): 10 tok/s for chat, faster than
    /// people read (about 5 words, 7 tokens, a second); 20 for code, where
    /// whole files and diffs are written before the user can go on; 15 for
    /// reasoning, whose thinking tokens are waited for, unread.
    #[must_use]
    pub fn min_speed(self) -> f64 {
        match self {
            Purpose::Chat => 10.0,
            Purpose::Code => 20.0,
            Purpose::Reasoning => 15.0,
        }
    }

    /// The context this purpose needs, where the model allows it: 32k
    /// tokens for code (several source files and the conversation), 16k for
    /// reasoning (the thinking of a few turns), 8k for chat (a conversation
    /// of a few dozen turns).
    #[must_use]
    pub fn min_ctx(self) -> u32 {
        match self {
            Purpose::Chat => 8_192,
            Purpose::Code => 32_768,
            Purpose::Reasoning => 16_384,
        }
    }
}

/// How a configuration stands against the purpose, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Standing {
    /// Runs at or above the speed floor.
    Usable,
    /// Runs, below the speed floor.
    TooSlow,
    /// Does not run on this machine.
    DoesNotRun,
}

/// The standing of a configuration that `runs` at `tokens_per_s`.
#[must_use]
pub fn standing(runs: bool, tokens_per_s: f64, min_speed: f64) -> Standing {
    if !runs {
        Standing::DoesNotRun
    } else if tokens_per_s >= min_speed {
        Standing::Usable
    } else {
        Standing::TooSlow
    }
}

/// A model's quality less its quantization's loss, on the Elo scale.
#[must_use]
pub fn expected_quality(quality: Option<f64>, ft: FileType) -> Option<f64> {
    quality.map(|q| q - quant_loss_elo(ft))
}

/// One configuration of a model (a quantization, placed by the solver).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// It runs on the machine.
    pub runs: bool,
    /// Estimated decode speed, tokens/s.
    pub tokens_per_s: f64,
    /// Expected quality ([`expected_quality`]); `None` when the model has no
    /// quality figure.
    pub quality: Option<f64>,
    /// Bits per weight, which orders configurations of a model without a
    /// quality figure.
    pub bits_per_weight: f64,
}

impl Config {
    /// Its standing against `min_speed`.
    #[must_use]
    pub fn standing(&self, min_speed: f64) -> Standing {
        standing(self.runs, self.tokens_per_s, min_speed)
    }

    /// What orders configurations of one model by quality ([`merit`]).
    fn merit(&self) -> f64 {
        merit(self.quality, self.bits_per_weight)
    }
}

/// What orders the files of one model by quality: the expected quality, or
/// the bits per weight when the model has no quality figure.
#[must_use]
pub fn merit(quality: Option<f64>, bits_per_weight: f64) -> f64 {
    quality.unwrap_or(bits_per_weight)
}

/// The configuration a model is shown with: the highest expected quality
/// among those at or above `min_speed` (ties: the faster); when none is,
/// the fastest that runs; `None` when none runs.
#[must_use]
pub fn pick(configs: &[Config], min_speed: f64) -> Option<usize> {
    let usable = configs
        .iter()
        .enumerate()
        .filter(|(_, c)| c.standing(min_speed) == Standing::Usable)
        .max_by(|(ia, a), (ib, b)| {
            a.merit()
                .total_cmp(&b.merit())
                .then(a.tokens_per_s.total_cmp(&b.tokens_per_s))
                .then(ib.cmp(ia))
        });
    if let Some((i, _)) = usable {
        return Some(i);
    }
    configs
        .iter()
        .enumerate()
        .filter(|(_, c)| c.runs)
        .max_by(|(ia, a), (ib, b)| {
            a.tokens_per_s
                .total_cmp(&b.tokens_per_s)
                .then(a.merit().total_cmp(&b.merit()))
                .then(ib.cmp(ia))
        })
        .map(|(i, _)| i)
}

/// What one model's row is ranked by.
#[derive(Debug, Clone, PartialEq)]
pub struct RowKey<'a> {
    /// The row's standing.
    pub standing: Standing,
    /// [`trust_class`] of its architecture.
    pub trust: u8,
    /// Expected quality of its configuration.
    pub quality: Option<f64>,
    /// [`quality_class`], for models without a quality figure.
    pub size_class: i32,
    /// Estimated decode speed (0 when it does not run).
    pub tokens_per_s: f64,
    /// Catalog id, the last tie-breaker.
    pub id: &'a str,
}

/// The ranking's order (see the module docs): `Less` when `a` ranks first.
#[must_use]
pub fn cmp_rows(a: &RowKey<'_>, b: &RowKey<'_>) -> Ordering {
    let by_quality = || match (a.quality, b.quality) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => b.size_class.cmp(&a.size_class),
    };
    let by_speed = || b.tokens_per_s.total_cmp(&a.tokens_per_s);
    a.standing
        .cmp(&b.standing)
        .then(b.trust.cmp(&a.trust))
        .then_with(|| match a.standing {
            Standing::TooSlow => by_speed().then_with(by_quality),
            Standing::Usable | Standing::DoesNotRun => by_quality().then_with(by_speed),
        })
        .then_with(|| a.id.cmp(b.id))
}

/// Who supersedes each row: for row `i`, the rows `j` that are usable and
/// whose model lists row `i`'s id in `supersedes`. A row with any is hidden
/// (`--all` shows it). `ids[i]` is row `i`'s id, `supersedes[i]` what its
/// model supersedes, `usable[i]` whether it is usable.
#[must_use]
pub fn superseded_by<S: AsRef<str>>(
    ids: &[S],
    supersedes: &[Vec<S>],
    usable: &[bool],
) -> Vec<Vec<usize>> {
    ids.iter()
        .map(|id| {
            let id = id.as_ref();
            supersedes
                .iter()
                .zip(usable)
                .enumerate()
                .filter(|(_, (olds, ok))| {
                    **ok && olds.iter().any(|o| o.as_ref().eq_ignore_ascii_case(id))
                })
                .map(|(j, _)| j)
                .collect()
        })
        .collect()
}

/// Elo points a quantization costs against the 16-bit model
/// (see [`QUANT_LOSS`] for the measurements and the rule).
#[must_use]
pub fn quant_loss_elo(ft: FileType) -> f64 {
    if let Some((_, ln_ppl)) = QUANT_LOSS.iter().find(|(t, _)| *t == ft) {
        return ELO_PER_LN_PPL * ln_ppl;
    }
    // A type without its own measurement costs what the nearest measured
    // type of no more bits per weight costs.
    let bits = ft.default_type().bits_per_weight();
    QUANT_LOSS
        .iter()
        .filter(|(t, _)| t.default_type().bits_per_weight() <= bits)
        .max_by(|a, b| {
            a.0.default_type()
                .bits_per_weight()
                .total_cmp(&b.0.default_type().bits_per_weight())
                .then(b.1.total_cmp(&a.1))
        })
        .map_or(ELO_PER_LN_PPL * WORST_LN_PPL, |(_, l)| ELO_PER_LN_PPL * l)
}

/// Elo points per natural-log unit of perplexity: the pinned LMArena text
/// board's gap between Llama-3-70B-Instruct (1224) and Llama-3-8B-Instruct
/// (1171), over the log ratio of the two base models' 16-bit Wikitext-2
/// perplexities in one llama.cpp run (3.0388 and 6.7593):
/// 53 / ln(6.7593 / 3.0388) = 53 / 0.7995 = 66.3. Read: a mix whose log
/// perplexity ratio is x costs what shrinking the model by the factor whose
/// log perplexity gap is x costs. The Elo figures are rows of
/// `csv/lmarena_text.csv` in fboulnois/llm-leaderboard-csv at
/// e964e252a171a83b8bf189675ca01406d86bc810 (board of 2025-08-04, style
/// control off); the perplexities are the q8_0 rows (divided by their
/// ratio to 16 bits) of llama.cpp's "LLaMA 2 vs. LLaMA 3 Quantization
/// comparison" (PR #6936, examples/perplexity/README.md). The same rule on
/// Llama 2's pair gives 118.5: the conversion is good to a factor of 2,
/// which at 4 bits and above is a few Elo points, under the ±50 of a card
/// mapping (`quality_basis`).
const ELO_PER_LN_PPL: f64 = 66.3;

/// Measured quality loss per mix: mean ln(PPL(mix) / PPL(16 bits)) of
/// Llama 3 8B on Wikitext-2, from llama.cpp's "LLaMA 3 8b Scoreboard"
/// (tools/perplexity/README.md, revision f364eb6f; read at
/// crusaderky/llama.cpp 73f6cfa30454317a3aa13e482beb4e5fff3deaa6, the
/// upstream file unchanged): the row without an importance matrix where
/// the table has one ("None"), else the one with ("WT 10m"), which the
/// IQ mixes need. F16 and BF16 differ by 0.0004 (its BF16 comparison).
/// MXFP4 experts are gpt-oss's release format, which its quality figure
/// was measured in: no loss against it.
const QUANT_LOSS: &[(FileType, f64)] = &[
    (FileType::F32, 0.0),
    (FileType::F16, 0.0),
    (FileType::BF16, 0.0),
    (FileType::MXFP4_MOE, 0.0),
    (FileType::Q8_0, 0.00043),
    (FileType::Q6_K, 0.00348),
    (FileType::Q5_K_M, 0.0091),
    (FileType::Q5_K_S, 0.0167),
    (FileType::Q5_1, 0.0169),
    (FileType::Q5_0, 0.0209),
    (FileType::Q4_K_M, 0.02777),
    (FileType::Q4_K_S, 0.04224),
    (FileType::Q4_1, 0.06989),
    (FileType::Q4_0, 0.07249),
    (FileType::IQ4_NL, 0.03531),
    (FileType::IQ4_XS, 0.03595),
    (FileType::Q3_K_L, 0.0855),
    (FileType::Q3_K_M, 0.10021),
    (FileType::Q3_K_S, 0.23263),
    (FileType::IQ3_M, 0.10164),
    (FileType::IQ3_S, 0.11133),
    (FileType::IQ3_XS, 0.1393),
    (FileType::IQ3_XXS, 0.17971),
    (FileType::Q2_K, 0.44779),
    (FileType::Q2_K_S, 0.40293),
    (FileType::IQ2_M, 0.32222),
    (FileType::IQ2_S, 0.4374),
    (FileType::IQ2_XS, 0.54633),
    (FileType::IQ2_XXS, 0.81595),
    (FileType::IQ1_M, 1.40879),
    (FileType::IQ1_S, 2.27622),
];

/// The worst measured loss (IQ1_S), for a mix below every measured one.
const WORST_LN_PPL: f64 = 2.27622;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const B: u64 = 1_000_000_000;

    fn file_type() -> impl Strategy<Value = FileType> {
        proptest::sample::select(FileType::ALL.to_vec())
    }

    /// Parameter counts from 1 million to 2 trillion: below 1 million the
    /// class is clamped (1e-3 billion), and no model is larger.
    fn params() -> impl Strategy<Value = u64> {
        1_000_000u64..2_000 * B
    }

    fn speed() -> impl Strategy<Value = Option<f64>> {
        proptest::option::of(0.0f64..500.0)
    }

    fn config() -> impl Strategy<Value = Config> {
        (
            any::<bool>(),
            0.0f64..100.0,
            proptest::option::of(900.0f64..1500.0),
            1.0f64..16.0,
        )
            .prop_map(|(runs, tokens_per_s, quality, bits_per_weight)| Config {
                runs,
                tokens_per_s,
                quality,
                bits_per_weight,
            })
    }

    /// A configuration, the memory it needs to run, and the speed each unit
    /// of memory beyond that adds.
    fn config_with_need() -> impl Strategy<Value = (Config, u64, f64)> {
        (config(), 0u64..64, 0.0f64..3.0)
    }

    fn row_key() -> impl Strategy<Value = RowKey<'static>> {
        let standing = proptest::sample::select(vec![
            Standing::Usable,
            Standing::TooSlow,
            Standing::DoesNotRun,
        ]);
        let ids = proptest::sample::select(vec!["a", "b", "c", "d", "e", "f"]);
        (
            standing,
            0u8..2,
            proptest::option::of(900.0f64..1500.0),
            -10i32..20,
            0.0f64..100.0,
            ids,
        )
            .prop_map(
                |(standing, trust, quality, size_class, tokens_per_s, id)| RowKey {
                    standing,
                    trust,
                    quality,
                    size_class,
                    tokens_per_s,
                    id,
                },
            )
    }

    fn bits(ft: FileType) -> f64 {
        ft.default_type().bits_per_weight()
    }

    /// Every mix has its own measurement, and the documented figures hold.
    #[test]
    fn every_mix_has_a_measured_loss() {
        for ft in FileType::ALL {
            assert!(
                QUANT_LOSS.iter().any(|(t, _)| *t == ft),
                "{} has no measurement",
                ft.name()
            );
        }
        let round = |ft| (quant_loss_elo(ft) * 10.0).round() / 10.0;
        assert_eq!(round(FileType::Q8_0), 0.0);
        assert_eq!(round(FileType::Q4_K_M), 1.8);
        assert_eq!(round(FileType::Q2_K), 29.7);
        assert_eq!(round(FileType::IQ2_XXS), 54.1);
        assert!(quant_loss_elo(FileType::Q4_K_M) < quant_loss_elo(FileType::Q3_K_M));
    }

    #[test]
    fn the_first_use_sets_the_purpose() {
        assert_eq!(Purpose::from_uses::<&str>(&[]), Purpose::Chat);
        assert_eq!(Purpose::from_uses(&["code", "moe"]), Purpose::Code);
        assert_eq!(Purpose::from_uses(&["moe", "code"]), Purpose::Chat);
        assert_eq!(Purpose::from_uses(&["Reasoning"]), Purpose::Reasoning);
        assert_eq!(Purpose::Chat.min_speed(), 10.0);
        assert_eq!(Purpose::Code.min_speed(), 20.0);
        assert_eq!(Purpose::Chat.min_ctx(), 8_192);
        assert_eq!(Purpose::Code.min_ctx(), 32_768);
        assert_eq!(Purpose::Reasoning.min_ctx(), 16_384);
    }

    #[test]
    fn checked_architectures_rank_above_unchecked_ones() {
        assert_eq!(trust_class("llama"), 1);
        assert_eq!(trust_class("qwen3next"), 1);
        assert_eq!(trust_class("jamba"), 0);
        assert_eq!(trust_class("no-such-architecture"), 0);
    }

    /// The module docs' examples, each stated as an equivalence (the
    /// recorded rule, not the formula): pairs that must rank the same.
    #[test]
    fn documented_equivalences() {
        let q = quality_class;
        let cases = [
            (
                "a 14B at 3 bits counts as a 7B",
                q(14 * B, 14 * B, FileType::Q3_K_M, None),
                q(7 * B, 7 * B, FileType::Q6_K, None),
            ),
            (
                "a 32B at 2 bits counts as an 8B",
                q(32 * B, 32 * B, FileType::Q2_K, None),
                q(8 * B, 8 * B, FileType::Q8_0, None),
            ),
            (
                "an 8B at a quarter of readable speed counts as a 2B at full speed",
                q(8 * B, 8 * B, FileType::Q8_0, Some(2.5)),
                q(2 * B, 2 * B, FileType::Q8_0, Some(90.0)),
            ),
            (
                "an MoE of 32B with 2B active counts as an 8B dense model",
                q(32 * B, 2 * B, FileType::Q4_K_M, Some(50.0)),
                q(8 * B, 8 * B, FileType::Q4_K_M, Some(50.0)),
            ),
        ];
        for (why, a, b) in cases {
            assert_eq!(a, b, "{why}");
        }
        // Penalties by mix, as the module docs list them.
        let penalties = [
            (FileType::F16, 0),
            (FileType::Q8_0, 0),
            (FileType::Q4_K_M, 0),
            (FileType::IQ4_XS, 0),
            (FileType::Q3_K_L, 1),
            (FileType::IQ3_M, 1),
            (FileType::Q2_K, 2),
            (FileType::IQ2_M, 2),
        ];
        for (ft, want) in penalties {
            assert_eq!(quant_penalty(ft), want, "{}", ft.name());
        }
    }

    #[test]
    fn fit_class_orders_verdicts_and_only_a_failure_is_zero() {
        let all = [Verdict::Fits, Verdict::FitsWithOffload, Verdict::DoesNotFit];
        for a in all {
            assert_eq!(fit_class(a) > 0, a.fits(), "{a:?}");
            for b in all {
                // `Verdict` is declared best first.
                assert_eq!(fit_class(a) > fit_class(b), a < b, "{a:?} vs {b:?}");
            }
        }
    }

    proptest! {
        #[test]
        fn more_parameters_never_rank_lower(
            a in params(), b in params(), ft in file_type(), tps in speed(),
        ) {
            let (small, large) = (a.min(b), a.max(b));
            prop_assert!(
                quality_class(small, small, ft, tps) <= quality_class(large, large, ft, tps)
            );
        }

        #[test]
        fn more_active_or_total_parameters_never_rank_lower(
            total in params(), x in params(), y in params(), ft in file_type(), tps in speed(),
        ) {
            let (lo, hi) = (x.min(y).min(total), x.max(y).min(total));
            prop_assert!(quality_class(total, lo, ft, tps) <= quality_class(total, hi, ft, tps));
            let (t_lo, t_hi) = (x.min(y), x.max(y));
            let active = t_lo / 2;
            prop_assert!(
                quality_class(t_lo, active, ft, tps) <= quality_class(t_hi, active, ft, tps)
            );
        }

        #[test]
        fn an_moe_ranks_between_its_active_and_its_total_size(
            x in params(), y in params(), ft in file_type(), tps in speed(),
        ) {
            let (active, total) = (x.min(y), x.max(y));
            let moe = quality_class(total, active, ft, tps);
            prop_assert!(quality_class(active, active, ft, tps) <= moe);
            prop_assert!(moe <= quality_class(total, total, ft, tps));
        }

        #[test]
        fn more_bits_per_weight_never_rank_lower(
            n in params(), a in file_type(), b in file_type(), tps in speed(),
        ) {
            let (fewer, more) = if bits(a) <= bits(b) { (a, b) } else { (b, a) };
            prop_assert!(quality_class(n, n, fewer, tps) <= quality_class(n, n, more, tps));
        }

        #[test]
        fn slowness_never_raises_the_class(
            n in params(), ft in file_type(), x in 0.0f64..500.0, y in 0.0f64..500.0,
        ) {
            let (slow, fast) = (x.min(y), x.max(y));
            let not_running = quality_class(n, n, ft, None);
            prop_assert!(quality_class(n, n, ft, Some(slow)) <= quality_class(n, n, ft, Some(fast)));
            prop_assert!(quality_class(n, n, ft, Some(fast)) <= not_running);
        }

        #[test]
        fn readable_speed_costs_nothing(
            n in params(), ft in file_type(), t in READABLE_TOKENS_PER_S..1e6,
        ) {
            prop_assert_eq!(quality_class(n, n, ft, Some(t)), quality_class(n, n, ft, None));
        }


        /// More memory makes every configuration that ran still run, no
        /// slower: the shown configuration of a model is never worse.
        #[test]
        fn more_memory_never_gives_a_worse_pick(
            cfgs in proptest::collection::vec(config_with_need(), 1..12),
            m1 in 0u64..64, m2 in 0u64..64, floor in 1.0f64..40.0,
        ) {
            let (lo, hi) = (m1.min(m2), m1.max(m2));
            let at = |mem: u64| -> Vec<Config> {
                cfgs.iter().map(|(c, need, gain)| Config {
                    runs: *need <= mem,
                    // Memory beyond the need holds more layers on the fast
                    // device: never slower.
                    tokens_per_s: c.tokens_per_s + gain * (mem.saturating_sub(*need)) as f64,
                    ..*c
                }).collect()
            };
            let (small, large) = (at(lo), at(hi));
            let standing = |cs: &[Config]| pick(cs, floor).map_or(Standing::DoesNotRun, |i| cs[i].standing(floor));
            prop_assert!(standing(&large) <= standing(&small));
            if standing(&small) == Standing::Usable {
                let q = |cs: &[Config]| pick(cs, floor).map(|i| cs[i].merit());
                prop_assert!(q(&large) >= q(&small));
            }
        }

        /// Lowering the floor only adds usable configurations: the shown
        /// one's quality never drops while it stays usable.
        #[test]
        fn a_lower_floor_never_lowers_the_pick_s_quality(
            cfgs in proptest::collection::vec(config(), 1..12),
            f1 in 0.5f64..60.0, f2 in 0.5f64..60.0,
        ) {
            let (low, high) = (f1.min(f2), f1.max(f2));
            if let Some(h) = pick(&cfgs, high).filter(|&i| cfgs[i].standing(high) == Standing::Usable) {
                let l = pick(&cfgs, low).expect("usable at the higher floor");
                prop_assert_eq!(cfgs[l].standing(low), Standing::Usable);
                prop_assert!(cfgs[l].merit() >= cfgs[h].merit());
            }
        }

        /// The pick is usable whenever any configuration is, and then no
        /// usable configuration has a higher expected quality.
        #[test]
        fn the_pick_is_the_best_usable_configuration(
            cfgs in proptest::collection::vec(config(), 1..12), floor in 0.5f64..60.0,
        ) {
            let p = pick(&cfgs, floor);
            let any_usable = cfgs.iter().any(|c| c.standing(floor) == Standing::Usable);
            match p {
                None => prop_assert!(cfgs.iter().all(|c| !c.runs)),
                Some(i) if any_usable => {
                    prop_assert_eq!(cfgs[i].standing(floor), Standing::Usable);
                    for c in cfgs.iter().filter(|c| c.standing(floor) == Standing::Usable) {
                        prop_assert!(c.merit() <= cfgs[i].merit());
                    }
                }
                Some(i) => {
                    prop_assert!(cfgs[i].runs);
                    for c in cfgs.iter().filter(|c| c.runs) {
                        prop_assert!(c.tokens_per_s <= cfgs[i].tokens_per_s);
                    }
                }
            }
        }

        /// Sorting by [`cmp_rows`] never puts a row under the floor (or one
        /// that does not run) above one that meets it, whatever its
        /// quality, and within "usable" higher quality comes first.
        #[test]
        fn rows_under_the_floor_never_rank_above_usable_ones(
            rows in proptest::collection::vec(row_key(), 1..30),
        ) {
            let mut sorted = rows.clone();
            sorted.sort_by(cmp_rows);
            for w in sorted.windows(2) {
                prop_assert!(w[0].standing <= w[1].standing);
                prop_assert!(cmp_rows(&w[0], &w[1]) != Ordering::Greater);
                if w[0].standing == Standing::Usable && w[1].standing == Standing::Usable
                    && w[0].trust == w[1].trust
                    && let (Some(a), Some(b)) = (w[0].quality, w[1].quality)
                {
                    prop_assert!(a >= b);
                }
            }
        }

        /// A superseded model is hidden exactly when a successor is usable.
        #[test]
        fn a_superseded_model_is_hidden_when_its_successor_is_usable(
            n in 1usize..12,
            edges in proptest::collection::vec((0usize..12, 0usize..12), 0..20),
            usable in proptest::collection::vec(any::<bool>(), 12),
        ) {
            let ids: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
            let mut sup: Vec<Vec<String>> = vec![Vec::new(); n];
            for (a, b) in edges {
                if a < n && b < n && a != b {
                    sup[a].push(ids[b].clone());
                }
            }
            let usable = &usable[..n];
            let by = superseded_by(&ids, &sup, usable);
            for (i, js) in by.iter().enumerate() {
                for &j in js {
                    prop_assert!(usable[j] && sup[j].contains(&ids[i]));
                }
            }
            let h: Vec<bool> = by.iter().map(|js| !js.is_empty()).collect();
            for (j, olds) in sup.iter().enumerate() {
                for o in olds {
                    let i = ids.iter().position(|x| x == o).expect("an id");
                    if usable[j] {
                        prop_assert!(h[i], "{} supersedes {} and is usable", ids[j], o);
                    }
                }
            }
            for (i, id) in ids.iter().enumerate() {
                let by_usable = sup.iter().zip(usable).any(|(o, &u)| u && o.contains(id));
                prop_assert_eq!(h[i], by_usable);
            }
        }

        /// More bits never cost more quality, and a mix never gains any.
        #[test]
        fn quantization_loss_is_never_negative(ft in file_type()) {
            prop_assert!(quant_loss_elo(ft) >= 0.0);
            prop_assert!(quant_loss_elo(ft).is_finite());
        }
    }
}
