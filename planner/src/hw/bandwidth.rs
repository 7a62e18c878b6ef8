//! RAM read bandwidth: token generation on the CPU streams every weight once
//! per token, so bandwidth, not FLOPs, sets the speed. Datasheets do not
//! know how many channels are populated, so we measure (0.22–0.26 s for
//! `headroom hw` on the 2-core test VM, 0.45 s on an earlier one) and
//! cache the result per CPU model in `ram-bandwidth-v4.json`. The CPU's
//! per-layer and per-vocabulary costs follow from it too
//! ([`crate::speed::cpu_throughput`]).
//!
//! A figure measured while other processes kept the cores busy is low (on a
//! 2-core VM with a build running, 10 GB/s where a quiet pass reads 13–14),
//! and the load average does not see every such moment: one figure cached
//! on the development VM, taken when the load called the machine quiet,
//! read 8.7 GB/s where fresh ones read 20–47, and put the instruct demo at
//! 55 tok/s where it ran at 185. So the cache counts the quiet measurements
//! behind each figure: the first [`QUIET_FIGURES`] probes on a quiet machine
//! all measure and keep the largest figure, and one on a busy machine
//! counts for nothing. (Version 1 of the cache, which kept the first figure
//! for ever, version 2, which kept best passes, and version 3 are not read;
//! of version 4's older files, the thread-barrier times and the list of
//! figures taken on a busy machine are no longer read: a figure without a
//! count is measured again.)

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::types::{DEFAULT_RAM_BANDWIDTH_BYTES_PER_S, ProbeOptions};

/// Name of the cache file inside [`ProbeOptions::cache_dir`].
pub const CACHE_FILE: &str = "ram-bandwidth-v4.json";

/// Buffer streamed by the measurement: far larger than the last-level cache
/// of common CPUs, so reads come from DRAM.
pub const MEASURE_BYTES: usize = 256 << 20;

/// Most threads used for reading: enough to saturate the memory controllers
/// of desktop and workstation parts without oversubscribing big servers.
const MAX_THREADS: usize = 16;

/// Passes over the buffer after the first (which warms up the caches, the
/// TLB and the clock, and is not counted); the median one is the figure
/// (about 0.3 s in all at 14 GB/s).
const PASSES: u32 = 16;

/// Quiet measurements a CPU model's figure is the largest of before the
/// cache answers without measuring (0.22–0.26 s each on the test VM).
pub const QUIET_FIGURES: u32 = 3;

/// The cache file: measured bytes/s by CPU model string.
#[derive(Debug, Default, Serialize, Deserialize)]
struct BandwidthCache {
    entries: BTreeMap<String, f64>,
    /// Quiet measurements each CPU model's figure is the largest of: none
    /// when it was taken on a busy machine, or in a file written before
    /// this count was kept.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    quiet: BTreeMap<String, u32>,
}

/// Whether other work keeps this machine's cores busy: a 1-minute load
/// average of three quarters of the cores or more (Linux's `/proc/loadavg`;
/// elsewhere, never). Other measurements of this machine (a device's
/// speed) follow the same rule.
#[must_use]
pub fn machine_busy() -> bool {
    let load = std::fs::read_to_string("/proc/loadavg").ok().and_then(|s| {
        s.split_whitespace()
            .next()
            .and_then(|l| l.parse::<f64>().ok())
    });
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    load.is_some_and(|l| l >= 0.75 * cores as f64)
}

/// RAM bandwidth for this machine and whether it was measured: the cached
/// value for `cpu_model` if any (measured again, keeping the larger figure,
/// while this machine is quiet and the figure is the largest of fewer than
/// [`QUIET_FIGURES`] quiet ones); else a fresh
/// measurement when `opts.measure_bandwidth` (stored in the cache); else
/// [`DEFAULT_RAM_BANDWIDTH_BYTES_PER_S`]. `max_buffer` caps the measurement
/// buffer (keep it well inside the memory budget). Never fails; problems
/// become notes.
pub fn ram_bandwidth(
    opts: &ProbeOptions,
    cpu_model: &str,
    max_buffer: usize,
    notes: &mut Vec<String>,
) -> (f64, bool) {
    let cache_path = opts.cache_dir.as_ref().map(|d| d.join(CACHE_FILE));
    let mut cache = cache_path.as_deref().map(read_cache).unwrap_or_default();
    let cached = cache
        .entries
        .get(cpu_model)
        .copied()
        .filter(|bw| bw.is_finite() && *bw > 0.0);
    let settled = cache.quiet.get(cpu_model).copied().unwrap_or(0) >= QUIET_FIGURES;
    if let Some(bw) = cached
        && (settled || !opts.measure_bandwidth || machine_busy())
    {
        return (bw, true);
    }
    if !opts.measure_bandwidth {
        return (DEFAULT_RAM_BANDWIDTH_BYTES_PER_S, false);
    }
    let busy = machine_busy();
    let Some(bw) = measure(MEASURE_BYTES.min(max_buffer), PASSES) else {
        if let Some(bw) = cached {
            return (bw, true);
        }
        notes.push(format!(
            "RAM bandwidth not measured (not enough memory for the {} MiB test buffer); assuming {:.0} GB/s",
            MEASURE_BYTES.min(max_buffer) >> 20,
            DEFAULT_RAM_BANDWIDTH_BYTES_PER_S / 1e9
        ));
        return (DEFAULT_RAM_BANDWIDTH_BYTES_PER_S, false);
    };
    // A figure from a busy machine is never better than a quiet one's.
    let bw = cached.map_or(bw, |c| c.max(bw));
    if let Some(path) = cache_path {
        cache.entries.insert(cpu_model.to_string(), bw);
        if !busy {
            *cache.quiet.entry(cpu_model.to_string()).or_default() += 1;
        }
        if let Err(e) = write_cache(&path, &cache) {
            notes.push(format!(
                "cannot save RAM bandwidth cache {}: {e}",
                path.display()
            ));
        }
    }
    (bw, true)
}

/// A missing or unreadable cache is simply empty: it will be rewritten.
fn read_cache(path: &Path) -> BandwidthCache {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Writes through a temporary file and a rename so concurrent runs never
/// read half a file.
fn write_cache(path: &Path, cache: &BandwidthCache) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let json = serde_json::to_vec_pretty(cache).map_err(std::io::Error::other)?;
    let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
    std::fs::write(&tmp, json)?;
    std::fs::rename(&tmp, path)
}

/// Streams a `buffer_bytes` buffer once to warm up, then `passes` times,
/// with several threads, and returns the median pass in bytes/s: decode
/// streams the weights for seconds and sees the sustained figure, while the
/// best of eight passes on a shared VM caught a lull (best-pass figures on
/// the 2-core test VM ranged 14.2–19.8 GB/s from run to run, medians
/// 13–15). `None` when the buffer is under 16 MiB
/// (too cache-resident to mean anything), cannot be allocated, or a pass
/// was too fast to time.
pub fn measure(buffer_bytes: usize, passes: u32) -> Option<f64> {
    if buffer_bytes < 16 << 20 {
        return None;
    }
    let words = buffer_bytes / 8;
    let mut buf: Vec<u64> = Vec::new();
    buf.try_reserve_exact(words).ok()?;
    // Non-zero data written to every page: an untouched calloc'd buffer
    // would read the kernel's shared zero page and look impossibly fast.
    buf.extend((0..words as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_THREADS);
    let chunk = words.div_ceil(threads);

    let mut times = Vec::with_capacity(passes.max(1) as usize);
    for pass in 0..=passes.max(1) {
        let start = Instant::now();
        let total = std::thread::scope(|s| {
            let handles: Vec<_> = buf
                .chunks(chunk)
                .map(|c| s.spawn(move || sum_words(c)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(0))
                .fold(0u64, u64::wrapping_add)
        });
        // The sum is "used", so the reads cannot be optimised away.
        black_box(total);
        if pass > 0 {
            times.push(start.elapsed());
        }
    }
    times.sort_unstable();
    let secs = times.get(times.len() / 2)?.as_secs_f64();
    (secs > 0.0).then(|| (words * 8) as f64 / secs)
}

/// Sums a slice with four independent accumulators so the loop is bound by
/// memory, not by one add chain.
fn sum_words(words: &[u64]) -> u64 {
    // Hide the contents from the optimiser.
    let words = black_box(words);
    let mut acc = [0u64; 4];
    let mut quads = words.chunks_exact(4);
    for q in &mut quads {
        for (a, w) in acc.iter_mut().zip(q) {
            *a = a.wrapping_add(*w);
        }
    }
    let tail = quads
        .remainder()
        .iter()
        .fold(0u64, |s, w| s.wrapping_add(*w));
    acc.iter().fold(tail, |s, a| s.wrapping_add(*a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_is_exact() {
        let v: Vec<u64> = (1..=10).collect();
        assert_eq!(sum_words(&v), 55);
        assert_eq!(sum_words(&[u64::MAX, 2]), 1);
    }

    #[test]
    fn measurement_is_plausible() {
        let bw = measure(16 << 20, 2).expect("16 MiB measurable");
        // Anything from a debug build on a slow VM to a cache-resident run.
        assert!(bw.is_finite() && bw > 1e8 && bw < 1e13, "{bw}");
        assert_eq!(measure(1 << 20, 2), None);
    }

    #[test]
    fn cache_is_used_and_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut opts = ProbeOptions {
            measure_bandwidth: false,
            cache_dir: Some(dir.path().join("sub")),
        };
        let mut notes = Vec::new();
        // Nothing cached, no measuring: the default.
        assert_eq!(
            ram_bandwidth(&opts, "cpu A", 16 << 20, &mut notes),
            (DEFAULT_RAM_BANDWIDTH_BYTES_PER_S, false)
        );

        opts.measure_bandwidth = true;
        let (bw, measured) = ram_bandwidth(&opts, "cpu A", 16 << 20, &mut notes);
        assert!(measured && bw > 0.0);
        assert!(notes.is_empty(), "{notes:?}");

        // Overwrite with a known value the largest of enough quiet ones:
        // the cache wins over measuring.
        let path = dir.path().join("sub").join(CACHE_FILE);
        std::fs::write(&path, r#"{"entries":{"cpu A":1.5e10},"quiet":{"cpu A":3}}"#)
            .expect("write");
        assert_eq!(
            ram_bandwidth(&opts, "cpu A", 16 << 20, &mut notes),
            (1.5e10, true)
        );
        // Keyed by model: another CPU is measured and added beside it.
        let (_, measured) = ram_bandwidth(&opts, "cpu B", 16 << 20, &mut notes);
        assert!(measured);
        let cache = read_cache(&path);
        assert_eq!(cache.entries.len(), 2);
        assert_eq!(cache.entries.get("cpu A"), Some(&1.5e10));
    }

    #[test]
    fn a_figure_from_a_busy_machine_is_measured_again_when_quiet() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(CACHE_FILE);
        // Taken on a busy machine: no quiet count (this file is version 4's
        // older form, whose busy list is no longer read).
        std::fs::write(&path, r#"{"entries":{"cpu A":1.0},"busy":["cpu A"]}"#).expect("write");
        let mut opts = ProbeOptions {
            measure_bandwidth: false,
            cache_dir: Some(dir.path().to_path_buf()),
        };
        let mut notes = Vec::new();
        // Not allowed to measure: the cached figure, busy or not.
        assert_eq!(
            ram_bandwidth(&opts, "cpu A", 16 << 20, &mut notes),
            (1.0, true)
        );
        opts.measure_bandwidth = true;
        let quiet = !machine_busy();
        let (bw, measured) = ram_bandwidth(&opts, "cpu A", 16 << 20, &mut notes);
        assert!(measured);
        if quiet {
            // Measured again: a real figure, kept.
            assert!(bw > 1.0, "{bw}");
            let cached = read_cache(&path).entries["cpu A"];
            assert!(same_figure(cached, bw), "{cached} cached, {bw} returned");
        } else {
            // Still busy (someone's build): the figure stays until it is quiet.
            assert_eq!(bw, 1.0);
        }
        // Earlier versions' files are not read.
        for (old, cpu) in [
            ("ram-bandwidth.json", "cpu B"),
            ("ram-bandwidth-v2.json", "cpu C"),
            ("ram-bandwidth-v3.json", "cpu D"),
        ] {
            let json = format!(r#"{{"entries":{{"{cpu}":7.0}}}}"#);
            std::fs::write(dir.path().join(old), json).expect("write");
            assert_ne!(ram_bandwidth(&opts, cpu, 16 << 20, &mut notes).0, 7.0);
        }
    }

    /// A figure with fewer than three quiet ones behind it (or a file from
    /// before they were counted) is measured again on a quiet machine,
    /// keeping the largest, until three stand behind it; then the cache
    /// answers, however low its figure.
    #[test]
    fn a_quiet_machine_measures_until_three_figures_stand_behind_the_cached_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(CACHE_FILE);
        let opts = ProbeOptions {
            measure_bandwidth: true,
            cache_dir: Some(dir.path().to_path_buf()),
        };
        let mut notes = Vec::new();
        // Settled: the cache answers without measuring.
        std::fs::write(&path, r#"{"entries":{"cpu A":1.0},"quiet":{"cpu A":3}}"#).expect("write");
        assert_eq!(
            ram_bandwidth(&opts, "cpu A", 16 << 20, &mut notes),
            (1.0, true)
        );
        // A low figure from before the count, as the development VM's cache
        // held one: each quiet probe measures, the largest is kept.
        std::fs::write(&path, r#"{"entries":{"cpu A":1.0}}"#).expect("write");
        let mut prev = 1.0;
        for _ in 0..QUIET_FIGURES + 2 {
            let count = read_cache(&path).quiet.get("cpu A").copied().unwrap_or(0);
            let (bw, measured) = ram_bandwidth(&opts, "cpu A", 16 << 20, &mut notes);
            assert!(
                measured && (bw >= prev || same_figure(bw, prev)),
                "{bw} after {prev}"
            );
            let after = read_cache(&path);
            let now = after.quiet.get("cpu A").copied().unwrap_or(0);
            if count >= QUIET_FIGURES {
                assert!(
                    now == count && same_figure(bw, prev),
                    "a settled figure measured again"
                );
            } else if now == count + 1 {
                assert!(bw > 1.0, "a quiet probe measured nothing: {bw}");
            } else {
                // The machine was busy: nothing measured, nothing counted.
                assert!(
                    now == count && same_figure(bw, prev),
                    "{now} {bw} after {count} {prev}"
                );
            }
            assert!(same_figure(after.entries["cpu A"], bw));
            prev = bw;
        }
        assert!(notes.is_empty(), "{notes:?}");
    }

    /// Two figures alike: serde_json reads a float back within an ulp of
    /// what it wrote, not always exactly.
    fn same_figure(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
    }

    #[test]
    fn corrupt_cache_is_ignored_and_too_small_budget_is_noted() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(CACHE_FILE), "not json").expect("write");
        let opts = ProbeOptions {
            measure_bandwidth: true,
            cache_dir: Some(dir.path().to_path_buf()),
        };
        let mut notes = Vec::new();
        assert_eq!(
            ram_bandwidth(&opts, "cpu", 1 << 20, &mut notes),
            (DEFAULT_RAM_BANDWIDTH_BYTES_PER_S, false)
        );
        assert_eq!(notes.len(), 1, "{notes:?}");
    }
}
