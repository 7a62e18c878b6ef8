//! The speed model: decode is bounded by the bytes each device reads per
//! token over its memory bandwidth (devices work in series, one layer after
//! another); prompt processing by the arithmetic each device does.
//!
//! Published partial-offload sweeps are matched by the series model
//! t(token) = Σ_device bytes_read / bandwidth; on a small CPU the matrix-vector
//! arithmetic can bind before memory does, so each device's time is the larger
//! of its memory time and its compute time.
//!
//! Every plan carries its [`SpeedBasis`]: the bandwidth each device was
//! given, where that figure came from (measured, looked up, assumed…) and
//! the bytes each reads per token, so an estimate can be checked and its
//! weakest assumption named.

use serde::{Deserialize, Serialize};

use crate::hw::{BandwidthSource, HardwareSnapshot, Host};

/// Version of the speed model's formulas and constants. The calibration log
/// records it with each run, and only runs estimated by this version
/// calibrate later estimates: a ratio to an older model's estimate says
/// nothing about this one's. (4: the CPU's per-layer cost follows this
/// machine's measured barrier time; 5: 17.5 ns per vocabulary entry, was 5;
/// 6: the CPU's per-layer and per-vocabulary costs followed the RAM
/// bandwidth, never landed; 7: weights the CPU reads unrepacked are priced
/// at [`CPU_DECODE_FLOPS_PER_CORE_PLAIN`], fixed costs 64 µs per layer and
/// 13.4 ns per vocabulary entry on every machine, no barrier time.)
pub const SPEED_MODEL_VERSION: u32 = 7;

/// Calibration factors are clamped to this range: a run that measured more
/// than 4× off its estimate is a machine that was busy, asleep or
/// misdetected, not a property of its CPU.
pub const CALIBRATION_RANGE: (f64, f64) = (0.25, 4.0);

/// What earlier runs on this machine measured against this speed model's
/// estimates: measured ÷ estimated tokens/s, the median of recent runs, for
/// the CPU's side of decode and of prompt processing. Plain data: the app
/// reads its calibration log and hands this to the planner with the
/// machine ([`crate::hw::RamInfo::speed_calibration`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SpeedCalibration {
    /// Runs the factors were taken from.
    pub runs: u32,
    /// Measured ÷ estimated decode speed.
    pub decode_factor: f64,
    /// Measured ÷ estimated prompt speed.
    pub prompt_factor: f64,
}

impl SpeedCalibration {
    /// A factor as the planner uses it: within [`CALIBRATION_RANGE`], and 1
    /// (no change) when it is not a finite positive number.
    #[must_use]
    pub fn clamp(factor: f64) -> f64 {
        if factor.is_finite() && factor > 0.0 {
            factor.clamp(CALIBRATION_RANGE.0, CALIBRATION_RANGE.1)
        } else {
            1.0
        }
    }
}

/// What one device can sustain.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Throughput {
    /// Memory bandwidth the decode loop achieves, bytes/s.
    pub bandwidth: f64,
    /// Sustained arithmetic for quantized matrix products, FLOP/s.
    pub flops: f64,
    /// The same over weights read in their file layout, where a CPU's
    /// repacked kernels do not apply ([`CPU_DECODE_FLOPS_PER_CORE_PLAIN`]);
    /// `flops` on a GPU.
    pub flops_plain: f64,
    /// Fixed cost per layer per token (thread barriers, kernel launches), seconds.
    pub per_layer_s: f64,
    /// Cost per vocabulary entry per generated token, seconds: sampling,
    /// which runs on the CPU whichever device computed the logits (0 for a GPU).
    pub per_vocab_s: f64,
}

impl Throughput {
    /// This device `factor` times faster (or slower, below 1) than modelled:
    /// rates multiplied, fixed costs divided, so every time it spends on a
    /// token is divided by `factor` (clamped by [`SpeedCalibration::clamp`]).
    #[must_use]
    pub fn calibrated(self, factor: f64) -> Self {
        let f = SpeedCalibration::clamp(factor);
        Throughput {
            bandwidth: self.bandwidth * f,
            flops: self.flops * f,
            flops_plain: self.flops_plain * f,
            per_layer_s: self.per_layer_s / f,
            per_vocab_s: self.per_vocab_s / f,
        }
    }
}

/// Fraction of the measured stream bandwidth (all cores reading one large
/// buffer, [`crate::hw::bandwidth`]) llama.cpp's CPU decode reaches. Measured
/// on this project's 2-core AMD EPYC (Zen 3) VM at 2 threads, `headroom run
/// -n 64 --temp 0` on a quiet machine: a Gemma-3-4B-shaped Q4_K_M decodes
/// its 2.5 GB per token at 11–12 GB/s where the stream reads 13–14 GB/s
/// (0.8–0.9; the larger models, whose time is almost all reading, set it).
pub const CPU_BANDWIDTH_EFFICIENCY: f64 = 0.8;
/// A CPU decode step's fixed cost per layer (about thirty graph nodes,
/// each ending at a spinning thread barrier, and their small operations),
/// beside the weights it reads or computes over.
///
/// It was 0.12 ms, fitted in slow spells of the shared 2-core test VM,
/// then 1000 rounds of a spinning barrier the probe timed (speed models 4
/// and 5); both put the demo models' first-run estimates 20–30% low in its
/// fast spells (the landing CI's soak check failed at −30%, 2026-12-05): a
/// bare barrier's time did not follow what a decode's nodes cost, and it
/// varied ±30% between probes where the decode did not. Making the fixed
/// costs follow the stream bandwidth instead (speed model 6, not landed)
/// centred those runs but failed the next CI run at +80%: its bandwidth
/// probes read 49 GB/s where others read 27–35, while the instruct demo
/// decoded at 113 tok/s as at 27 GB/s. A small model's decode does not
/// follow the bandwidth: its products are small and in slow kernels
/// ([`CPU_DECODE_FLOPS_PER_CORE_PLAIN`]).
///
/// Fitted with [`CPU_VOCAB_S`] by least squares, at that rate, to 54 first
/// runs of the demo models (SmolLM2-135M-Instruct Q4_1: 30 layers, 49,152
/// entries, 120.2 MB read per token, none repacked; Gemma-3-270M Q4_K_M:
/// 18 layers, 262,144 entries, 250.2 MB, 5% repacked), `headroom run MODEL
/// --json -p "Explain how a fridge works." -n 32 --ignore-eos --temp 0`,
/// each on a fresh cache (the bandwidth measured anew) and undisturbed, in
/// four spells weighted alike: (a) 42 runs on the test VM, 2026-12-05
/// 06:50–07:10 UTC, SmolLM2 at 115–146 tok/s; (b) the last stop's landing
/// CI, 141–146; (c) a CI run here at 08:07, 113–120 with the bandwidth
/// probe at 27–49 GB/s; (d) 08:17, 107–112. Fitted 63.6 µs and 13.4 ns;
/// with 64 µs the medians per spell are −6% and −8% (a; Gemma second),
/// −13% (b), +10% (c), +12% and +8% (d), the worst −14% and +17%; speed
/// model 5 gave −21%, −19%, −30% there, and speed model 6 +80% in (c). The
/// runs are in `scripts/speed-fit/runs-2026-12-05.txt` (`collect.sh` takes
/// more; `fit.py` fits them and prints these errors). A spell moves the
/// CPU's speed ±15% here and no probe follows it: measured at 2 threads on
/// one VM, used for every machine; a machine's own runs calibrate it.
pub const CPU_PER_LAYER_S: f64 = 64e-6;
/// The CPU's cost per vocabulary entry per generated token beyond the
/// output matrix's bytes and products: the logits row written and read
/// back, the sampler's scan. Fitted with [`CPU_PER_LAYER_S`] (13.4 ns). It
/// was 17.5 ns, fitted beside a per-layer cost that did not follow the
/// VM's spell, and 5 ns before that.
pub const CPU_VOCAB_S: f64 = 13.4e-9;

/// Per-layer fixed cost on a GPU (kernel launches, mostly hidden by CUDA graphs).
pub const GPU_PER_LAYER_S: f64 = 0.02e-3;
/// Fraction of a GPU's peak bandwidth llama.cpp's CUDA decode reaches.
pub const GPU_BANDWIDTH_EFFICIENCY: f64 = 0.75;
/// Sustained quantized dot-product arithmetic per CPU core with AVX2 or NEON
/// dot-product instructions, FLOP/s (decode, matrix-vector), over weights
/// llama.cpp repacked for this CPU (`CPU_REPACK`: Q4_0, Q4_K, IQ4_NL on
/// AVX2): 1024- to 3072-wide Q4_K_M layers of synthetic files decoded at
/// 29.8–31.7 GB/s on the test VM where the stream read 32.9–34.0, so their
/// arithmetic does not bind there.
pub const CPU_DECODE_FLOPS_PER_CORE: f64 = 80.0e9;
/// The same over weights the CPU reads in their file layout (Q4_1, Q5_0,
/// Q8_0, Q6_K…, not repacked): 25 GFLOP/s per core, fitted with
/// [`CPU_PER_LAYER_S`] (the demo models' weights are almost all such).
/// ggml's CPU products alone, timed at 2 threads on the same VM over
/// 640-wide matrices of zeros (a throwaway probe, 2026-12-05), reached 21–26
/// per core in Q4_1, Q5_0 and Q8_0 (14–26 GB/s where the stream read
/// 33–34), and 27–39 over 2048-wide ones: a small model's decode on a small
/// CPU is bound by arithmetic, not bandwidth.
pub const CPU_DECODE_FLOPS_PER_CORE_PLAIN: f64 = 25.0e9;
/// Without those instructions.
pub const CPU_DECODE_FLOPS_PER_CORE_SCALAR: f64 = 12.0e9;
/// Prompt processing (matrix-matrix, two FLOPs per active parameter per
/// token, output layer included) sustains this fraction of
/// [`CPU_DECODE_FLOPS_PER_CORE`]: measured at 2 threads on the same VM (AVX2,
/// no VNNI), 59 GFLOP/s per core for a Gemma-3-4B-shaped Q4_K_M (177-token
/// prompt, 14.4 tok/s) and for Gemma-3-270M (28 tokens, 221 tok/s). It was
/// 2.2, which put those prompts at 3–4 times their speed.
pub const CPU_PROMPT_FACTOR: f64 = 0.75;
/// Arithmetic a GPU sustains per byte/s of bandwidth in llama.cpp's prompt kernels,
/// when its FP16 throughput is unknown: recent NVIDIA parts reach 100–300 FLOP per
/// byte at peak; llama.cpp about a third.
pub const GPU_FLOPS_PER_BYTE: f64 = 60.0;
/// Fraction of a GPU's peak dense FP16 throughput (the GPU table's figure)
/// llama.cpp's prompt processing reaches: published pp512 results of 7B Q4_0
/// models come to 0.4–0.6 of it on NVIDIA (integer matrix kernels), AMD and
/// Apple GPUs alike.
pub const GPU_FP16_EFFICIENCY: f64 = 0.5;

/// The throughput of `hw`'s CPU ([`cpu_throughput`] at its physical cores,
/// the plain rate when it is this machine's), before calibration.
#[must_use]
pub fn cpu_of(hw: &HardwareSnapshot) -> Throughput {
    cpu_throughput(
        hw.ram.bandwidth_bytes_per_s,
        hw.cpu.physical_cores.max(1),
        &hw.cpu.features,
        hw.host == Host::ThisMachine,
    )
}

/// The calibration of `hw`'s CPU, when it has one and the CPU is this
/// machine's: factors learnt from runs here say nothing of another CPU.
#[must_use]
pub fn calibration_of(hw: &HardwareSnapshot) -> Option<SpeedCalibration> {
    hw.ram
        .speed_calibration
        .filter(|c| c.runs > 0 && hw.host == Host::ThisMachine)
}

/// The CPU's throughput from its RAM's stream bandwidth, its cores and
/// features. [`CPU_DECODE_FLOPS_PER_CORE_PLAIN`] prices the weights read
/// unrepacked on `this_machine`'s CPU only, where it was measured (x86-64
/// with AVX2) and where runs calibrate it; another machine's CPU (a
/// profile's, a named part's, the typical desktop's, an RPC worker's) gets
/// [`CPU_DECODE_FLOPS_PER_CORE`] for all its weights, as before: no
/// measurement says what its kernels do over them.
#[must_use]
pub fn cpu_throughput(
    bandwidth: f64,
    threads: u32,
    features: &[String],
    this_machine: bool,
) -> Throughput {
    let fast = features
        .iter()
        .any(|f| f == "avx2" || f == "dotprod" || f == "neon");
    let per_core = if fast {
        CPU_DECODE_FLOPS_PER_CORE
    } else {
        CPU_DECODE_FLOPS_PER_CORE_SCALAR
    };
    let plain = if fast && this_machine {
        CPU_DECODE_FLOPS_PER_CORE_PLAIN
    } else {
        per_core
    };
    let threads = f64::from(threads.max(1));
    Throughput {
        bandwidth: bandwidth * CPU_BANDWIDTH_EFFICIENCY,
        flops: per_core * threads,
        flops_plain: plain * threads,
        per_layer_s: CPU_PER_LAYER_S,
        per_vocab_s: CPU_VOCAB_S,
    }
}

/// A GPU's throughput from its peak bandwidth and, when known, its peak
/// dense FP16 throughput.
#[must_use]
pub fn gpu_throughput(bandwidth: f64, fp16_flops: Option<f64>) -> Throughput {
    let flops = fp16_flops.map_or(bandwidth * GPU_FLOPS_PER_BYTE, |f| f * GPU_FP16_EFFICIENCY);
    Throughput {
        bandwidth: bandwidth * GPU_BANDWIDTH_EFFICIENCY,
        flops,
        flops_plain: flops,
        per_layer_s: GPU_PER_LAYER_S,
        per_vocab_s: 0.0,
    }
}

/// Graph nodes a decode step runs per layer on a GPU backend, each paying
/// the fixed cost a device's probe measured
/// ([`crate::hw::MeasuredSpeed::per_node_ns`]). Counted from llama.cpp's
/// graph of a llama-type layer with flash attention: norm and scale (2),
/// Q, K, V products (3), two ropes, two cache writes, the attention, the
/// output product and its residual add (7), norm and scale (2), gate and
/// up products (2), the gated activation (1), the down product and its
/// residual add (2): 19, and 20 with the views ggml-vulkan does not skip.
pub const GPU_NODES_PER_LAYER: f64 = 20.0;

/// A device's throughput as its own probe measured it: the bandwidth is
/// what llama.cpp's matrix-vector kernel reached there (no efficiency
/// factor), and each layer pays [`GPU_NODES_PER_LAYER`] nodes' fixed cost.
/// Prompt arithmetic is not measured: [`GPU_FLOPS_PER_BYTE`] of the
/// measured bandwidth, as for any GPU whose FP16 rate is unknown.
#[must_use]
pub fn measured_throughput(m: &crate::hw::MeasuredSpeed) -> Throughput {
    let bandwidth = m.bandwidth_bytes_per_s as f64;
    let flops = bandwidth * GPU_FLOPS_PER_BYTE;
    Throughput {
        bandwidth,
        flops,
        flops_plain: flops,
        per_layer_s: m.per_node_ns as f64 * 1e-9 * GPU_NODES_PER_LAYER,
        per_vocab_s: 0.0,
    }
}

/// What a plan's speed estimate assumes (`speed_basis` in `plan --json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpeedBasis {
    /// The CPU's side: system RAM.
    pub ram: RamBasis,
    /// Each GPU the plan uses, in device order (as `devices[1..]`).
    pub gpus: Vec<GpuBasis>,
    /// The network, when RPC workers hold part of the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkBasis>,
}

/// A link to RPC workers whose speed was not stated (`--rpc-bandwidth`):
/// gigabit Ethernet, 125 MB/s.
pub const DEFAULT_RPC_LINK_BYTES_PER_S: f64 = 125e6;

/// The network's part of a [`SpeedBasis`]: what crosses the link to the RPC
/// workers per token. Each boundary between devices where a worker sits
/// sends one token's hidden state (`n_embd` f32); a worker holding the
/// output layer sends the logits back (`n_vocab` f32 per generated token).
/// Only the transfer is counted, not the round trips of llama.cpp's RPC
/// commands (a few per device and token; not measured here).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetworkBasis {
    /// The link's speed, bytes/s.
    pub link_bytes_per_s: f64,
    /// Whether the user stated it (`given`) or it is [`DEFAULT_RPC_LINK_BYTES_PER_S`] (`assumed`).
    pub source: LinkSource,
    /// Device boundaries with a worker on one side that a token crosses.
    pub boundaries: u32,
    /// Bytes over the link per generated token.
    pub bytes_per_token: u64,
    /// Bytes over the link per prompt token (no logits).
    pub prompt_bytes_per_token: u64,
}

/// Where a link speed came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkSource {
    /// `--rpc-bandwidth`.
    Given,
    /// [`DEFAULT_RPC_LINK_BYTES_PER_S`].
    Assumed,
}

/// Tokens/s once each token also spends `network_s` on the link.
#[must_use]
pub fn with_network(tokens_per_s: f64, network_s: f64) -> f64 {
    if tokens_per_s > 0.0 && network_s.is_finite() && network_s >= 0.0 {
        per_second(1.0 / tokens_per_s + network_s)
    } else {
        tokens_per_s
    }
}

/// The RAM's (and the CPU's) part of a [`SpeedBasis`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RamBasis {
    /// Bandwidth the estimate starts from (peak stream bandwidth, before
    /// [`CPU_BANDWIDTH_EFFICIENCY`]), bytes/s.
    pub bandwidth_bytes_per_s: f64,
    /// Where that figure came from.
    pub source: RamBandwidthSource,
    /// Whose CPU and RAM: this machine's, a profile's, a named part's or an
    /// assumed typical desktop's.
    pub host: Host,
    /// CPU threads the estimate assumes (the host's physical cores).
    pub threads: u32,
    /// The CPU's fixed cost per layer per token, seconds, before
    /// calibration ([`CPU_PER_LAYER_S`]).
    pub per_layer_s: f64,
    /// The CPU's cost per vocabulary entry per token, seconds, before
    /// calibration ([`CPU_VOCAB_S`]).
    pub per_vocab_s: f64,
    /// Arithmetic the CPU sustains over weights it repacked, and over
    /// weights read in their file layout, FLOP/s, before calibration
    /// ([`CPU_DECODE_FLOPS_PER_CORE`], [`CPU_DECODE_FLOPS_PER_CORE_PLAIN`]).
    pub flops_per_s: f64,
    /// See `flops_per_s`.
    pub flops_plain_per_s: f64,
    /// Runs of this machine the estimate was calibrated from, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration_runs: Option<u32>,
    /// When calibrated: measured ÷ estimated decode speed of those runs
    /// (the CPU's time per token is divided by it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration_decode_factor: Option<f64>,
    /// When calibrated: measured ÷ estimated prompt speed of those runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration_prompt_factor: Option<f64>,
    /// Bytes the CPU reads per generated token (weights in RAM, and the KV
    /// cache there of a conversation's first 1024 tokens).
    pub bytes_per_token: u64,
}

impl RamBasis {
    /// The basis of `hw`'s CPU side: its RAM bandwidth and where it came
    /// from, whose machine it is, its threads and per-layer cost, and the
    /// calibration `cal` (see [`calibration_of`]).
    #[must_use]
    pub fn of(hw: &HardwareSnapshot, cal: Option<SpeedCalibration>, bytes_per_token: u64) -> Self {
        let t = cpu_of(hw);
        RamBasis {
            bandwidth_bytes_per_s: hw.ram.bandwidth_bytes_per_s,
            source: RamBandwidthSource::of(hw, cal.is_some()),
            host: hw.host,
            threads: hw.cpu.physical_cores.max(1),
            per_layer_s: t.per_layer_s,
            per_vocab_s: t.per_vocab_s,
            flops_per_s: t.flops,
            flops_plain_per_s: t.flops_plain,
            calibration_runs: cal.map(|c| c.runs),
            calibration_decode_factor: cal.map(|c| SpeedCalibration::clamp(c.decode_factor)),
            calibration_prompt_factor: cal.map(|c| SpeedCalibration::clamp(c.prompt_factor)),
            bytes_per_token,
        }
    }
}

/// Where the RAM bandwidth figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RamBandwidthSource {
    /// Measured on this machine (now or earlier, from the cache).
    Measured,
    /// Measured here, then scaled by what earlier runs on this machine
    /// measured against their estimates.
    Calibrated,
    /// Stated in a hardware profile (`--hw`).
    Stated,
    /// A named unified part's memory bandwidth, from the GPU table.
    LookedUp,
    /// Assumed for the typical desktop that named discrete cards imply:
    /// [`crate::hw::TYPICAL_DESKTOP_RAM_BANDWIDTH_BYTES_PER_S`].
    TypicalDesktop,
    /// None of those: [`crate::hw::DEFAULT_RAM_BANDWIDTH_BYTES_PER_S`].
    Default,
}

impl RamBandwidthSource {
    /// Where `hw`'s RAM bandwidth came from, `calibrated` when this
    /// machine's calibration applies.
    #[must_use]
    pub fn of(hw: &HardwareSnapshot, calibrated: bool) -> Self {
        match hw.host {
            Host::NamedPart => Self::LookedUp,
            Host::TypicalDesktop => Self::TypicalDesktop,
            Host::ThisMachine if calibrated => Self::Calibrated,
            Host::ThisMachine if hw.ram.bandwidth_measured => Self::Measured,
            Host::Profile if hw.ram.bandwidth_measured => Self::Stated,
            Host::ThisMachine | Host::Profile => Self::Default,
        }
    }

    /// In words, for text output.
    #[must_use]
    pub fn as_words(self) -> &'static str {
        match self {
            Self::Measured => "measured",
            Self::Calibrated => "calibrated",
            Self::Stated => "stated in the profile",
            Self::LookedUp => "looked up by name",
            Self::TypicalDesktop => "assumed: a typical desktop",
            Self::Default => "default",
        }
    }
}

/// One GPU's part of a [`SpeedBasis`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuBasis {
    /// The device's name, as in the plan's `devices`.
    pub name: String,
    /// Its kind, as in the plan's `devices` (`gpu`, `unified`, `rpc`).
    pub kind: crate::plan::DeviceKind,
    /// Peak bandwidth the estimate starts from (before
    /// [`GPU_BANDWIDTH_EFFICIENCY`]), bytes/s.
    pub bandwidth_bytes_per_s: f64,
    /// Where that figure came from: reported by the driver or a profile,
    /// looked up in the GPU table by name, or assumed.
    pub source: BandwidthSource,
    /// Peak dense FP16 throughput the prompt estimate uses, when known.
    pub fp16_flops_per_s: Option<f64>,
    /// Bytes this GPU reads per generated token (its weights and its share
    /// of the KV cache of a conversation's first 1024 tokens).
    pub bytes_per_token: u64,
    /// Repeating layers on this GPU.
    pub n_layers: u32,
    /// What the device's own probe measured, when its speed was measured
    /// (`source` is then `measured`): the estimate's bandwidth, arithmetic
    /// and per-layer cost come from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured: Option<crate::hw::MeasuredSpeed>,
}

/// Decode tokens/s when device `i` reads `bytes[i]` per token (weights plus
/// KV) holding `params[i]` active parameters in `layers[i]` layers, of them
/// `plain[i]` in weights read in their file layout (not repacked; missing
/// entries are 0). Zero when nothing is read.
#[must_use]
pub fn decode_tokens_per_s(
    bytes: &[u64],
    params: &[u64],
    plain: &[u64],
    layers: &[u32],
    devices: &[Throughput],
    n_vocab: u64,
) -> f64 {
    if bytes.iter().all(|&b| b == 0) {
        return 0.0;
    }
    let mut t = 0.0;
    for (i, (((b, p), l), d)) in bytes
        .iter()
        .zip(params)
        .zip(layers)
        .zip(devices)
        .enumerate()
    {
        t += n_vocab as f64 * d.per_vocab_s;
        if *b == 0 {
            continue;
        }
        let mem = *b as f64 / d.bandwidth.max(1.0);
        let slow = plain.get(i).copied().unwrap_or(0).min(*p);
        let math = 2.0 * (*p - slow) as f64 / d.flops.max(1.0)
            + 2.0 * slow as f64 / d.flops_plain.max(1.0);
        t += mem.max(math) + f64::from(*l) * d.per_layer_s;
    }
    per_second(t)
}

/// Prompt tokens/s: two FLOPs per active parameter per token, devices in series;
/// the CPU does matrix-matrix work `CPU_PROMPT_FACTOR` times faster than matrix-vector.
#[must_use]
pub fn prompt_tokens_per_s(params: &[u64], devices: &[Throughput], cpu_index: usize) -> f64 {
    let mut t = 0.0;
    for (i, (p, d)) in params.iter().zip(devices).enumerate() {
        let flops = if i == cpu_index {
            d.flops * CPU_PROMPT_FACTOR
        } else {
            d.flops
        };
        t += 2.0 * *p as f64 / flops.max(1.0);
    }
    per_second(t)
}

/// Tokens per second from seconds per token: always finite, as the plan's
/// JSON needs (`serde_json` writes NaN and infinity as `null`). No time, or a
/// time so short that its inverse overflows (a hostile bandwidth in a
/// hardware profile), gives 0: no estimate.
fn per_second(t: f64) -> f64 {
    let r = 1.0 / t;
    if t > 0.0 && r.is_finite() { r } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_model_adds_device_times() {
        let cpu = Throughput {
            bandwidth: 50e9,
            flops: 1e15,
            flops_plain: 1e15,
            per_layer_s: 0.0,
            per_vocab_s: 0.0,
        };
        let gpu = Throughput {
            bandwidth: 1000e9,
            flops: 1e15,
            flops_plain: 1e15,
            per_layer_s: 0.0,
            per_vocab_s: 0.0,
        };
        // 1 GB on the GPU and 1 GB on the CPU: 1 ms + 20 ms.
        let tps = decode_tokens_per_s(
            &[1_000_000_000, 1_000_000_000],
            &[1, 1],
            &[],
            &[1, 1],
            &[cpu, gpu],
            0,
        );
        assert!((tps - 1.0 / 0.021).abs() < 1e-6, "{tps}");
    }

    #[test]
    fn compute_bound_cpu_is_slower_than_its_bandwidth() {
        let cpu = Throughput {
            bandwidth: 100e9,
            flops: 10e9,
            flops_plain: 10e9,
            per_layer_s: 0.0,
            per_vocab_s: 0.0,
        };
        // 100 MB read, 500 M params: memory 1 ms, math 100 ms.
        let tps = decode_tokens_per_s(&[100_000_000], &[500_000_000], &[], &[1], &[cpu], 0);
        assert!((tps - 10.0).abs() < 1e-9);
    }

    #[test]
    fn speeds_stay_finite_at_the_extremes() {
        let fastest = Throughput {
            bandwidth: f64::MAX,
            flops: f64::MAX,
            flops_plain: f64::MAX,
            per_layer_s: 0.0,
            per_vocab_s: 0.0,
        };
        let broken = Throughput {
            bandwidth: f64::NAN,
            flops: f64::NAN,
            flops_plain: f64::NAN,
            per_layer_s: 0.0,
            per_vocab_s: 0.0,
        };
        for d in [
            fastest,
            broken,
            gpu_throughput(1e12, None),
            gpu_throughput(1e12, Some(1e14)),
        ] {
            for b in [1, u64::MAX] {
                let decode = decode_tokens_per_s(&[b], &[b], &[b], &[u32::MAX], &[d], u64::MAX);
                let prompt = prompt_tokens_per_s(&[b], &[d], 0);
                assert!(decode.is_finite() && decode >= 0.0, "{d:?} {b}: {decode}");
                assert!(prompt.is_finite() && prompt >= 0.0, "{d:?} {b}: {prompt}");
            }
        }
        // One byte at the largest bandwidth: 1/t overflows, so no estimate.
        assert_eq!(
            decode_tokens_per_s(&[1], &[0], &[0], &[0], &[fastest], 0),
            0.0
        );
    }

    #[test]
    fn nothing_read_is_zero_speed() {
        assert_eq!(
            decode_tokens_per_s(&[0], &[0], &[0], &[0], &[gpu_throughput(1e12, None)], 0),
            0.0
        );
    }

    #[test]
    fn a_known_fp16_rate_sets_the_prompt_arithmetic() {
        // Without it, arithmetic follows bandwidth; with it, half the peak.
        assert_eq!(gpu_throughput(1e12, None).flops, 1e12 * GPU_FLOPS_PER_BYTE);
        assert_eq!(gpu_throughput(1e12, Some(3e14)).flops, 1.5e14);
        // Bandwidth alone decides decode.
        assert_eq!(
            gpu_throughput(1e12, None).bandwidth,
            gpu_throughput(1e12, Some(3e14)).bandwidth
        );
    }

    #[test]
    fn per_layer_cost_adds_up() {
        let cpu = Throughput {
            bandwidth: 1e12,
            flops: 1e15,
            flops_plain: 1e15,
            per_layer_s: 1e-3,
            per_vocab_s: 0.0,
        };
        // 10 layers at 1 ms each dominate a 1 MB read.
        let tps = decode_tokens_per_s(&[1_000_000], &[1], &[], &[10], &[cpu], 0);
        assert!((tps - 1.0 / 0.010001).abs() < 1e-3, "{tps}");
    }

    #[test]
    fn weights_read_unrepacked_are_priced_at_the_plain_rate() {
        let cpu = cpu_throughput(30e9, 2, &["avx2".to_string()], true);
        assert_eq!(cpu.flops, 2.0 * CPU_DECODE_FLOPS_PER_CORE);
        assert_eq!(cpu.flops_plain, 2.0 * CPU_DECODE_FLOPS_PER_CORE_PLAIN);
        let (b, p) = (120_000_000, 135_000_000);
        let none = decode_tokens_per_s(&[b], &[p], &[0], &[0], &[cpu], 0);
        let all = decode_tokens_per_s(&[b], &[p], &[p], &[0], &[cpu], 0);
        // Repacked: 120 MB at 24 GB/s (5 ms) binds. Plain: 270 MFLOP at
        // 50 GFLOP/s (5.4 ms) does.
        assert!((1.0 / none - 5e-3).abs() < 1e-9, "{none}");
        assert!((1.0 / all - 5.4e-3).abs() < 1e-9, "{all}");
        // A plain count over the parameters is all of them; a missing one 0.
        assert_eq!(
            decode_tokens_per_s(&[b], &[p], &[u64::MAX], &[0], &[cpu], 0),
            all
        );
        assert_eq!(decode_tokens_per_s(&[b], &[p], &[], &[0], &[cpu], 0), none);
        // Without fast dot products both rates are the scalar one; on
        // another machine's CPU both are the repacked one.
        let scalar = cpu_throughput(30e9, 2, &[], true);
        assert_eq!(scalar.flops, scalar.flops_plain);
        let other = cpu_throughput(30e9, 2, &["avx2".to_string()], false);
        assert_eq!(other.flops_plain, other.flops);
        assert_eq!(other.flops, cpu.flops);
        let mut hw = crate::hw::parse_profile("", std::path::Path::new("p")).expect("default");
        hw.host = Host::ThisMachine;
        let basis = RamBasis::of(&hw, None, 7);
        assert_eq!(
            (basis.host, basis.threads, basis.bytes_per_token),
            (Host::ThisMachine, 8, 7)
        );
        assert_eq!(
            (basis.per_layer_s, basis.per_vocab_s),
            (CPU_PER_LAYER_S, CPU_VOCAB_S)
        );
    }
}
