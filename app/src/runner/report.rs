//! What one generation did against what its plan promised: the `run --json`
//! object (also what `chat` records), and the calibration log entry that
//! later plans on this machine read.

use headroom_planner::plan::Plan;
use serde::Serialize;

use super::{Engine, Generation, StopReason, calibration, measure};

/// Layout version of `run --json`.
pub const RUN_SCHEMA_VERSION: u32 = 1;

/// The `run --json` object.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Layout version.
    pub schema_version: u32,
    /// headroom's version.
    pub headroom_version: String,
    /// The generated text (a thinking model's answer without its
    /// reasoning).
    pub text: String,
    /// A thinking model's reasoning (`<think>` or gpt-oss's analysis
    /// channel), when its template thinks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Prompt tokens.
    pub tokens_prompt: usize,
    /// Generated tokens.
    pub tokens_generated: usize,
    /// Prompt processing speed.
    pub prompt_tokens_per_s: f64,
    /// Generation speed.
    pub decode_tokens_per_s: f64,
    /// Model load time.
    pub load_ms: f64,
    /// Peak resident set size of the process (`VmHWM`, see `measure::peak_rss_bytes`).
    pub peak_rss_bytes: u64,
    /// What the plan predicted.
    pub planned: Planned,
    /// What was measured besides the peak.
    pub measured: Measured,
    /// Why generation ended.
    pub stop_reason: StopReason,
    /// CPU threads the run used (for the calibration log).
    #[serde(skip)]
    pub threads: u32,
}

/// The plan's prediction, in `run --json`.
#[derive(Debug, Serialize)]
pub struct Planned {
    /// The plan's `ram.peak_bytes`.
    pub ram_peak_bytes: u64,
    /// Per device, as in `plan --json`.
    pub devices: Vec<headroom_planner::plan::DeviceUse>,
    /// Predicted decode speed.
    pub decode_tokens_per_s: f64,
    /// Predicted prompt speed.
    pub prompt_tokens_per_s: f64,
    /// Context size.
    pub n_ctx: u32,
    /// GPU layers.
    pub n_gpu_layers: u32,
    /// The verdict.
    pub verdict: headroom_planner::plan::Verdict,
    /// What the speed estimates assume (as `plan --json`'s `speed_basis`).
    pub speed_basis: headroom_planner::speed::SpeedBasis,
}

/// Measurements, in `run --json`.
#[derive(Debug, Serialize)]
pub struct Measured {
    /// Resident set right after the load.
    pub rss_after_load_bytes: u64,
    /// GPU memory in use per GPU after the run (device-wide); empty without one.
    pub vram_used_bytes: Vec<u64>,
    /// Cores other processes used while this run decoded (`null` where not
    /// known); from [`calibration::DISTURBED_CORES`] on, the run was
    /// disturbed and does not calibrate later estimates.
    pub other_cpu_cores: Option<f64>,
    /// What llama.cpp's accounting of this load puts on each device (its
    /// weights, KV cache and compute buffers), beside the plan's figure for
    /// the same buffers: for an RPC worker, what the worker holds for it.
    pub llama_devices: Vec<LlamaDevice>,
}

/// One device in [`Measured::llama_devices`].
#[derive(Debug, Serialize)]
pub struct LlamaDevice {
    /// The plan's name for it (`CPU`, `CUDA0`, `RPC0[HOST:PORT]`).
    pub name: String,
    /// llama.cpp's bytes.
    pub llama_bytes: u64,
    /// The plan's bytes for the same buffers.
    pub planned_bytes: u64,
}

impl Report {
    /// Assemble the report.
    #[must_use]
    pub fn new(
        plan: &Plan,
        engine: &Engine,
        g: &Generation,
        rss_after_load: u64,
        peak: u64,
    ) -> Self {
        Report {
            schema_version: RUN_SCHEMA_VERSION,
            headroom_version: env!("CARGO_PKG_VERSION").to_string(),
            text: g.text.clone(),
            reasoning: None,
            tokens_prompt: g.tokens_prompt,
            tokens_generated: g.tokens_generated,
            prompt_tokens_per_s: round2(g.prompt_tokens_per_s()),
            decode_tokens_per_s: round2(g.decode_tokens_per_s()),
            load_ms: round2(engine.load_time.as_secs_f64() * 1e3),
            peak_rss_bytes: peak,
            planned: Planned {
                ram_peak_bytes: plan.ram.peak_bytes,
                devices: plan.devices.clone(),
                decode_tokens_per_s: plan.est_decode_tokens_per_s,
                prompt_tokens_per_s: plan.est_prompt_tokens_per_s,
                n_ctx: plan.n_ctx,
                n_gpu_layers: plan.n_gpu_layers,
                verdict: plan.verdict,
                speed_basis: plan.speed_basis.clone(),
            },
            measured: Measured {
                rss_after_load_bytes: rss_after_load,
                vram_used_bytes: measure::vram_used_bytes(),
                other_cpu_cores: g.other_cpu_cores,
                llama_devices: Vec::new(),
            },
            stop_reason: g.stop_reason,
            threads: u32::try_from(engine.spec().n_threads).unwrap_or(0),
        }
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Append this run to the calibration log; a failure is only a warning.
pub fn record(plan: &Plan, r: &Report) {
    let basis = &plan.speed_basis;
    // The speed model's own estimates: a calibrated plan's CPU-only
    // estimate is the model's times the factor, exactly.
    let uncalibrated = |est: f64, factor: Option<f64>| est / factor.unwrap_or(1.0);
    let entry = calibration::Entry {
        unix_time: calibration::now(),
        headroom_version: r.headroom_version.clone(),
        key: calibration::key(plan),
        model: plan.model.path.clone(),
        planned_peak_bytes: plan.ram.peak_bytes,
        measured_peak_bytes: r.peak_rss_bytes,
        rss_after_load_bytes: r.measured.rss_after_load_bytes,
        planned_decode_tokens_per_s: plan.est_decode_tokens_per_s,
        measured_decode_tokens_per_s: r.decode_tokens_per_s,
        planned_prompt_tokens_per_s: plan.est_prompt_tokens_per_s,
        measured_prompt_tokens_per_s: r.prompt_tokens_per_s,
        machine: calibration::this_machine(),
        threads: r.threads,
        speed_model: headroom_planner::speed::SPEED_MODEL_VERSION,
        cpu_only: basis.gpus.iter().all(|g| g.bytes_per_token == 0),
        tokens_prompt: r.tokens_prompt as u64,
        tokens_generated: r.tokens_generated as u64,
        model_decode_tokens_per_s: uncalibrated(
            plan.est_decode_tokens_per_s,
            basis.ram.calibration_decode_factor,
        ),
        model_prompt_tokens_per_s: uncalibrated(
            plan.est_prompt_tokens_per_s,
            basis.ram.calibration_prompt_factor,
        ),
        other_cpu_cores: r.measured.other_cpu_cores,
        disturbed: calibration::disturbed(r.measured.other_cpu_cores),
    };
    if let Err(e) = crate::files::data_dir().and_then(|d| calibration::append(&d, &entry)) {
        tracing::warn!("calibration log not written: {e:#}");
    }
}
