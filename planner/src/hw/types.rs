//! The plain-data picture of a machine that the planner works against.
//!
//! Everything here is serialisable so a snapshot can be printed as JSON,
//! cached, or compared in tests; nothing here touches the live system, which is
//! what lets a hardware profile stand in for a real probe.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// RAM bandwidth assumed when it was neither measured nor cached: 20 GB/s is a
/// conservative figure for one or two channels of DDR4, so speed estimates err
/// towards "slower" on machines we know nothing about.
pub const DEFAULT_RAM_BANDWIDTH_BYTES_PER_S: f64 = 20e9;

/// Memory bandwidth assumed for a GPU of unknown model (`--vram` without
/// `--gpu`, or a detected GPU whose driver reports none and whose name the
/// GPU table does not know): the GeForce RTX 3060's 360 GB/s
/// ([`super::gpus::DEFAULT_GPU_CARD`]), a mid-range card's figure. Real
/// 8–12 GB cards have 270–450 GB/s; a flagship's 900+ would promise two to
/// three times the speed most people get. Plans say when they assume it.
pub const DEFAULT_GPU_BANDWIDTH_BYTES_PER_S: f64 = 360e9;

/// Everything the planner needs to know about a machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HardwareSnapshot {
    /// System memory and the limits the OS puts on this process.
    pub ram: RamInfo,
    /// The host CPU.
    pub cpu: CpuInfo,
    /// GPUs in the order llama.cpp will number them (after
    /// `CUDA_VISIBLE_DEVICES` and friends). On a unified-memory machine the
    /// integrated GPU is listed here too, with `total_bytes` equal to
    /// [`UnifiedMemory::gpu_limit_bytes`].
    pub gpus: Vec<GpuInfo>,
    /// `Some` when GPU and CPU share the same RAM (Apple Silicon, AMD APUs):
    /// every byte placed on the GPU is then also a byte of RAM gone.
    pub unified: Option<UnifiedMemory>,
    /// Where this snapshot came from.
    pub source: Source,
    /// What could not be read and why, in words a user can act on.
    pub notes: Vec<String>,
    /// The link to the RPC workers, bytes/s, as the user stated it
    /// (`--rpc-bandwidth`); `None`: [`crate::speed::DEFAULT_RPC_LINK_BYTES_PER_S`]
    /// is assumed.
    #[serde(default)]
    pub rpc_link_bytes_per_s: Option<f64>,
    /// Whose CPU and RAM bandwidth the snapshot describes: this machine's
    /// (probed, measured here, calibrated by its runs), a profile's, a named
    /// unified part's or an assumed typical desktop's. Only this machine's
    /// take the figures probed or calibrated here.
    #[serde(default)]
    pub host: Host,
}

/// Whose CPU and RAM a [`HardwareSnapshot`] describes: what its speed
/// figures (RAM bandwidth, cores, per-layer cost, calibration) rest on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Host {
    /// This machine, probed (`--ram`/`--vram` only resize its memory): its
    /// RAM bandwidth and per-layer cost measured here, its runs calibrate it.
    ThisMachine,
    /// A hardware profile's machine (`--hw`): its stated RAM bandwidth, else
    /// [`DEFAULT_RAM_BANDWIDTH_BYTES_PER_S`]; the per-layer cost is the
    /// speed model's default. Also what a snapshot that does not say is
    /// taken for: never this machine unless the probe said so.
    #[default]
    Profile,
    /// The machine of a unified part named with `--gpu` (Apple silicon,
    /// Strix Halo): the part's memory bandwidth (the GPU table's) and its
    /// CPU (cores from the table).
    NamedPart,
    /// Named discrete cards (`--gpu`) on no stated machine: an assumed
    /// typical desktop ([`TYPICAL_DESKTOP_RAM_BANDWIDTH_BYTES_PER_S`],
    /// [`TYPICAL_DESKTOP_CORES`] cores with AVX2).
    TypicalDesktop,
}

impl Host {
    /// In words, for text output.
    #[must_use]
    pub fn as_words(self) -> &'static str {
        match self {
            Self::ThisMachine => "this machine",
            Self::Profile => "the hardware profile",
            Self::NamedPart => "the named part",
            Self::TypicalDesktop => "a typical desktop (assumed)",
        }
    }
}

/// Memory transfers per second of the typical desktop assumed for named
/// discrete cards: DDR5-5600, the memory speed the current desktop CPUs are
/// rated for (AMD Ryzen 9000 "up to 5600 MT/s", Intel Core 14th generation
/// "up to DDR5 5600 MT/s", their product pages).
pub const TYPICAL_DESKTOP_MT_S: f64 = 5600e6;
/// Memory channels of that desktop: two 64-bit channels (two or four
/// DIMMs), every mainstream desktop socket's.
pub const TYPICAL_DESKTOP_CHANNELS: f64 = 2.0;
/// Fraction of the theoretical peak (channels × 8 bytes × transfers/s) that
/// headroom's stream test is taken to read on that desktop. A tuned read
/// benchmark reaches about 0.9 on dual-channel desktops (guru3d's AIDA64
/// memory reads: 46 GB/s of DDR4-3200's 51.2, 31 GB/s of DDR4-2133's 34.1);
/// a plain multi-threaded sum like headroom's, and the Infinity Fabric that
/// caps AMD desktop parts' reads, get less: 0.75 is assumed, not measured
/// on such a machine.
pub const TYPICAL_DESKTOP_STREAM_FRACTION: f64 = 0.75;
/// RAM bandwidth of the typical desktop assumed for named discrete cards:
/// 2 channels × 8 bytes × 5600 MT/s = 89.6 GB/s theoretical, × 0.75 = 67.2
/// GB/s (see the three constants above).
pub const TYPICAL_DESKTOP_RAM_BANDWIDTH_BYTES_PER_S: f64 =
    TYPICAL_DESKTOP_CHANNELS * 8.0 * TYPICAL_DESKTOP_MT_S * TYPICAL_DESKTOP_STREAM_FRACTION;
/// Cores of that desktop: 8 (a Ryzen 7 or Core i5/i7's performance cores),
/// x86-64 with AVX2, as headroom's default hardware profile
/// ([`super::DEFAULT_PROFILE_CORES`]).
pub const TYPICAL_DESKTOP_CORES: u32 = 8;

/// Where a [`HardwareSnapshot`] came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Source {
    /// Read from this machine by [`crate::hw::probe`].
    Probed,
    /// Loaded from a TOML hardware profile at this path.
    Profile(PathBuf),
    /// A probed or profiled snapshot with `--ram`/`--vram` overrides applied.
    Overridden,
}

/// System memory, and the limits that can make less of it usable than the
/// host has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RamInfo {
    /// Physical RAM of the host (not of the container).
    pub total_bytes: u64,
    /// Memory the host kernel could hand out now without swapping
    /// (`MemAvailable` on Linux).
    pub available_bytes: u64,
    /// Total swap space of the host.
    pub swap_total_bytes: u64,
    /// Unused swap space of the host.
    pub swap_free_bytes: u64,
    /// The memory cgroup limit that binds this process, if there is one.
    pub cgroup: Option<CgroupMemory>,
    /// `RLIMIT_AS` (address space) in bytes; `None` = unlimited.
    pub rlimit_as_bytes: Option<u64>,
    /// `RLIMIT_DATA` (data segment, which includes anonymous mmaps on Linux
    /// ≥ 4.7) in bytes; `None` = unlimited.
    pub rlimit_data_bytes: Option<u64>,
    /// Sustained read bandwidth of RAM, used to estimate token speed on CPU.
    pub bandwidth_bytes_per_s: f64,
    /// True when `bandwidth_bytes_per_s` was measured on this machine (now or
    /// earlier, from the cache) or stated in a profile, false when it is
    /// [`DEFAULT_RAM_BANDWIDTH_BYTES_PER_S`].
    pub bandwidth_measured: bool,
    /// What earlier runs on this machine measured against the speed model's
    /// estimates, when the caller knows (the app reads its calibration log;
    /// the probe and profiles never set it). CPU-side speed estimates are
    /// scaled by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_calibration: Option<crate::speed::SpeedCalibration>,
    /// Resident bytes this process gained when llama.cpp's backends were
    /// initialised, measured when the app read the backend registry on this
    /// machine (a Vulkan build loads the Vulkan loader and every installed
    /// driver, used or not). Plans count it in the CPU's overhead. `None`
    /// when not measured or for another machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_bytes: Option<u64>,
    /// The address space that start added (libraries, driver mappings),
    /// which `RLIMIT_AS` counts; measured with `runtime_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_virtual_bytes: Option<u64>,
}

/// A memory cgroup's limit and usage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupMemory {
    /// Cgroup version: 1 or 2.
    pub version: u8,
    /// The cgroup (path below the cgroup mount) whose limit binds: this
    /// process's own cgroup or the ancestor with the least headroom.
    pub path: String,
    /// Hard limit (`memory.max` / `memory.limit_in_bytes`); `None` = "max".
    pub limit_bytes: Option<u64>,
    /// Memory charged to the cgroup now, page cache included.
    pub usage_bytes: u64,
    /// Page cache the kernel can drop before it would OOM-kill:
    /// `inactive_file` from `memory.stat` (the same figure kubelet and
    /// `docker stats` subtract). `active_file` is left out on purpose: the
    /// kernel only reclaims it after demoting it, so counting it would
    /// promise memory that is not reliably there.
    pub reclaimable_bytes: u64,
}

impl CgroupMemory {
    /// Bytes this cgroup can still take before hitting its limit, counting
    /// reclaimable page cache as free; `None` when there is no limit.
    pub fn headroom_bytes(&self) -> Option<u64> {
        let limit = self.limit_bytes?;
        let in_use = self.usage_bytes.saturating_sub(self.reclaimable_bytes);
        Some(limit.saturating_sub(in_use))
    }
}

impl RamInfo {
    /// Bytes of RAM this process can reasonably allocate, the smallest of:
    ///
    /// - `available_bytes`: what the host kernel can give without swapping;
    /// - the cgroup's limit minus what the cgroup already holds that cannot
    ///   be reclaimed (`usage - reclaimable`), because going over it gets the
    ///   process OOM-killed even when the host has memory to spare;
    /// - `RLIMIT_AS` and `RLIMIT_DATA`, where allocations beyond them fail.
    ///   These bound the whole process, including what it has mapped already,
    ///   so they are an upper bound rather than headroom.
    ///
    /// All arithmetic saturates, so a cgroup already over its limit gives 0.
    pub fn budget_bytes(&self) -> u64 {
        let mut budget = self.available_bytes;
        if let Some(headroom) = self.cgroup.as_ref().and_then(CgroupMemory::headroom_bytes) {
            budget = budget.min(headroom);
        }
        for limit in [self.rlimit_as_bytes, self.rlimit_data_bytes]
            .into_iter()
            .flatten()
        {
            budget = budget.min(limit);
        }
        budget
    }
}

/// The host CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuInfo {
    /// Brand string, e.g. "AMD Ryzen 9 7950X 16-Core Processor".
    pub model: String,
    /// Physical cores this process may use (llama.cpp's default thread count
    /// is based on physical cores).
    pub physical_cores: u32,
    /// Hardware threads this process may use (affinity and cgroup CPU quota
    /// taken into account).
    pub logical_cores: u32,
    /// Architecture, e.g. "x86_64" or "aarch64".
    pub arch: String,
    /// SIMD features relevant to llama.cpp's CPU kernels, lower case with
    /// underscores: "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw",
    /// "avx512vnni", "avx_vnni", "amx_int8", "neon", "dotprod", "i8mm", "sve"…
    pub features: Vec<String>,
}

/// Who made a GPU: decides which driver library and which llama.cpp backend
/// apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuVendor {
    /// NVIDIA (CUDA backend).
    Nvidia,
    /// AMD (ROCm/HIP or Vulkan backend).
    Amd,
    /// Apple Silicon (Metal backend).
    Apple,
    /// Intel Arc (SYCL or Vulkan backend).
    Intel,
    /// A llama.cpp RPC worker (`--rpc HOST:PORT`): another process, often
    /// another machine, whose backend llama.cpp uses like a local GPU.
    Rpc,
    /// Anything else, or unknown.
    Other,
}

/// One GPU as llama.cpp will see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuInfo {
    /// Device number as llama.cpp's backend numbers it (position after
    /// visibility filtering, starting at 0).
    pub index: u32,
    /// Marketing name, e.g. "NVIDIA GeForce RTX 4090".
    pub name: String,
    /// Who made it.
    pub vendor: GpuVendor,
    /// Memory the GPU has (for an integrated GPU: what it may use).
    pub total_bytes: u64,
    /// Memory not in use by anyone right now, as llama.cpp's backend will
    /// report it. For an Apple GPU that equals `total_bytes` (Metal only
    /// subtracts this process's own allocations), so on unified machines the
    /// RAM budget must be checked as well.
    pub free_bytes: u64,
    /// Peak memory bandwidth: reported by the driver (or stated in a
    /// hardware profile), looked up in the GPU table by name, or assumed;
    /// `None` when nothing is known (plans then assume
    /// [`DEFAULT_GPU_BANDWIDTH_BYTES_PER_S`]).
    pub bandwidth_bytes_per_s: Option<f64>,
    /// Where `bandwidth_bytes_per_s` came from.
    #[serde(default)]
    pub bandwidth_source: BandwidthSource,
    /// Peak dense FP16 throughput, FLOP/s, when the GPU table knows the
    /// model; prompt-speed estimates use it.
    #[serde(default)]
    pub fp16_flops_per_s: Option<f64>,
    /// Stable identifier (NVML UUID, "GPU-…"), when known.
    pub uuid: Option<String>,
    /// What the plan may use of this device when the user said so
    /// (`--rpc-mem`), below `free_bytes`. llama.cpp still splits layers by
    /// `free_bytes`, so the two are kept apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_bytes: Option<u64>,
    /// The device as llama.cpp's backend registry lists it, when this
    /// build's registry was read (the probe of this machine in a GPU build);
    /// `None` for GPUs from a driver library alone, a hardware profile or
    /// `--gpu`, which plans take to run on the vendor's usual backend
    /// (CUDA for NVIDIA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llama: Option<LlamaDevice>,
}

/// A device of llama.cpp's backend registry (`ggml_backend_dev_*`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlamaDevice {
    /// The backend (`Vulkan`, `CUDA`, `Metal`, `ROCm`…).
    pub backend: String,
    /// llama.cpp's device name, which is also its buffers' name in the
    /// memory breakdown (`Vulkan0`, `CUDA1`).
    pub name: String,
    /// What the backend calls it (`NVIDIA GeForce RTX 4090`,
    /// `llvmpipe (LLVM 15.0.6, 256 bits)`).
    pub description: String,
    /// The device's memory is this machine's RAM: an integrated GPU, or a
    /// CPU-type Vulkan device such as Mesa's lavapipe. What a plan puts on
    /// it is RAM gone too.
    pub host_memory: bool,
    /// The largest tensor the device accepts, when it has a limit below
    /// its memory (Vulkan without 64-bit indexing: `maxStorageBufferRange`,
    /// 128 MiB on lavapipe); llama.cpp keeps a larger weight on the CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tensor_bytes: Option<u64>,
    /// What a short probe on the device itself measured, for a device
    /// neither its driver nor the GPU table gives a speed for (lavapipe, an
    /// unknown card): this machine's only, never a profile's or `--gpu`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<MeasuredSpeed>,
}

/// A device's speed as measured on it through ggml (the app's
/// `llama::device_speed`): what the speed model uses instead of an assumed
/// bandwidth ([`crate::speed::measured_throughput`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeasuredSpeed {
    /// Bytes/s a matrix-vector product reads quantized weights at: an
    /// effective figure, no efficiency factor applies.
    pub bandwidth_bytes_per_s: u64,
    /// Nanoseconds one graph node costs beyond its work (dispatch and
    /// barrier), from a chain of tiny products.
    pub per_node_ns: u64,
}

impl LlamaDevice {
    /// The backend's pinned host buffer type (`Vulkan_Host`, `CUDA_Host`),
    /// which holds the CPU's compute buffer once a layer is offloaded.
    #[must_use]
    pub fn host_buffer(&self) -> String {
        format!("{}_Host", self.backend)
    }
}

/// Where a GPU's bandwidth figure came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BandwidthSource {
    /// The driver reported it (NVML: bus width × memory clock), or a hardware
    /// profile stated it.
    #[default]
    Reported,
    /// The GPU table's figure for the GPU's name (`--gpu NAME`, or a detected
    /// GPU whose driver reports none).
    LookedUp,
    /// Not known: [`DEFAULT_GPU_BANDWIDTH_BYTES_PER_S`] (or, for an
    /// integrated GPU, the RAM's bandwidth) stands in.
    Assumed,
    /// Measured on this device by a short probe ([`MeasuredSpeed`]).
    Measured,
}

impl BandwidthSource {
    /// How the figure was found, in words ("reported by the driver").
    #[must_use]
    pub fn as_words(self) -> &'static str {
        match self {
            Self::Reported => "reported",
            Self::LookedUp => "looked up by name",
            Self::Assumed => "assumed",
            Self::Measured => "measured on this device",
        }
    }
}

impl GpuInfo {
    /// Memory a plan may use here: the free memory, or less when the user
    /// set a budget (`--rpc-mem`).
    #[must_use]
    pub fn plan_budget_bytes(&self) -> u64 {
        self.budget_bytes
            .map_or(self.free_bytes, |b| b.min(self.free_bytes))
    }

    /// The bandwidth a plan uses and where it came from: the GPU's own
    /// figure, else [`DEFAULT_GPU_BANDWIDTH_BYTES_PER_S`], assumed.
    #[must_use]
    pub fn planned_bandwidth(&self) -> (f64, BandwidthSource) {
        match self.bandwidth_bytes_per_s {
            Some(b) => (b, self.bandwidth_source),
            None => (DEFAULT_GPU_BANDWIDTH_BYTES_PER_S, BandwidthSource::Assumed),
        }
    }

    /// Fills what the GPU table knows about this GPU's model: the bandwidth
    /// when none was reported, and the FP16 throughput. `memory_bytes` picks
    /// between a name's configurations (for an integrated GPU, pass the
    /// machine's RAM). Returns whether the name was found.
    pub fn fill_from_table(&mut self, memory_bytes: u64) -> bool {
        let Some(card) = super::gpus::lookup(&self.name, memory_bytes) else {
            return false;
        };
        if self.bandwidth_bytes_per_s.is_none() {
            self.bandwidth_bytes_per_s = Some(card.gpu.bandwidth_bytes_per_s());
            self.bandwidth_source = BandwidthSource::LookedUp;
        }
        self.fp16_flops_per_s = Some(card.gpu.fp16_flops_per_s());
        true
    }
}

/// How much of the shared RAM an integrated GPU may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnifiedMemory {
    /// The most the GPU may hold at once.
    pub gpu_limit_bytes: u64,
    /// How that limit was found, in words (e.g. "sysctl iogpu.wired_limit_mb").
    pub source: String,
}

/// What [`crate::hw::probe`] should do beyond the cheap reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeOptions {
    /// Measure RAM bandwidth (0.45 s for `hw` on the 2-core test VM) when no
    /// cached value exists.
    pub measure_bandwidth: bool,
    /// Folder for `ram-bandwidth-v4.json`, the measurement cache; `None` = no
    /// cache (neither read nor written).
    pub cache_dir: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ram(available: u64) -> RamInfo {
        RamInfo {
            total_bytes: 64 << 30,
            available_bytes: available,
            swap_total_bytes: 0,
            swap_free_bytes: 0,
            cgroup: None,
            rlimit_as_bytes: None,
            rlimit_data_bytes: None,
            bandwidth_bytes_per_s: DEFAULT_RAM_BANDWIDTH_BYTES_PER_S,
            bandwidth_measured: false,
            speed_calibration: None,
            runtime_bytes: None,
            runtime_virtual_bytes: None,
        }
    }

    #[test]
    fn budget_without_limits_is_available() {
        assert_eq!(ram(40 << 30).budget_bytes(), 40 << 30);
    }

    #[test]
    fn budget_takes_cgroup_headroom_counting_reclaimable_cache() {
        let mut r = ram(60 << 30);
        r.cgroup = Some(CgroupMemory {
            version: 2,
            path: "/c".into(),
            limit_bytes: Some(512 << 20),
            usage_bytes: 200 << 20,
            reclaimable_bytes: 50 << 20,
        });
        assert_eq!(r.budget_bytes(), (512 - 150) << 20);
    }

    #[test]
    fn budget_is_zero_when_cgroup_is_over_its_limit() {
        let mut r = ram(60 << 30);
        r.cgroup = Some(CgroupMemory {
            version: 1,
            path: "/c".into(),
            limit_bytes: Some(100),
            usage_bytes: 500,
            reclaimable_bytes: 0,
        });
        assert_eq!(r.budget_bytes(), 0);
    }

    #[test]
    fn unlimited_cgroup_does_not_bind() {
        let mut r = ram(8 << 30);
        r.cgroup = Some(CgroupMemory {
            version: 2,
            path: "/".into(),
            limit_bytes: None,
            usage_bytes: 1 << 40,
            reclaimable_bytes: 0,
        });
        assert_eq!(r.budget_bytes(), 8 << 30);
    }

    #[test]
    fn budget_takes_smallest_rlimit() {
        let mut r = ram(8 << 30);
        r.rlimit_as_bytes = Some(6 << 30);
        r.rlimit_data_bytes = Some(4 << 30);
        assert_eq!(r.budget_bytes(), 4 << 30);
        r.rlimit_data_bytes = None;
        assert_eq!(r.budget_bytes(), 6 << 30);
    }
}
