//! Arbitrary text as a model catalog (`models.toml`, `--catalog FILE`): the
//! parser and its validation, then what `headroom fit` does with a catalog it
//! accepted, as far as that is planner code: complete each entry's
//! architecture (its own facts, its `arch_like` entry's, or an estimate from
//! the parameter count, as the app's `catalog::plan::resolve_arch` does), lay
//! out its tensors, profile every quantization and plan one on a fixed
//! machine. Nothing may panic, overflow or allocate without bound, whatever
//! facts, sizes and names the file claims, and every error is one line
//! naming a line of it.

#![no_main]

use headroom_fuzz::MACHINE;
use headroom_planner::catalog::{Catalog, Entry};
use headroom_planner::plan::Settings;
use headroom_planner::solve::{self, Build};
use headroom_planner::synth::facts::{self, ArchFacts, Skeleton};
use libfuzzer_sys::fuzz_target;

/// The architecture the app plans `e` with (`resolve_arch`), or `None`
/// where it reports an error instead.
fn resolve(cat: &Catalog, e: &Entry) -> Option<ArchFacts> {
    if let Ok(f) = e.arch.complete() {
        return Some(f);
    }
    if let Some(like) = &e.arch_like {
        // Validation made sure the entry exists and has complete facts.
        let target = cat.get(like).expect("arch_like names an entry");
        return Some(
            e.arch
                .or(&target.arch)
                .complete()
                .expect("arch_like has complete facts"),
        );
    }
    // `params_for_estimate`: the stated count, else what the listed file of
    // the widest mix holds.
    let n = match e.params_b {
        Some(b) => (b * 1e9) as u64,
        None => e
            .quants
            .iter()
            .filter_map(|q| {
                let bits = q.file_type.default_type().bits_per_weight();
                q.size_bytes.map(|s| (bits, s))
            })
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(bits, size)| (size as f64 * 8.0 / bits) as u64)?,
    };
    facts::estimate(&e.arch, n).ok()
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let cat = match Catalog::parse(text, "fuzz.toml") {
        Ok(cat) => cat,
        Err(e) => {
            let lines = text.lines().count().max(1);
            assert!(
                (1..=lines + 1).contains(&e.line),
                "line {} of {lines}: {e}",
                e.line
            );
            assert!(!e.to_string().contains('\n'), "one line: {e:?}");
            return;
        }
    };
    assert!(!cat.entries().is_empty());
    for e in cat.entries() {
        assert!(
            cat.get(&e.id).is_some_and(|found| found.line == e.line),
            "ids are unique: {}",
            e.id
        );
        assert!(!e.quants.is_empty(), "{}", e.id);
        for q in &e.quants {
            assert!(e.quant(&q.name).is_some_and(|found| found.line == q.line));
            if let Some(b) = q.size_bytes {
                // The ± of a listed size is half its last digit, so below it.
                assert!(
                    q.size_precision < b,
                    "{} {}: {b} ± {}",
                    e.id,
                    q.name,
                    q.size_precision
                );
            }
        }
        let Some(arch) = resolve(&cat, e) else {
            continue;
        };
        let skeleton = Skeleton::new(&arch);
        let _ = skeleton.n_params();
        for (i, q) in e.quants.iter().enumerate() {
            let (all, layers) = skeleton.weight_bytes(q.file_type);
            assert!(layers <= all);
            let Ok(profile) = skeleton.profile(q.file_type) else {
                continue;
            };
            let _ = profile.file_bytes();
            // The solver is fuzzed on its own (plan_sizes, gguf_header) and
            // takes most of the time here: one quantization per entry shows
            // that the profiles catalog facts make are plannable.
            if i == 0 {
                let _ = solve::plan(
                    &profile,
                    "fuzz.gguf",
                    &Settings::default(),
                    &MACHINE,
                    Build { gpu: true },
                );
            }
        }
    }
});
