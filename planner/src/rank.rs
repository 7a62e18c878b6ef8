//! The pure decisions behind `headroom fit`'s ranking: how well a plan runs
//! (fit class) and how good a model is to run (quality class).
//!
//! They live here, not in the app, so that they are held to properties
//! (monotone in parameters and bits, a penalty never helps) without llama.cpp
//! or a catalog; the app's `catalog::fit` only sorts by them.
//!
//! The quality class counts half-octave steps of model size:
//! ⌊2 · (log2(effective parameters in billions) − bits + speed)⌋, where the
//! effective parameters of an MoE model are √(total × active); `bits` is 1 for
//! a 3-bit mix (`Q3_*`, `IQ3_*`) and 2 for 2-bit and below (`Q2_K`, `IQ2_*`,
//! `IQ1_*`), whose quality loss grows fast (a 14B at Q3_K_M counts as a 7B);
//! `speed` is log2(tok/s ÷ 10) below 10 tok/s and 0 above (half the speed of
//! reading counts as half the model).

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

    fn bits(ft: FileType) -> f64 {
        ft.default_type().bits_per_weight()
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

    }
}
