//! AMD GPUs on Linux, read from the amdgpu driver's sysfs files (no ROCm
//! library needed): `/sys/class/drm/cardN/device/{vendor,mem_info_*}`.
//!
//! APU rule: an AMD device whose `mem_info_vram_total` is under 1 GiB and
//! that has `mem_info_gtt_total` is an integrated GPU (APU). Its small
//! "VRAM" is a BIOS carve-out; real allocations go to GTT, i.e. ordinary
//! system RAM mapped for the GPU, so the machine is treated as unified
//! memory with a GPU limit of carve-out + GTT size (GTT defaults to half of
//! RAM or more depending on the kernel and `amdgpu.gttsize`). An APU whose
//! BIOS carve-out is set to 1 GiB or more (e.g. a Strix Halo with 64 GiB
//! "VRAM") is treated like a discrete GPU of that size, which is how it
//! behaves: the carve-out is already missing from the OS's RAM.

use std::path::{Path, PathBuf};

use super::types::{BandwidthSource, GpuInfo, GpuVendor, UnifiedMemory};

const AMD_PCI_VENDOR: &str = "0x1002";
const APU_VRAM_BELOW: u64 = 1 << 30;

/// One amdgpu card as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmdCard {
    /// N in `cardN`.
    pub card: u32,
    /// `product_name` when the driver exposes it, else "AMD GPU [1002:<device id>]".
    pub name: String,
    /// `mem_info_vram_total`.
    pub vram_total: u64,
    /// `mem_info_vram_used`.
    pub vram_used: u64,
    /// `mem_info_gtt_total`, when present.
    pub gtt_total: Option<u64>,
    /// `mem_info_gtt_used`, when present.
    pub gtt_used: Option<u64>,
}

impl AmdCard {
    /// Whether this is an APU by the rule in the module docs.
    pub fn is_apu(&self) -> bool {
        self.vram_total < APU_VRAM_BELOW && self.gtt_total.is_some()
    }

    /// The GPU as the planner sees it, numbered `index`; for an APU, also
    /// its unified-memory limit.
    pub fn to_gpu(&self, index: u32) -> (GpuInfo, Option<UnifiedMemory>) {
        let (total, used, unified) = if self.is_apu() {
            let gtt = self.gtt_total.unwrap_or(0);
            let limit = self.vram_total.saturating_add(gtt);
            let used = self.vram_used.saturating_add(self.gtt_used.unwrap_or(0));
            let unified = UnifiedMemory {
                gpu_limit_bytes: limit,
                source: format!(
                    "amdgpu card{}: VRAM carve-out + GTT (mem_info_vram_total + mem_info_gtt_total)",
                    self.card
                ),
            };
            (limit, used, Some(unified))
        } else {
            (self.vram_total, self.vram_used, None)
        };
        let gpu = GpuInfo {
            index,
            name: self.name.clone(),
            vendor: GpuVendor::Amd,
            total_bytes: total,
            free_bytes: total.saturating_sub(used),
            bandwidth_bytes_per_s: None,
            bandwidth_source: BandwidthSource::Assumed,
            fp16_flops_per_s: None,
            uuid: None,
            budget_bytes: None,
            llama: None,
        };
        (gpu, unified)
    }
}

/// Lists amdgpu cards under a DRM class directory (normally
/// `/sys/class/drm`), in card-number order. Cards from other vendors and
/// connector entries (`card0-DP-1`) are skipped; an AMD card whose memory
/// files cannot be read gets a note.
pub fn scan(drm_root: &Path, notes: &mut Vec<String>) -> Vec<AmdCard> {
    let Ok(entries) = std::fs::read_dir(drm_root) else {
        return Vec::new();
    };
    let mut cards: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n: u32 = name.strip_prefix("card")?.parse().ok()?;
            Some((n, e.path().join("device")))
        })
        .collect();
    cards.sort_by_key(|(n, _)| *n);

    let mut found = Vec::new();
    for (card, dev) in cards {
        let vendor = read_trimmed(&dev.join("vendor"));
        if vendor.as_deref() != Some(AMD_PCI_VENDOR) {
            continue;
        }
        let (Some(vram_total), Some(vram_used)) = (
            read_u64(&dev.join("mem_info_vram_total")),
            read_u64(&dev.join("mem_info_vram_used")),
        ) else {
            notes.push(format!(
                "AMD GPU card{card}: cannot read {}/mem_info_vram_total (is the amdgpu driver loaded?)",
                dev.display()
            ));
            continue;
        };
        let name = read_trimmed(&dev.join("product_name"))
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| {
                let id = read_trimmed(&dev.join("device")).unwrap_or_default();
                format!("AMD GPU [1002:{}]", id.trim_start_matches("0x"))
            });
        found.push(AmdCard {
            card,
            name,
            vram_total,
            vram_used,
            gtt_total: read_u64(&dev.join("mem_info_gtt_total")),
            gtt_used: read_u64(&dev.join("mem_info_gtt_used")),
        });
    }
    found
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn read_u64(path: &Path) -> Option<u64> {
    read_trimmed(path)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn fixture() -> Vec<AmdCard> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hw/drm");
        let mut notes = Vec::new();
        let cards = scan(&root, &mut notes);
        assert_eq!(notes.len(), 1, "{notes:?}"); // card3 lacks mem_info files
        assert!(notes[0].contains("card3"), "{notes:?}");
        cards
    }

    #[test]
    fn scan_finds_amd_cards_in_order_and_skips_others() {
        let cards = fixture();
        let ids: Vec<u32> = cards.iter().map(|c| c.card).collect();
        assert_eq!(ids, vec![0, 2]); // card1 is Intel, card0-DP-1 a connector
        assert_eq!(cards[0].name, "AMD Radeon RX 7900 XTX");
        assert_eq!(cards[0].vram_total, 24 * GIB);
        assert_eq!(cards[1].name, "AMD GPU [1002:15bf]");
    }

    #[test]
    fn discrete_card_is_not_unified() {
        let cards = fixture();
        assert!(!cards[0].is_apu());
        let (gpu, unified) = cards[0].to_gpu(0);
        assert_eq!(unified, None);
        assert_eq!(gpu.total_bytes, 24 * GIB);
        assert_eq!(gpu.free_bytes, 24 * GIB - GIB / 2);
        assert_eq!(gpu.vendor, GpuVendor::Amd);
    }

    #[test]
    fn apu_uses_carve_out_plus_gtt() {
        let cards = fixture();
        assert!(cards[1].is_apu());
        let (gpu, unified) = cards[1].to_gpu(1);
        let limit = GIB / 2 + 15 * GIB;
        assert_eq!(unified.map(|u| u.gpu_limit_bytes), Some(limit));
        assert_eq!(gpu.index, 1);
        assert_eq!(gpu.total_bytes, limit);
        assert_eq!(gpu.free_bytes, limit - (100 << 20) - GIB);
    }

    #[test]
    fn big_carve_out_counts_as_discrete() {
        let card = AmdCard {
            card: 0,
            name: "Strix Halo".into(),
            vram_total: 64 * GIB,
            vram_used: 0,
            gtt_total: Some(16 * GIB),
            gtt_used: Some(0),
        };
        assert!(!card.is_apu());
    }

    #[test]
    fn missing_root_is_empty() {
        let mut notes = Vec::new();
        assert!(scan(Path::new("/nonexistent/drm"), &mut notes).is_empty());
        assert!(notes.is_empty());
    }
}
