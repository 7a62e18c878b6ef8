//! The CPU's thread-synchronisation cost, what the per-layer cost of a CPU
//! decode step follows from ([`crate::speed::cpu_per_layer_s`]): llama.cpp's
//! CPU backend runs each graph node on all its threads and ends it at a
//! spinning barrier, about thirty nodes per layer, so a small model's decode
//! time beyond its bytes is mostly barriers. How long one takes changes with
//! the machine (core count, cache topology, a VM's neighbours) far more than
//! the bandwidth does, so it is measured (under 0.1 s) and cached beside the
//! RAM bandwidth ([`super::bandwidth`]).

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Instant;

/// Barrier rounds timed per pass, at most.
const ROUNDS: usize = 2000;
/// A pass stops early after this long: on a busy machine a spinning thread
/// that loses its core costs a time slice per round, and the probe must stay
/// cheap (15 passes: under 0.1 s however busy).
const PASS_CAP_S: f64 = 0.005;
/// Passes; the lower quartile is the figure (a pass only ever loses time to
/// other work: on the test VM one probe in six had a median three times the
/// others').
const PASSES: usize = 15;
/// Words each thread sums between barriers: a node's worth of tiny work, so
/// the threads arrive at the barrier a little apart, as llama.cpp's do.
const WORK_WORDS: usize = 256;

/// A spinning barrier like ggml's (`ggml_barrier`): an arrival counter and a
/// generation the last arrival bumps, which the others spin on.
struct SpinBarrier {
    threads: usize,
    arrived: AtomicUsize,
    generation: AtomicU32,
}

impl SpinBarrier {
    fn wait(&self) {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.threads {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
        } else {
            while self.generation.load(Ordering::Acquire) == generation {
                std::hint::spin_loop();
            }
        }
    }
}

/// Seconds per barrier round at `threads` threads: each pass starts
/// `threads` threads, which do [`ROUNDS`] rounds of a little work and a
/// spinning barrier; the lower quartile of the passes' times per round. `None` for fewer than
/// 2 threads (llama.cpp has no barrier to wait at) or a pass too fast to
/// time.
#[must_use]
pub fn measure(threads: u32) -> Option<f64> {
    let threads = usize::try_from(threads).ok()?;
    if threads < 2 {
        return None;
    }
    let mut times: Vec<f64> = (0..PASSES).filter_map(|_| one_pass(threads)).collect();
    if times.len() < PASSES / 2 + 1 {
        return None;
    }
    times.sort_by(f64::total_cmp);
    let t = times[times.len() / 4];
    (t.is_finite() && t > 0.0).then_some(t)
}

/// One pass: seconds per round, timed by the first thread from the moment
/// all have started.
fn one_pass(threads: usize) -> Option<f64> {
    let barrier = SpinBarrier {
        threads,
        arrived: AtomicUsize::new(0),
        generation: AtomicU32::new(0),
    };
    // Rounds every thread does: the first thread lowers it when the pass
    // runs out of time. It sets it after its barrier of round r, when no
    // thread can be past round r + 1's barrier, so r + 2 is a limit all of
    // them reach and none has passed.
    let limit = AtomicUsize::new(ROUNDS);
    let (elapsed, rounds) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (barrier, limit) = (&barrier, &limit);
                s.spawn(move || {
                    let words: Vec<u64> = (0..WORK_WORDS as u64).map(|w| w ^ i as u64).collect();
                    // Everyone started: the clock runs from here.
                    barrier.wait();
                    let start = Instant::now();
                    let mut acc = 0u64;
                    let mut round = 0;
                    while round < limit.load(Ordering::SeqCst) {
                        acc = black_box(&words)
                            .iter()
                            .fold(acc, |a, w| a.wrapping_add(*w));
                        barrier.wait();
                        if i == 0 && round % 16 == 15 && start.elapsed().as_secs_f64() > PASS_CAP_S
                        {
                            limit.store(round + 2, Ordering::SeqCst);
                        }
                        round += 1;
                    }
                    black_box(acc);
                    (start.elapsed().as_secs_f64(), round)
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).next()
    })?;
    let per_round = elapsed / rounds.max(1) as f64;
    (per_round > 0.0).then_some(per_round)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_barrier_takes_a_plausible_time() {
        // One thread waits for no one.
        assert_eq!(measure(1), None);
        assert_eq!(measure(0), None);
        let start = Instant::now();
        let t = measure(2).expect("two threads");
        // From a cache-line handoff (tens of ns) to a busy machine's time
        // slice (milliseconds).
        assert!(t > 1e-9 && t < 0.1, "{t}");
        eprintln!(
            "barrier at 2 threads: {:.2} µs per round, measured in {:.3} s",
            t * 1e6,
            start.elapsed().as_secs_f64()
        );
    }
}
