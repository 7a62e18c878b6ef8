//! `--parallel auto`: how many slots a server runs, chosen from memory.
//!
//! A server keeps one llama.cpp context whose cells are split between its
//! slots (`llama-server -c C -np N` gives each slot C / N cells). `auto`
//! picks N so that `plan` and `serve` make the same choice:
//! * without a context size: the largest N from [`MAX_AUTO_SLOTS`] down to 1
//!   whose N slots of at least [`MIN_SLOT_CTX`] cells each (or the training
//!   context, when smaller) fit, and keep as many layers on the GPU as one
//!   slot would (a slot is never bought with a GPU layer); then the context
//!   grows as for one sequence, while that costs no GPU layer;
//! * with a context size C: N = min(4, C / [`CTX_PER_SLOT_GIVEN`]), at least 1.

use crate::hw::HardwareSnapshot;
use crate::plan::{Plan, Settings};
use crate::profile::ModelProfile;
use crate::solve::{self, Build};

/// Most slots `auto` picks.
pub const MAX_AUTO_SLOTS: u32 = 4;
/// Fewest cells a slot gets from `auto` without a context size.
pub const MIN_SLOT_CTX: u32 = solve::MIN_DEFAULT_CTX;
/// With a context size, `auto` gives each slot at least this many cells.
pub const CTX_PER_SLOT_GIVEN: u32 = 2048;

/// `--parallel`: a number of sequences, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parallel {
    /// Chosen from memory (see the module's documentation).
    Auto,
    /// Exactly this many.
    Fixed(u32),
}

/// `--parallel` text that is neither `auto` nor a number from 1 to 256.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--parallel {0:?}: give a number of sequences from 1 to 256, or auto")]
pub struct BadParallel(pub String);

impl std::str::FromStr for Parallel {
    type Err = BadParallel;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(Self::Auto);
        }
        match s.trim().parse::<u32>() {
            Ok(n) if (1..=256).contains(&n) => Ok(Self::Fixed(n)),
            _ => Err(BadParallel(s.to_string())),
        }
    }
}

/// The slots `auto` gives a context of `n_ctx` cells.
#[must_use]
pub fn slots_for_ctx(n_ctx: u32) -> u32 {
    (n_ctx / CTX_PER_SLOT_GIVEN).clamp(1, MAX_AUTO_SLOTS)
}

/// Plan with `--parallel auto`: the plan of the slot count chosen (its
/// `n_parallel`). `s.n_parallel` is ignored.
#[must_use]
pub fn plan_auto(
    p: &ModelProfile,
    path: &str,
    s: &Settings,
    hw: &HardwareSnapshot,
    build: Build,
) -> Plan {
    let with = |n: u32| {
        let s = Settings {
            n_parallel: n,
            ..s.clone()
        };
        solve::plan(p, path, &s, hw, build)
    };
    if let Some(c) = s.n_ctx {
        return with(slots_for_ctx(c));
    }
    let one = with(1);
    for n in (2..=MAX_AUTO_SLOTS).rev() {
        let plan = with(n);
        if plan.verdict.fits()
            && plan.n_gpu_layers >= one.n_gpu_layers
            && plan.n_cpu_moe <= one.n_cpu_moe
        {
            return plan;
        }
    }
    one
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Verdict;
    use crate::profile;
    use crate::solve::tests::snapshot;
    use crate::synth::{self, Mix, Shape};

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    fn llama_1b() -> ModelProfile {
        profile::profile(&synth::build(Shape::Llama1B, Mix::Q8_0).expect("synthetic header"))
            .expect("profile")
    }

    const CPU: Build = Build { gpu: false };
    const GPU: Build = Build { gpu: true };

    #[test]
    fn parses_auto_and_numbers_and_refuses_the_rest() {
        assert_eq!("auto".parse::<Parallel>(), Ok(Parallel::Auto));
        assert_eq!(" AUTO ".parse::<Parallel>(), Ok(Parallel::Auto));
        assert_eq!("3".parse::<Parallel>(), Ok(Parallel::Fixed(3)));
        for bad in ["0", "257", "-1", "two", ""] {
            assert!(bad.parse::<Parallel>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_given_context_gives_a_slot_per_2048_cells_up_to_four() {
        assert_eq!(slots_for_ctx(1), 1);
        assert_eq!(slots_for_ctx(2047), 1);
        assert_eq!(slots_for_ctx(4096), 2);
        assert_eq!(slots_for_ctx(6144), 3);
        assert_eq!(slots_for_ctx(8192), 4);
        assert_eq!(slots_for_ctx(1 << 20), 4);
        let p = llama_1b();
        let plan = plan_auto(
            &p,
            "m.gguf",
            &Settings {
                n_ctx: Some(6144),
                ..Settings::default()
            },
            &snapshot(32 * GIB, &[]),
            CPU,
        );
        assert_eq!((plan.n_parallel, plan.n_ctx), (3, 6144));
    }

    #[test]
    fn plenty_of_memory_gives_four_slots_of_at_least_4096_cells() {
        let p = llama_1b();
        let plan = plan_auto(
            &p,
            "m.gguf",
            &Settings::default(),
            &snapshot(64 * GIB, &[]),
            CPU,
        );
        assert_eq!(plan.n_parallel, MAX_AUTO_SLOTS);
        assert!(plan.verdict.fits());
        assert!(
            plan.n_ctx >= MAX_AUTO_SLOTS * MIN_SLOT_CTX,
            "{}",
            plan.n_ctx
        );
    }

    /// Each slot count is the largest that fits: one more slot of the
    /// minimum size would not, on a machine between the two.
    #[test]
    fn the_largest_slot_count_that_fits_is_chosen() {
        let p = llama_1b();
        let at = |n: u32, ram: u64| {
            solve::plan(
                &p,
                "m.gguf",
                &Settings {
                    n_parallel: n,
                    ..Settings::default()
                },
                &snapshot(ram, &[]),
                CPU,
            )
        };
        // The RAM at which n slots just fit, searched in 16 MiB steps.
        let need = |n: u32| {
            (1..4096u64)
                .map(|k| k * 16 * MIB)
                .find(|&ram| at(n, ram).verdict.fits())
                .expect("fits somewhere under 64 GiB")
        };
        let (two, three) = (need(2), need(3));
        assert!(two < three, "{two} < {three}");
        let plan = plan_auto(&p, "m.gguf", &Settings::default(), &snapshot(two, &[]), CPU);
        assert_eq!(plan.n_parallel, 2);
        let plan = plan_auto(
            &p,
            "m.gguf",
            &Settings::default(),
            &snapshot(three, &[]),
            CPU,
        );
        assert_eq!(plan.n_parallel, 3);
        // Below what two slots need, one slot, whatever its verdict.
        let plan = plan_auto(
            &p,
            "m.gguf",
            &Settings::default(),
            &snapshot(two - 16 * MIB, &[]),
            CPU,
        );
        assert_eq!(plan.n_parallel, 1);
    }

    /// A slot is never bought with a GPU layer.
    #[test]
    fn slots_never_push_layers_off_the_gpu() {
        let p = llama_1b();
        for vram_mib in [2048u64, 2304, 2560, 3072, 8192] {
            let hw = snapshot(64 * GIB, &[vram_mib * MIB]);
            let one = solve::plan(&p, "m.gguf", &Settings::default(), &hw, GPU);
            let auto = plan_auto(&p, "m.gguf", &Settings::default(), &hw, GPU);
            assert!(auto.n_gpu_layers >= one.n_gpu_layers, "{vram_mib} MiB");
            assert_ne!(auto.verdict, Verdict::DoesNotFit, "{vram_mib} MiB");
        }
    }
}
