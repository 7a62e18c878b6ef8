//! What a speed estimate rests on, in words: each device's bandwidth, where
//! that figure came from, and the bytes it reads per generated token. An
//! assumed figure says how to replace it.

use headroom_planner::hw::BandwidthSource;
use headroom_planner::plan::DeviceKind;
use headroom_planner::speed::{
    GpuBasis, LinkSource, NetworkBasis, RamBandwidthSource, RamBasis, SpeedBasis,
};

/// What to do about a GPU bandwidth nobody stated.
pub const NAME_THE_CARD: &str = "name the card with --gpu";

/// What to do about an assumed bandwidth of the GPU named `name`: name
/// the card, unless it is no card at all but a software Vulkan device
/// (lavapipe), which computes on this machine's CPU.
#[must_use]
pub fn unnamed_gpu_hint(name: &str) -> &'static str {
    if headroom_planner::hw::is_software_device(name) {
        "a software Vulkan device, computing on this machine's CPU"
    } else {
        NAME_THE_CARD
    }
}

/// A measured device's figures beyond its bandwidth, in words.
#[must_use]
pub fn measured_words(m: &headroom_planner::hw::MeasuredSpeed) -> String {
    format!("{:.0} µs per graph node", m.per_node_ns as f64 / 1e3)
}

fn gb_s(bytes_per_s: f64) -> String {
    let gb = bytes_per_s / 1e9;
    if gb < 10.0 {
        format!("{gb:.2} GB/s")
    } else if gb < 100.0 {
        format!("{gb:.1} GB/s")
    } else {
        format!("{gb:.0} GB/s")
    }
}

fn gpu_source(g: &GpuBasis) -> String {
    match g.source {
        BandwidthSource::Reported => "reported".into(),
        BandwidthSource::LookedUp => "looked up by name".into(),
        // An RPC worker's memory is not known here: this machine's RAM
        // bandwidth stands in (`hw::add_rpc_devices`).
        BandwidthSource::Assumed if g.kind == DeviceKind::Rpc => {
            "assumed: this machine's RAM bandwidth".into()
        }
        BandwidthSource::Assumed => format!("assumed: {}", unnamed_gpu_hint(&g.name)),
        BandwidthSource::Measured => match &g.measured {
            Some(m) => format!("measured on this device, {}", measured_words(m)),
            None => "measured on this device".into(),
        },
    }
}

fn ram_source(r: &RamBasis) -> String {
    match (r.source, r.calibration_runs) {
        (RamBandwidthSource::Calibrated, Some(n)) => {
            let factor = r
                .calibration_decode_factor
                .map_or_else(String::new, |f| format!(": CPU decode ×{f:.2}"));
            format!(
                "calibrated from {n} run{}{factor}",
                if n == 1 { "" } else { "s" }
            )
        }
        (RamBandwidthSource::Default, _) => "default, not measured".into(),
        (RamBandwidthSource::TypicalDesktop, _) => format!(
            "assumed: a typical desktop's dual-channel DDR5-{:.0}",
            headroom_planner::hw::TYPICAL_DESKTOP_MT_S / 1e6
        ),
        (RamBandwidthSource::LookedUp, _) => "the named part's, looked up".into(),
        (s, _) => s.as_words().into(),
    }
}

/// The CPU the estimate prices: "2 cores, 0.06 ms/layer".
fn cpu_phrase(r: &RamBasis) -> String {
    format!(
        "{} core{}, {:.2} ms/layer",
        r.threads,
        if r.threads == 1 { "" } else { "s" },
        r.per_layer_s * 1e3,
    )
}

fn gpu_phrase(g: &GpuBasis) -> String {
    format!(
        "{} {} ({})",
        g.name,
        gb_s(g.bandwidth_bytes_per_s),
        gpu_source(g)
    )
}

fn ram_phrase(r: &RamBasis) -> String {
    format!(
        "RAM {} ({}), {}",
        gb_s(r.bandwidth_bytes_per_s),
        ram_source(r),
        cpu_phrase(r)
    )
}

fn per_token(bytes: u64) -> String {
    format!("{:.2} GB/token", bytes as f64 / 1e9)
}

/// One line for a plan: every device that reads weights, its bandwidth and
/// source, and its bytes per token ("NVIDIA GeForce RTX 4060 272 GB/s
/// (looked up by name), 3.91 GB/token; RAM 21.5 GB/s (measured), 2 cores,
/// 0.11 ms/layer, 0.52 GB/token"). The RAM and CPU are left out
/// when the RAM reads nothing and GPUs do.
#[must_use]
pub fn plan_line(b: &SpeedBasis) -> String {
    let mut parts: Vec<String> = b
        .gpus
        .iter()
        .map(|g| format!("{}, {}", gpu_phrase(g), per_token(g.bytes_per_token)))
        .collect();
    if b.ram.bytes_per_token > 0 || b.gpus.is_empty() {
        parts.push(format!(
            "{}, {}",
            ram_phrase(&b.ram),
            per_token(b.ram.bytes_per_token)
        ));
    }
    if let Some(n) = &b.network {
        parts.push(network_phrase(n));
    }
    parts.join("; ")
}

/// The link to the RPC workers: "network 125 MB/s (assumed: gigabit; set
/// --rpc-bandwidth), 2 boundaries, 0.20 MB/token".
fn network_phrase(n: &NetworkBasis) -> String {
    let source = match n.source {
        LinkSource::Given => "--rpc-bandwidth",
        LinkSource::Assumed => "assumed: gigabit; set --rpc-bandwidth",
    };
    format!(
        "network {:.0} MB/s ({source}), {} boundar{}, {:.2} MB/token",
        n.link_bytes_per_s / 1e6,
        n.boundaries,
        if n.boundaries == 1 { "y" } else { "ies" },
        n.bytes_per_token as f64 / 1e6
    )
}

/// One line for a machine (the bandwidths every row of a ranking shares):
/// "NVIDIA GeForce RTX 4060 272 GB/s (looked up by name); RAM 67.2 GB/s
/// (assumed: a typical desktop's dual-channel DDR5-5600), 8 cores, 0.06
/// ms/layer".
#[must_use]
pub fn machine_line(b: &SpeedBasis) -> String {
    let mut parts: Vec<String> = b.gpus.iter().map(gpu_phrase).collect();
    parts.push(ram_phrase(&b.ram));
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basis(source: BandwidthSource, ram_bytes: u64) -> SpeedBasis {
        SpeedBasis {
            ram: RamBasis {
                bandwidth_bytes_per_s: 21.46e9,
                source: RamBandwidthSource::Measured,
                host: headroom_planner::hw::Host::ThisMachine,
                threads: 2,
                per_layer_s: 0.11e-3,
                per_vocab_s: 13e-9,
                flops_per_s: 160e9,
                flops_plain_per_s: 50e9,
                calibration_runs: None,
                calibration_decode_factor: None,
                calibration_prompt_factor: None,
                bytes_per_token: ram_bytes,
            },
            gpus: vec![GpuBasis {
                name: "GPU0".into(),
                kind: DeviceKind::Gpu,
                bandwidth_bytes_per_s: 360e9,
                source,
                fp16_flops_per_s: None,
                bytes_per_token: 4_420_000_000,
                n_layers: 30,
                measured: None,
            }],
            network: None,
        }
    }

    #[test]
    fn an_assumed_gpu_says_how_to_name_it() {
        assert_eq!(
            plan_line(&basis(BandwidthSource::Assumed, 610_000_000)),
            "GPU0 360 GB/s (assumed: name the card with --gpu), 4.42 GB/token; \
             RAM 21.5 GB/s (measured), 2 cores, 0.11 ms/layer, 0.61 GB/token"
        );
        assert_eq!(
            plan_line(&basis(BandwidthSource::LookedUp, 0)),
            "GPU0 360 GB/s (looked up by name), 4.42 GB/token"
        );
        assert_eq!(
            machine_line(&basis(BandwidthSource::Reported, 0)),
            "GPU0 360 GB/s (reported); RAM 21.5 GB/s (measured), 2 cores, 0.11 ms/layer"
        );
    }

    #[test]
    fn the_network_says_whether_its_speed_was_given() {
        let mut b = basis(BandwidthSource::Reported, 0);
        b.network = Some(NetworkBasis {
            link_bytes_per_s: 125e6,
            source: LinkSource::Assumed,
            boundaries: 2,
            bytes_per_token: 201_216,
            prompt_bytes_per_token: 4_608,
        });
        assert!(
            plan_line(&b).ends_with(
                "; network 125 MB/s (assumed: gigabit; set --rpc-bandwidth), 2 boundaries, 0.20 MB/token"
            ),
            "{}",
            plan_line(&b)
        );
        if let Some(n) = b.network.as_mut() {
            n.source = LinkSource::Given;
            n.boundaries = 1;
        }
        assert!(plan_line(&b).contains("(--rpc-bandwidth), 1 boundary,"));
    }

    #[test]
    fn ram_sources_in_words() {
        let mut b = basis(BandwidthSource::Reported, 1);
        b.gpus.clear();
        b.ram.source = RamBandwidthSource::Default;
        assert!(plan_line(&b).contains("(default, not measured)"));
        b.ram.source = RamBandwidthSource::Calibrated;
        b.ram.calibration_runs = Some(3);
        assert!(plan_line(&b).contains("(calibrated from 3 runs)"));
        b.ram.calibration_decode_factor = Some(1.314);
        b.ram.calibration_runs = Some(1);
        assert!(
            plan_line(&b).contains("(calibrated from 1 run: CPU decode ×1.31)"),
            "{}",
            plan_line(&b)
        );
        // Another machine's figures say whose they are.
        b.ram.source = RamBandwidthSource::TypicalDesktop;
        b.ram.threads = 8;
        b.ram.per_layer_s = headroom_planner::speed::CPU_PER_LAYER_S;
        assert!(
            plan_line(&b).contains(
                "(assumed: a typical desktop's dual-channel DDR5-5600), 8 cores, 0.06 ms/layer"
            ),
            "{}",
            plan_line(&b)
        );
        b.ram.source = RamBandwidthSource::LookedUp;
        assert!(plan_line(&b).contains("(the named part's, looked up)"));
        b.ram.source = RamBandwidthSource::Stated;
        assert!(plan_line(&b).contains("(stated in the profile)"));
    }
}
