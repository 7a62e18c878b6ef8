//! The calibration log: after each run, what the plan predicted and what the
//! run measured, one JSON object per line in the user's data directory
//! (`$HEADROOM_DATA_DIR`, else `~/.local/share/headroom/calibration.jsonl`).
//! `headroom plan` shows the last measurement for the same model and
//! settings next to its prediction.
//!
//! The file is rewritten whole through a temporary file and a rename, so a
//! crash never leaves half a line, and it keeps the last [`MAX_ENTRIES`].
//!
//! Later estimates learn from it ([`speed_calibration`]): on the same
//! machine (CPU model and cores) at the thread count the planner assumes
//! (the physical cores), the median measured ÷ estimated speed of the last
//! [`CALIBRATION_RUNS`] CPU-only runs scales the CPU's side of every decode
//! and prompt estimate. Only runs estimated by the current speed model
//! ([`SPEED_MODEL_VERSION`]) count, each against the estimate before
//! calibration, so calibrating never compounds. Lines written before these
//! fields existed still read; they simply never calibrate.
//!
//! A run that other work disturbed says nothing of the machine: on a 2-core
//! VM, llama.cpp's threads spin at a barrier per graph node, and a run that
//! loses a core for a moment decodes at a fraction of its speed (6.4 tok/s
//! beside quiet runs' 100). Each run records the cores other processes used
//! while it decoded ([`OtherWork`]); a run where they used
//! [`DISTURBED_CORES`] or more is kept but marked `disturbed`, and neither
//! calibrates nor is shown as the last run.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{Context, Result};
use headroom_planner::hw::CpuInfo;
use headroom_planner::plan::Plan;
use headroom_planner::speed::{SPEED_MODEL_VERSION, SpeedCalibration};
use serde::{Deserialize, Serialize};

/// Entries kept.
pub const MAX_ENTRIES: usize = 1000;
const FILE_NAME: &str = "calibration.jsonl";

/// Runs a calibration looks back over (the most recent that qualify).
pub const CALIBRATION_RUNS: usize = 10;
/// A run calibrates decode only when it generated at least this many tokens
/// (fewer are mostly the first token's warm-up).
pub const MIN_DECODE_TOKENS: u64 = 16;
/// A run calibrates prompt speed only when its prompt had at least this
/// many tokens (a few-token prompt is latency, not throughput).
pub const MIN_PROMPT_TOKENS: u64 = 32;

/// One run: prediction and measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Seconds since the Unix epoch.
    pub unix_time: u64,
    /// headroom's version.
    pub headroom_version: String,
    /// Which model and settings (see [`key`]).
    pub key: String,
    /// The model file.
    pub model: String,
    /// The plan's predicted peak RSS.
    pub planned_peak_bytes: u64,
    /// Measured peak RSS (`VmHWM`).
    pub measured_peak_bytes: u64,
    /// Measured RSS right after the load.
    pub rss_after_load_bytes: u64,
    /// Predicted decode speed.
    pub planned_decode_tokens_per_s: f64,
    /// Measured decode speed (0 when nothing was generated).
    pub measured_decode_tokens_per_s: f64,
    /// Predicted prompt speed.
    pub planned_prompt_tokens_per_s: f64,
    /// Measured prompt speed.
    pub measured_prompt_tokens_per_s: f64,
    /// The machine the plan was made for ([`machine_key`]); empty when it
    /// was another one (`--hw`) or the line predates the field.
    #[serde(default)]
    pub machine: String,
    /// CPU threads the run used (0: not recorded).
    #[serde(default)]
    pub threads: u32,
    /// [`SPEED_MODEL_VERSION`] of the estimates (0: not recorded).
    #[serde(default)]
    pub speed_model: u32,
    /// Every weight the plan read per token was in RAM (no GPU layers).
    #[serde(default)]
    pub cpu_only: bool,
    /// Prompt tokens processed.
    #[serde(default)]
    pub tokens_prompt: u64,
    /// Tokens generated.
    #[serde(default)]
    pub tokens_generated: u64,
    /// The speed model's decode estimate before calibration.
    #[serde(default)]
    pub model_decode_tokens_per_s: f64,
    /// The speed model's prompt estimate before calibration.
    #[serde(default)]
    pub model_prompt_tokens_per_s: f64,
    /// Cores other processes used while the run decoded ([`OtherWork`]);
    /// `None` where not known (not Linux, a decode too short to tell, an
    /// older line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_cpu_cores: Option<f64>,
    /// Other work disturbed the run ([`disturbed`]): it neither calibrates
    /// nor is shown as the last run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disturbed: bool,
}

/// Other processes using this many cores or more while a run decoded
/// disturbed it: the soak test's threshold for comparing speeds, which on
/// the 2-core test VM separates the runs within ±10% of each other from
/// those at 2–50% of their speed.
pub const DISTURBED_CORES: f64 = 0.3;

/// Whether a run during which other processes used `other_cores` was
/// disturbed ([`DISTURBED_CORES`]); an unknown figure is not.
#[must_use]
pub fn disturbed(other_cores: Option<f64>) -> bool {
    other_cores.is_some_and(|c| c >= DISTURBED_CORES)
}

/// The CPU time other processes use while this one works: every CPU's busy
/// time (`/proc/stat`, less idle and I/O wait) less this process's own
/// (`getrusage`, all its threads), over the wall time. Linux only; the soak
/// test of the speed estimate reads the same figure from `run --json`
/// (`measured.other_cpu_cores`).
#[derive(Debug, Clone, Copy)]
pub struct OtherWork {
    start: std::time::Instant,
    all_busy_s: f64,
    own_s: f64,
}

/// Below this the clock ticks of `/proc/stat` (10 ms) are too coarse to
/// tell a core's tenth: no figure.
const MIN_WINDOW_S: f64 = 0.25;

impl OtherWork {
    /// Start counting now; `None` where the counters cannot be read.
    #[must_use]
    pub fn start() -> Option<Self> {
        Some(OtherWork {
            start: std::time::Instant::now(),
            all_busy_s: all_busy_seconds()?,
            own_s: own_cpu_seconds()?,
        })
    }

    /// Cores other processes used since [`OtherWork::start`]; `None` when
    /// the counters cannot be read or under a quarter of a second passed.
    #[must_use]
    pub fn cores(&self) -> Option<f64> {
        let wall = self.start.elapsed().as_secs_f64();
        if wall < MIN_WINDOW_S {
            return None;
        }
        let others = (all_busy_seconds()? - self.all_busy_s) - (own_cpu_seconds()? - self.own_s);
        Some((others.max(0.0) / wall * 100.0).round() / 100.0)
    }
}

/// Busy CPU seconds of every CPU since boot: `/proc/stat`'s first line,
/// less idle and I/O wait.
fn all_busy_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let v: Vec<f64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|x| x.parse().ok())
        .collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (hz > 0.0)
        .then(|| (v.iter().sum::<f64>() - v.get(3).unwrap_or(&0.0) - v.get(4).unwrap_or(&0.0)) / hz)
}

/// This process's CPU seconds, every thread's, user and system.
fn own_cpu_seconds() -> Option<f64> {
    // SAFETY: getrusage writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &raw mut ru) } != 0 {
        return None;
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    Some(t(ru.ru_utime) + t(ru.ru_stime))
}

/// Which machine a run measured: architecture, CPU model and physical
/// cores, the facts the CPU's speed follows from (the RAM bandwidth cache is
/// keyed by the CPU model too).
#[must_use]
pub fn machine_key(cpu: &CpuInfo) -> String {
    format!("{} {} x{}", cpu.arch, cpu.model.trim(), cpu.physical_cores)
}

static THIS_MACHINE: OnceLock<String> = OnceLock::new();

/// Say that this process plans for the machine it runs on (no `--hw`
/// profile), so the runs it records can calibrate later plans.
pub fn set_this_machine(cpu: &CpuInfo) {
    let _ = THIS_MACHINE.set(machine_key(cpu));
}

/// The key [`set_this_machine`] set, or empty.
#[must_use]
pub fn this_machine() -> String {
    THIS_MACHINE.get().cloned().unwrap_or_default()
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        f64::midpoint(v[n / 2 - 1], v[n / 2])
    })
}

fn ratio(measured: f64, estimated: f64) -> Option<f64> {
    let r = measured / estimated;
    (measured > 0.0 && estimated > 0.0 && r.is_finite()).then_some(r)
}

/// The calibration `entries` give `machine` at `threads`: the median
/// measured ÷ estimated decode speed of the last [`CALIBRATION_RUNS`] runs
/// that qualify (this speed model, this machine and thread count, no GPU
/// layers, at least [`MIN_DECODE_TOKENS`] generated, not disturbed by other
/// work), and the median prompt
/// ratio of those of them with a prompt of at least [`MIN_PROMPT_TOKENS`]
/// (1 when none had). `None` without a qualifying run.
#[must_use]
pub fn calibration_from(
    entries: &[Entry],
    machine: &str,
    threads: u32,
) -> Option<SpeedCalibration> {
    if machine.is_empty() {
        return None;
    }
    let recent: Vec<(f64, &Entry)> = entries
        .iter()
        .rev()
        .filter(|e| {
            e.speed_model == SPEED_MODEL_VERSION
                && e.machine == machine
                && e.threads == threads
                && e.cpu_only
                && e.tokens_generated >= MIN_DECODE_TOKENS
                && !e.disturbed
        })
        .filter_map(|e| {
            Some((
                ratio(e.measured_decode_tokens_per_s, e.model_decode_tokens_per_s)?,
                e,
            ))
        })
        .take(CALIBRATION_RUNS)
        .collect();
    let decode = median(recent.iter().map(|(r, _)| *r).collect())?;
    let prompt = median(
        recent
            .iter()
            .filter(|(_, e)| e.tokens_prompt >= MIN_PROMPT_TOKENS)
            .filter_map(|(_, e)| ratio(e.measured_prompt_tokens_per_s, e.model_prompt_tokens_per_s))
            .collect(),
    )
    .unwrap_or(1.0);
    Some(SpeedCalibration {
        runs: u32::try_from(recent.len()).unwrap_or(u32::MAX),
        decode_factor: SpeedCalibration::clamp(decode),
        prompt_factor: SpeedCalibration::clamp(prompt),
    })
}

/// [`calibration_from`] the log in `dir`, for `cpu` at its physical cores
/// (the thread count the planner assumes).
#[must_use]
pub fn speed_calibration(dir: &Path, cpu: &CpuInfo) -> Option<SpeedCalibration> {
    calibration_from(&read(dir), &machine_key(cpu), cpu.physical_cores.max(1))
}

/// The identity of a model file and the settings that decide its memory: the
/// canonical path, the file size, and the plan's resolved settings.
#[must_use]
pub fn key(plan: &Plan) -> String {
    let path = Path::new(&plan.model.path);
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let s = &plan.settings;
    format!(
        "{}|{}|ctx={}|np={}|ngl={}|ncmoe={}|b={}|ub={}|k={}|v={}|fa={}|swa_full={}|mmap={}|repack={}",
        canonical.display(),
        plan.model.file_bytes,
        plan.n_ctx,
        plan.n_parallel,
        plan.n_gpu_layers,
        plan.n_cpu_moe,
        s.n_batch,
        s.n_ubatch,
        s.cache_type_k,
        s.cache_type_v,
        s.flash_attn,
        s.swa_full,
        s.mmap,
        s.repack
    )
}

/// Read the log (missing file: empty; unreadable lines are skipped).
#[must_use]
pub fn read(dir: &Path) -> Vec<Entry> {
    std::fs::read_to_string(dir.join(FILE_NAME))
        .map(|s| {
            s.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Append an entry, keeping the newest [`MAX_ENTRIES`]. The whole file is
/// rewritten and renamed under a lock ([`crate::files::update`]): a failed
/// write keeps the old log, and two runs finishing at once both land.
///
/// # Errors
/// The directory or file cannot be written.
pub fn append(dir: &Path, entry: &Entry) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    crate::files::update(&dir.join(FILE_NAME), |old| {
        let old = old.map(|b| String::from_utf8_lossy(&b).into_owned());
        // Damaged lines (a log from a crashed older version) are dropped, as `read` skips them.
        let mut entries: Vec<Entry> = old
            .iter()
            .flat_map(|s| s.lines())
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        entries.push(entry.clone());
        let skip = entries.len().saturating_sub(MAX_ENTRIES);
        let mut text = String::new();
        for e in &entries[skip..] {
            text.push_str(&serde_json::to_string(e)?);
            text.push('\n');
        }
        Ok(text.into_bytes())
    })
}

/// The most recent entry for this plan's model and settings that other
/// work did not disturb.
#[must_use]
pub fn last_for(dir: &Path, plan: &Plan) -> Option<Entry> {
    let k = key(plan);
    read(dir)
        .into_iter()
        .rev()
        .find(|e| e.key == k && !e.disturbed)
}

/// Seconds since the Unix epoch.
#[must_use]
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, peak: u64) -> Entry {
        Entry {
            unix_time: 1,
            headroom_version: "0".into(),
            key: key.into(),
            model: "m".into(),
            planned_peak_bytes: 10,
            measured_peak_bytes: peak,
            rss_after_load_bytes: 5,
            planned_decode_tokens_per_s: 1.0,
            measured_decode_tokens_per_s: 1.0,
            planned_prompt_tokens_per_s: 1.0,
            measured_prompt_tokens_per_s: 1.0,
            machine: String::new(),
            threads: 0,
            speed_model: 0,
            cpu_only: false,
            tokens_prompt: 0,
            tokens_generated: 0,
            model_decode_tokens_per_s: 0.0,
            model_prompt_tokens_per_s: 0.0,
            other_cpu_cores: None,
            disturbed: false,
        }
    }

    /// A run on machine `m` at 2 threads: estimated 10 tok/s decode and 100
    /// prompt, measured `decode` and `prompt`.
    fn run(m: &str, decode: f64, prompt: f64) -> Entry {
        Entry {
            machine: m.into(),
            threads: 2,
            speed_model: SPEED_MODEL_VERSION,
            cpu_only: true,
            tokens_prompt: 64,
            tokens_generated: 64,
            planned_decode_tokens_per_s: 10.0,
            model_decode_tokens_per_s: 10.0,
            measured_decode_tokens_per_s: decode,
            planned_prompt_tokens_per_s: 100.0,
            model_prompt_tokens_per_s: 100.0,
            measured_prompt_tokens_per_s: prompt,
            ..entry("k", 1)
        }
    }

    #[test]
    fn calibration_is_the_median_of_recent_qualifying_runs() {
        assert_eq!(calibration_from(&[], "m", 2), None);
        let mut log: Vec<Entry> = [12.0, 13.0, 30.0]
            .into_iter()
            .map(|d| run("m", d, 50.0))
            .collect();
        let c = calibration_from(&log, "m", 2).expect("three runs");
        assert_eq!(c.runs, 3);
        assert!((c.decode_factor - 1.3).abs() < 1e-9, "{c:?}");
        assert!((c.prompt_factor - 0.5).abs() < 1e-9, "{c:?}");
        // None of these count: another machine, thread count, speed model,
        // a GPU run, a short run, an old line.
        let mut other = vec![
            run("other", 1.0, 1.0),
            Entry {
                threads: 1,
                ..run("m", 1.0, 1.0)
            },
            Entry {
                speed_model: SPEED_MODEL_VERSION + 1,
                ..run("m", 1.0, 1.0)
            },
            Entry {
                cpu_only: false,
                ..run("m", 1.0, 1.0)
            },
            Entry {
                tokens_generated: 4,
                ..run("m", 1.0, 1.0)
            },
            Entry {
                other_cpu_cores: Some(0.9),
                disturbed: true,
                ..run("m", 0.1, 1.0)
            },
            entry("k", 1),
        ];
        log.append(&mut other);
        assert_eq!(calibration_from(&log, "m", 2), Some(c));
        // Only the last CALIBRATION_RUNS count; short prompts leave prompt alone.
        for _ in 0..CALIBRATION_RUNS {
            log.push(Entry {
                tokens_prompt: 3,
                ..run("m", 20.0, 1.0)
            });
        }
        let c = calibration_from(&log, "m", 2).expect("runs");
        assert_eq!(c.runs, CALIBRATION_RUNS as u32);
        assert!((c.decode_factor - 2.0).abs() < 1e-9);
        assert_eq!(c.prompt_factor, 1.0);
        // Clamped, and nothing for a machine nobody named.
        log.push(run("m", 1000.0, 100.0));
        log.push(run("m", 1000.0, 100.0));
        log.push(run("m", 1000.0, 100.0));
        log.extend((0..CALIBRATION_RUNS).map(|_| run("m", 1000.0, 100.0)));
        let c = calibration_from(&log, "m", 2).expect("runs");
        assert_eq!(
            c.decode_factor,
            headroom_planner::speed::CALIBRATION_RANGE.1
        );
        assert_eq!(calibration_from(&log, "", 2), None);
    }

    #[test]
    fn lines_before_the_calibration_fields_still_read() {
        let old = r#"{"unix_time":1,"headroom_version":"0.1.0","key":"k","model":"m","planned_peak_bytes":1,"measured_peak_bytes":1,"rss_after_load_bytes":1,"planned_decode_tokens_per_s":27.15,"measured_decode_tokens_per_s":37.41,"planned_prompt_tokens_per_s":656.48,"measured_prompt_tokens_per_s":225.72}"#;
        let e: Entry = serde_json::from_str(old).expect("an old line reads");
        assert_eq!(e.speed_model, 0);
        assert_eq!(calibration_from(&[e], "m", 2), None);
    }

    #[test]
    fn appends_keep_order_and_the_cap() {
        let dir = tempfile::tempdir().expect("tempdir");
        for i in 0..(MAX_ENTRIES as u64 + 5) {
            append(dir.path(), &entry("k", i)).expect("append");
        }
        let all = read(dir.path());
        assert_eq!(all.len(), MAX_ENTRIES);
        assert_eq!(
            all.last().map(|e| e.measured_peak_bytes),
            Some(MAX_ENTRIES as u64 + 4)
        );
        assert_eq!(all[0].measured_peak_bytes, 5);
    }

    #[test]
    fn a_damaged_line_is_skipped_not_fatal() {
        let dir = tempfile::tempdir().expect("tempdir");
        append(dir.path(), &entry("a", 1)).expect("append");
        let path = dir.path().join(FILE_NAME);
        let mut text = std::fs::read_to_string(&path).expect("read");
        text.push_str("{not json\n");
        std::fs::write(&path, text).expect("write");
        append(dir.path(), &entry("b", 2)).expect("append");
        let all = read(dir.path());
        assert_eq!(
            all.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
    }

    #[test]
    fn a_disturbed_run_is_kept_but_neither_calibrates_nor_is_the_last_run() {
        assert!(!disturbed(None));
        assert!(!disturbed(Some(0.29)));
        assert!(disturbed(Some(DISTURBED_CORES)));
        let dir = tempfile::tempdir().expect("tempdir");
        let quiet = Entry {
            other_cpu_cores: Some(0.02),
            ..run("m", 20.0, 100.0)
        };
        let busy = Entry {
            other_cpu_cores: Some(1.1),
            disturbed: true,
            ..run("m", 2.0, 10.0)
        };
        append(dir.path(), &quiet).expect("append");
        append(dir.path(), &busy).expect("append");
        let log = read(dir.path());
        assert_eq!(log.len(), 2, "kept");
        assert!(log[1].disturbed);
        let c = calibration_from(&log, "m", 2).expect("the quiet run");
        assert_eq!(c.runs, 1);
        assert!((c.decode_factor - 2.0).abs() < 1e-9, "{c:?}");
        // A quiet line does not write the flag; an old line reads as quiet.
        let text = std::fs::read_to_string(dir.path().join(FILE_NAME)).expect("read");
        assert_eq!(text.matches("\"disturbed\":true").count(), 1, "{text}");
        assert_eq!(text.matches("disturbed").count(), 1, "{text}");
    }

    #[test]
    fn other_work_is_counted_over_a_long_enough_window() {
        let Some(w) = OtherWork::start() else {
            return; // not Linux
        };
        assert_eq!(w.cores(), None, "too short to tell");
        // This process busy for 0.3 s: its own time is not counted.
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed().as_secs_f64() < 0.3 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let c = w.cores().expect("a long enough window");
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        assert!((0.0..=cores).contains(&c), "{c}");
    }
}
