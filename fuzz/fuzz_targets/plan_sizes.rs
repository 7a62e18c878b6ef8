//! The planner's size arithmetic on extreme but accepted inputs: a small
//! valid model whose hyper-parameters are overwritten with values up to 2^64,
//! planned with any settings the command line accepts (`--ctx-size`,
//! `--parallel`, `--batch-size`, ... up to u32::MAX) on any `--ram`/`--vram`.
//! Byte-level mutation of whole headers rarely changes two numbers at once;
//! this target does it on every input. Built with overflow checks (see
//! scripts/fuzz.sh), so a wrapping sum or product is a crash.

#![no_main]

use std::sync::LazyLock;

use headroom_fuzz::{MACHINE, Tiny};
use headroom_planner::gguf::{GgmlType, Header, Value};
use headroom_planner::hw::{self, Overrides};
use headroom_planner::plan::{FlashAttn, FrontEnd, Settings, Verdict};
use headroom_planner::profile;
use headroom_planner::solve::{self, Build};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

/// One model per code path of the memory model.
static MODELS: LazyLock<Vec<Header>> = LazyLock::new(|| {
    let llama = Tiny::llama();
    [
        llama.clone(),
        Tiny {
            arch: "gemma3",
            n_layer: 6,
            sliding_window: Some(512),
            ..llama.clone()
        },
        Tiny {
            arch: "qwen3moe",
            experts: (4, 2),
            ..llama.clone()
        },
        Tiny {
            arch: "deepseek2",
            kv_lora_rank: Some(64),
            n_head_kv: 1,
            ..llama.clone()
        },
        Tiny {
            arch: "mamba",
            n_head: 0,
            n_head_kv: 0,
            ssm_inner: Some(512),
            ..llama.clone()
        },
    ]
    .iter()
    .map(|t| t.build().expect("the seed models are valid"))
    .collect()
});

/// Hyper-parameter keys the profile reads (after `<arch>.`).
const KEYS: &[&str] = &[
    "block_count",
    "context_length",
    "embedding_length",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "attention.sliding_window",
    "attention.sliding_window_pattern",
    "attention.kv_lora_rank",
    "attention.key_length_mla",
    "attention.value_length_mla",
    "full_attention_interval",
    "rope.dimension_count",
    "expert_count",
    "expert_used_count",
    "expert_shared_count",
    "expert_feed_forward_length",
    "nextn_predict_layers",
    "ssm.inner_size",
    "ssm.state_size",
    "ssm.conv_kernel",
    "ssm.group_count",
    "wkv.head_size",
];

/// Mostly boundary values: small, powers of two, type maxima.
fn number(u: &mut Unstructured) -> Result<u64> {
    Ok(match u.int_in_range(0u8..=4)? {
        0 => u64::from(u.arbitrary::<u8>()?),
        1 => 1u64 << u.int_in_range(0u32..=63)?,
        2 => u64::from(u32::MAX) - u64::from(u.arbitrary::<u8>()?),
        3 => u64::MAX - u64::from(u.arbitrary::<u8>()?),
        _ => u.arbitrary()?,
    })
}

fn number_u32(u: &mut Unstructured) -> Result<u32> {
    Ok(u32::try_from(number(u)?).unwrap_or(u32::MAX))
}

/// Settings as `headroom plan` builds them: batch sizes and `--parallel` at
/// least 1, `--ctx-size` not 0, cache types from llama.cpp's list.
fn settings(u: &mut Unstructured) -> Result<Settings> {
    const CACHE: &[GgmlType] = &[GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::F32];
    Ok(Settings {
        n_ctx: if u.arbitrary()? {
            Some(number_u32(u)?.max(1))
        } else {
            None
        },
        n_batch: number_u32(u)?.max(1),
        n_ubatch: number_u32(u)?.max(1),
        n_parallel: number_u32(u)?.max(1),
        n_gpu_layers: if u.arbitrary()? {
            Some(number_u32(u)?)
        } else {
            None
        },
        cache_type_k: *u.choose(CACHE)?,
        cache_type_v: *u.choose(CACHE)?,
        flash_attn: *u.choose(&[FlashAttn::Auto, FlashAttn::On, FlashAttn::Off])?,
        swa_full: u.arbitrary()?,
        mmap: u.arbitrary()?,
        repack: u.arbitrary()?,
        margin_bytes: if u.arbitrary()? {
            Some(number(u)?)
        } else {
            None
        },
        front_end: *u.choose(&[FrontEnd::Cli, FrontEnd::Server])?,
        logits_per_sequence: u.arbitrary()?,
        // `serve --embeddings N` (the command line bounds N; the planner
        // must not rely on it).
        embeddings: if u.arbitrary()? {
            Some(number_u32(u)?.max(1))
        } else {
            None
        },
    })
}

fn run(u: &mut Unstructured) -> Result<()> {
    let mut header = u.choose(&MODELS)?.clone();
    let arch = header
        .get_str("general.architecture")
        .unwrap_or("llama")
        .to_string();
    let mut changed = Vec::new();
    for _ in 0..u.int_in_range(1u8..=6)? {
        let key = format!("{arch}.{}", u.choose(KEYS)?);
        let n = number(u)?;
        let value = match u32::try_from(n) {
            Ok(v) => Value::U32(v),
            Err(_) => Value::U64(n),
        };
        header.metadata.retain(|(k, _)| *k != key);
        header.metadata.push((key.clone(), value));
        changed.push((key, n));
    }
    let Ok(model) = profile::profile(&header) else {
        return Ok(());
    };
    let s = settings(u)?;
    let overrides = if u.arbitrary()? {
        let vram = (0..u.int_in_range(0u8..=3)?)
            .map(|_| number(u))
            .collect::<Result<Vec<_>>>()?;
        Some(Overrides {
            ram_bytes: Some(number(u)?),
            vram_bytes: Some(vram),
            profile: None,
        })
    } else {
        None
    };
    let build = Build {
        gpu: u.arbitrary()?,
    };
    // `FUZZ_DEBUG=1 fuzz/target/x86_64-unknown-linux-gnu/release/plan_sizes
    // CRASH_FILE` says what a reproducer plans, as a header and a command line.
    if std::env::var_os("FUZZ_DEBUG").is_some() {
        eprintln!(
            "model: {arch} with {changed:?}\nsettings: {s:?}\nmachine: {overrides:?}, {build:?}"
        );
    }
    let machine = match overrides {
        Some(o) => match hw::apply_overrides(MACHINE.clone(), &o) {
            Ok(m) => m,
            Err(_) => return Ok(()),
        },
        None => MACHINE.clone(),
    };
    let plan = solve::plan(&model, "fuzz.gguf", &s, &machine, build);
    for d in &plan.devices {
        let parts = d.parts();
        let sum: u128 = parts.iter().map(|&b| u128::from(b)).sum();
        assert!(
            u128::from(d.total_bytes) == sum || d.total_bytes == u64::MAX,
            "device {} total {} is not the sum of {parts:?}",
            d.name,
            d.total_bytes
        );
    }
    // A size past 2^64 saturates, and such a plan never fits: a wrapped sum
    // would make a huge model look small.
    let saturated = plan.devices.iter().any(|d| d.total_bytes == u64::MAX)
        || plan.ram.anonymous_bytes == u64::MAX
        || plan.ram.allocated_bytes == u64::MAX;
    assert!(
        !saturated || plan.verdict == Verdict::DoesNotFit,
        "a saturated size gave {:?}",
        plan.verdict
    );
    // The speeds go to JSON, which has no NaN or infinity.
    let speeds = [
        plan.est_decode_tokens_per_s,
        plan.est_prompt_tokens_per_s,
        plan.est_full_gpu_decode_tokens_per_s.unwrap_or(0.0),
    ];
    assert!(
        speeds.iter().all(|s| s.is_finite() && *s >= 0.0),
        "speeds {speeds:?}"
    );
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
