//! Long runs: hundreds of generations in one process keep memory flat, and a
//! conversation that outgrows its context keeps working once trimmed.
//!
//! Bounded in time: at most `SOAK_GENERATIONS` (300) generations or
//! `SOAK_SECONDS` (120) seconds, whichever comes first. Prints the numbers.

use crate::demo;
use demo::demo_model;

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use headroom::llama::AccountingParams;
use headroom::runner::measure;
use headroom::runner::{Engine, GenOptions, Sampling, StopReason};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn engine(n_ctx: u32) -> Engine {
    // llama.cpp's own log would fill the test output: route it to tracing,
    // which this test does not print.
    llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default().with_logs_enabled(false));
    let spec = AccountingParams {
        n_ctx,
        n_threads: 2,
        no_alloc: false,
        ..AccountingParams::for_model(demo_model())
    };
    Engine::load(&spec, None).expect("load the demo model")
}

fn greedy(n: u32) -> GenOptions {
    GenOptions {
        sampling: Sampling {
            temp: 0.0,
            ..Sampling::default()
        },
        n_predict: Some(n),
        ..GenOptions::default()
    }
}

const MIB: f64 = 1024.0 * 1024.0;

/// The two tests take turns: two llama.cpp contexts spinning OpenMP threads
/// on the same cores slow each other down many times over.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn memory_stays_flat_over_hundreds_of_generations() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let max_gens = env_or("SOAK_GENERATIONS", 300) as usize;
    let budget = Duration::from_secs(env_or("SOAK_SECONDS", 120));
    let engine = engine(2048);
    let mut session = engine.session().expect("context");
    let cancel = AtomicBool::new(false);
    let opts = greedy(8);
    let topics = [
        "the sea",
        "a city",
        "the moon",
        "a forest",
        "winter",
        "a library",
    ];

    let start = Instant::now();
    let mut samples = Vec::new();
    let mut gens = 0usize;
    while gens < max_gens && start.elapsed() < budget {
        // A new prompt each time (different prefixes, so the cache is both
        // reused and trimmed), sometimes a fresh cache.
        let prompt = format!(
            "Note {gens}: here is a sentence about {}:",
            topics[gens % topics.len()]
        );
        if gens.is_multiple_of(25) {
            session.clear();
        }
        let tokens = engine.tokenize(&prompt, true).expect("tokenize");
        let g = session
            .generate(&tokens, &opts, &cancel, &mut |_| true)
            .expect("generate");
        assert!(g.tokens_generated > 0 || g.stop_reason == StopReason::EndOfGeneration);
        gens += 1;
        if gens.is_multiple_of(10) {
            samples.push((gens, measure::rss_bytes()));
        }
    }
    assert!(
        gens >= 100,
        "only {gens} generations in {budget:?}: too slow to say anything"
    );
    // After a warm-up (first tenth), current RSS must not drift.
    let warm = samples[samples.len() / 10];
    let last = *samples.last().expect("samples");
    let max = samples[samples.len() / 10..]
        .iter()
        .map(|s| s.1)
        .max()
        .unwrap_or(0);
    eprintln!(
        "soak: {gens} generations in {:.1} s; RSS after warm-up (gen {}) {:.1} MiB, max {:.1} MiB, end {:.1} MiB; peak {:.1} MiB",
        start.elapsed().as_secs_f64(),
        warm.0,
        warm.1 as f64 / MIB,
        max as f64 / MIB,
        last.1 as f64 / MIB,
        measure::peak_rss_bytes() as f64 / MIB
    );
    let growth = max.saturating_sub(warm.1);
    assert!(
        growth < 8 << 20,
        "RSS grew by {:.1} MiB after warm-up",
        growth as f64 / MIB
    );
}

#[test]
fn a_conversation_past_its_context_keeps_working() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let engine = engine(256);
    let mut session = engine.session().expect("context");
    let cancel = AtomicBool::new(false);
    let opts = greedy(48);
    let mut conversation = String::new();
    let mut overflows = 0;
    let mut turns = 0;
    while overflows < 3 {
        turns += 1;
        assert!(turns < 200, "the context never filled");
        conversation.push_str(&format!("\nTurn {turns}: tell me more about the sea."));
        let mut tokens = engine.tokenize(&conversation, true).expect("tokenize");
        // The chat's policy: when the prompt no longer fits, drop the oldest
        // turns (keep the last half of the text).
        while tokens.len() + 64 > session.n_ctx() as usize {
            let cut = conversation.len() / 2;
            let cut = conversation[cut..].find('\n').map_or(cut, |i| cut + i);
            conversation = conversation[cut..].to_string();
            tokens = engine.tokenize(&conversation, true).expect("tokenize");
            overflows += 1;
        }
        let g = session
            .generate(&tokens, &opts, &cancel, &mut |_| true)
            .expect("generate after trimming");
        if g.stop_reason == StopReason::ContextFull {
            overflows += 1;
        }
        conversation.push_str(&g.text);
        assert!(session.n_cached() <= session.n_ctx() as usize);
    }
    eprintln!("context 256: {turns} turns, {overflows} overflows handled");
}
