//! Inputs the fuzzers (`fuzz/`, scripts/fuzz.sh) found to crash the planner,
//! kept as plain tests so the normal suite guards the fixes.

use headroom_planner::gguf::writer::HeaderBuilder;
use headroom_planner::gguf::{GgmlType, Header};
use headroom_planner::profile::{self, MAX_LAYERS, ProfileError};

/// A one-layer llama whose `block_count` claims `n_layer` layers.
fn llama_claiming(n_layer: u32) -> Header {
    HeaderBuilder::new()
        .kv("general.architecture", "llama")
        .kv("llama.block_count", n_layer)
        .kv("llama.embedding_length", 32u32)
        .kv("llama.attention.head_count", 4u32)
        .kv("llama.vocab_size", 8u32)
        .tensor("token_embd.weight", &[32, 8], GgmlType::F32)
        .tensor("blk.0.attn_q.weight", &[32, 32], GgmlType::F32)
        .build()
        .expect("the header itself is valid")
}

/// gguf_header: a 2,000-byte file with `block_count = 2^31` made the profile
/// allocate per-layer vectors of 2^31 entries (8 GiB, then 100 GiB) before
/// noticing the layers have no tensors. llama.cpp asserts at 512 layers.
#[test]
fn block_count_past_llama_cpp_limit_is_refused_before_allocating() {
    for n in [MAX_LAYERS + 1, 1 << 31, u32::MAX] {
        match profile::profile(&llama_claiming(n)) {
            Err(ProfileError::Invalid { key, why }) => {
                assert_eq!(key, "llama.block_count");
                assert!(why.contains("512"), "{why}");
            }
            other => panic!("{n} layers gave {other:?}"),
        }
    }
    // At the limit the count is accepted, and the missing layers are the error.
    assert!(matches!(
        profile::profile(&llama_claiming(MAX_LAYERS)),
        Err(ProfileError::Inconsistent(_))
    ));
}

// plan_sizes: hostile hyper-parameters and settings whose sizes pass 2^64.
// Each was a panic under overflow checks; in a release build the same sums
// wrapped, and a wrapped size can make a huge plan look like it fits. Sizes
// now saturate at u64::MAX, which no budget holds.

mod sizes {
    use std::path::Path;

    use headroom_planner::gguf::writer::HeaderBuilder;
    use headroom_planner::gguf::{Array, ArrayItems, GgmlType, Header, Value};
    use headroom_planner::hw::{self, HardwareSnapshot, Overrides};
    use headroom_planner::plan::{Plan, Settings, Verdict};
    use headroom_planner::profile;
    use headroom_planner::solve::{self, Build};

    const GIB: u64 = 1 << 30;
    const CPU_BUILD: Build = Build { gpu: false };

    /// The fuzz target's seed models (fuzz/src/lib.rs `Tiny`): two layers of
    /// width 256, 4 heads and 2 KV heads, a 64-token vocabulary, Q4_K weights;
    /// `arch` picks the code path (sliding window, experts, latent attention,
    /// recurrent state).
    fn tiny(arch: &str) -> Header {
        let e = 256u64;
        let (n_head, n_head_kv) = match arch {
            "mamba" => (0, 0),
            // Latent attention as the current converter writes it: one KV "head".
            "deepseek2" => (4u32, 1u32),
            _ => (4u32, 2u32),
        };
        let kv = e / 4 * u64::from(n_head_kv);
        let experts = if arch == "qwen3moe" { 4u64 } else { 0 };
        let k = |s: &str| format!("{arch}.{s}");
        let tokens = (0..64).map(|i| format!("t{i}")).collect();
        let mut b = HeaderBuilder::new()
            .kv("general.architecture", arch)
            .kv(k("block_count"), 2u32)
            .kv(k("context_length"), 4096u32)
            .kv(k("embedding_length"), e as u32)
            .kv(k("feed_forward_length"), (2 * e) as u32)
            .kv(k("attention.head_count"), n_head)
            .kv(k("attention.head_count_kv"), n_head_kv)
            .kv(
                "tokenizer.ggml.tokens",
                Array::new(ArrayItems::String(tokens)),
            );
        match arch {
            "gemma3" => b = b.kv(k("attention.sliding_window"), 512u32),
            "qwen3moe" => {
                b = b
                    .kv(k("expert_count"), 4u32)
                    .kv(k("expert_used_count"), 2u32);
            }
            "deepseek2" => {
                // The latent row (K only) is `key_length` = lora + rope wide.
                b = b
                    .kv(k("attention.kv_lora_rank"), 64u32)
                    .kv(k("rope.dimension_count"), 64u32)
                    .kv(k("attention.key_length"), 128u32)
                    .kv(k("attention.value_length"), 64u32)
                    .kv(k("attention.key_length_mla"), 128u32)
                    .kv(k("attention.value_length_mla"), 64u32);
            }
            "mamba" => {
                b = b
                    .kv(k("ssm.inner_size"), 512u32)
                    .kv(k("ssm.state_size"), 16u32)
                    .kv(k("ssm.conv_kernel"), 4u32);
            }
            _ => {}
        }
        let q = GgmlType::Q4_K;
        b = b.tensor("token_embd.weight", &[e, 64], q);
        for il in 0..2 {
            let n = |s: &str| format!("blk.{il}.{s}");
            b = b.tensor(n("attn_norm.weight"), &[e], GgmlType::F32);
            if arch == "mamba" {
                b = b.tensor(n("ssm_in.weight"), &[e, 1024], q).tensor(
                    n("ssm_out.weight"),
                    &[512, e],
                    q,
                );
                continue;
            }
            b = b
                .tensor(n("attn_q.weight"), &[e, e], q)
                .tensor(n("attn_k.weight"), &[e, kv], q)
                .tensor(n("attn_v.weight"), &[e, kv], q)
                .tensor(n("attn_output.weight"), &[e, e], q)
                .tensor(n("ffn_norm.weight"), &[e], GgmlType::F32);
            b = if experts == 0 {
                b.tensor(n("ffn_gate.weight"), &[e, 2 * e], q)
                    .tensor(n("ffn_up.weight"), &[e, 2 * e], q)
                    .tensor(n("ffn_down.weight"), &[2 * e, e], q)
            } else {
                b.tensor(n("ffn_gate_inp.weight"), &[e, experts], GgmlType::F32)
                    .tensor(n("ffn_gate_exps.weight"), &[e, e, experts], q)
                    .tensor(n("ffn_up_exps.weight"), &[e, e, experts], q)
                    .tensor(n("ffn_down_exps.weight"), &[e, e, experts], q)
            };
        }
        b.tensor("output_norm.weight", &[e], GgmlType::F32)
            .build()
            .expect("the seed model is valid")
    }

    /// Overwrite hyper-parameters (`<arch>.KEY`) as the fuzz target does.
    fn with_keys(mut h: Header, keys: &[(&str, u64)]) -> Header {
        let arch = h
            .get_str("general.architecture")
            .expect("has an architecture")
            .to_string();
        for &(key, n) in keys {
            let key = format!("{arch}.{key}");
            let value = u32::try_from(n).map_or(Value::U64(n), Value::U32);
            h.metadata.retain(|(k, _)| *k != key);
            h.metadata.push((key, value));
        }
        h
    }

    /// The fuzz target's machine: 12 GiB of RAM available, an 8 GiB GPU;
    /// `--ram` replaces the RAM when given.
    fn machine(ram: Option<u64>) -> HardwareSnapshot {
        let base = hw::parse_profile(
            include_str!("fixtures/hw/gpu-8g-ram-16g.toml"),
            Path::new("gpu-8g-ram-16g.toml"),
        )
        .expect("the fixture profile parses");
        let o = Overrides {
            ram_bytes: ram,
            vram_bytes: None,
            profile: None,
        };
        hw::apply_overrides(base, &o).expect("the override applies")
    }

    fn plan(h: &Header, s: &Settings, hw: &HardwareSnapshot, build: Build) -> Plan {
        let model = profile::profile(h).expect("the profile accepts the header");
        solve::plan(&model, "fuzz.gguf", s, hw, build)
    }

    /// `--ctx-size` and friends as the fuzz inputs set them, the rest default.
    fn settings(n_ctx: Option<u32>, n_batch: u32, n_ubatch: u32, n_parallel: u32) -> Settings {
        Settings {
            n_ctx,
            n_batch,
            n_ubatch,
            n_parallel,
            ..Settings::default()
        }
    }

    /// The plan does not fit, says why, and every device's total is the sum
    /// of its parts or saturated, its speeds finite (JSON has no NaN).
    fn assert_refused(p: &Plan) {
        assert_eq!(p.verdict, Verdict::DoesNotFit, "{:?}", p.devices);
        assert!(
            p.warnings
                .iter()
                .any(|w| w.code == headroom_planner::plan::WarningCode::DoesNotFit)
        );
        for d in &p.devices {
            let parts = d.parts();
            let exact: u128 = parts.iter().map(|&b| u128::from(b)).sum();
            let want = u64::try_from(exact).unwrap_or(u64::MAX);
            assert_eq!(d.total_bytes, want, "{} parts {parts:?}", d.name);
        }
        for s in [p.est_decode_tokens_per_s, p.est_prompt_tokens_per_s] {
            assert!(s.is_finite() && s >= 0.0, "{s}");
        }
        serde_json::to_string(p).expect("the plan serializes");
    }

    /// fuzz/corpus/plan_sizes/cli-ctx-batch-ubatch-max-compute: `-c 4294967200
    /// -b 4294967295 -ub 4294967295` reserves a graph of 2^32 tokens whose
    /// attention masks alone are 2^32 × 2^32 cells; the CPU compute buffer
    /// overflowed where its parts were added.
    #[test]
    fn max_batch_saturates_the_compute_buffer() {
        let h = with_keys(tiny("gemma3"), &[("expert_shared_count", 95)]);
        let mut s = settings(Some(4_294_967_200), u32::MAX, u32::MAX, 1);
        s.mmap = false;
        s.repack = false;
        let p = plan(&h, &s, &machine(None), CPU_BUILD);
        assert_refused(&p);
        assert_eq!(p.devices[0].compute_bytes, u64::MAX);
        assert_eq!(p.ram.anonymous_bytes, u64::MAX);
        assert_eq!(p.ram.allocated_bytes, u64::MAX);
    }

    /// cli-parallel-max-tokens: every setting at u32::MAX, `--parallel` among
    /// them (llama.cpp caps sequences at 256), and a training context of 2^64.
    #[test]
    fn every_setting_at_its_maximum_saturates() {
        let h = with_keys(tiny("gemma3"), &[("context_length", u64::MAX - 133)]);
        let s = settings(Some(u32::MAX), u32::MAX, u32::MAX, u32::MAX);
        let p = plan(&h, &s, &machine(None), CPU_BUILD);
        assert_refused(&p);
        assert_eq!(p.n_parallel, 256);
        // 256 streams of 2^24 cells: the masks of a 2^32-token graph are
        // 2^57 bytes, huge but below the limit, so counted exactly.
        let c = p.devices[0].compute_bytes;
        assert!(c > 1 << 57 && c < u64::MAX, "{c}");
    }

    /// key-length-max-kv-cells: a key length of 2^32 - 188 makes each KV cell
    /// 16 GiB, and 2^32 cells of it overflowed the resident sum.
    #[test]
    fn huge_key_length_saturates_the_kv_cache() {
        let h = with_keys(
            tiny("qwen3moe"),
            &[
                ("rope.dimension_count", u64::MAX - 170),
                ("attention.key_length", 4_294_967_108),
            ],
        );
        let s = settings(Some(4_294_967_116), 1, 1, 1);
        let p = plan(&h, &s, &machine(None), CPU_BUILD);
        assert_refused(&p);
        assert_eq!(p.devices[0].kv_bytes, u64::MAX);
        assert_eq!(p.ram.anonymous_bytes, u64::MAX);
    }

    /// mamba-conv-kernel-group-count and mamba-state-group-count: a recurrent
    /// state of (conv_kernel - 1) × (inner + 2 × groups × state) floats, with
    /// each factor near 2^32, overflowed before it was counted per sequence.
    #[test]
    fn huge_recurrent_state_saturates() {
        let cases: [&[(&str, u64)]; 2] = [
            &[
                ("ssm.conv_kernel", 4_294_967_077),
                ("ssm.group_count", 4_294_967_078),
            ],
            &[
                ("ssm.group_count", 4_294_967_277),
                ("ssm.state_size", u64::from(u32::MAX)),
            ],
        ];
        for keys in cases {
            let h = with_keys(tiny("mamba"), keys);
            let s = Settings {
                n_batch: 8447,
                n_ubatch: 1,
                ..Settings::default()
            };
            let p = plan(&h, &s, &machine(None), CPU_BUILD);
            assert_refused(&p);
            assert_eq!(p.devices[0].kv_bytes, u64::MAX, "{keys:?}");
        }
    }

    /// mla-rope-dim-kv-total: a latent row of 2^32 + 62 elements (8 GiB per
    /// cell in f16) over 1.85e9 cells is 1.6e19 bytes per layer: each layer
    /// fits u64, their sum does not. (The fuzz input grew the rope
    /// dimension; llama.cpp sizes the row by `key_length`, which carries it.)
    #[test]
    fn latent_cache_of_two_layers_saturates_their_sum() {
        let h = with_keys(
            tiny("deepseek2"),
            &[("attention.key_length", 64 + 4_294_967_170)],
        );
        let s = settings(Some(1_854_457_342), 1, 1, 1);
        let p = plan(&h, &s, &machine(None), CPU_BUILD);
        assert_refused(&p);
        let per_layer = u128::from(2 * (64 + 4_294_967_170u64)) * u128::from(p.n_ctx);
        assert!(per_layer < u128::from(u64::MAX) && 2 * per_layer > u128::from(u64::MAX));
        assert_eq!(p.devices[0].kv_bytes, u64::MAX);
    }

    /// mla-rope-dim-max: the same latent row at the default context is 35 TB
    /// of cache, large but exact: it must be counted, not saturated.
    #[test]
    fn latent_cache_below_the_limit_is_exact() {
        let h = with_keys(
            tiny("deepseek2"),
            &[("attention.key_length", u64::from(u32::MAX))],
        );
        let s = settings(None, 1, 1, 1);
        let p = plan(&h, &s, &machine(None), CPU_BUILD);
        assert_refused(&p);
        let per_cell = 2 * u64::from(u32::MAX);
        assert_eq!(p.devices[0].kv_bytes, 2 * per_cell * u64::from(p.n_ctx));
    }

    /// The real bug behind the panics: a KV cache of 2^64 + 8 GiB (two layers
    /// of 2^63 + 4 GiB) wrapped, in a release build, to an 8 GiB sum, and with
    /// 64 GiB of RAM the plan said it fits. Saturated, it never does, even on
    /// a machine claiming 2^64 bytes of RAM.
    #[test]
    fn kv_cache_just_past_2_64_does_not_wrap_into_a_fit() {
        // Latent row 64 + (2^31 - 63) = 2^31 + 1 elements: 2^32 + 2 bytes in f16.
        let h = with_keys(
            tiny("deepseek2"),
            &[("attention.key_length", 64 + (1 << 31) - 63)],
        );
        let s = settings(Some(1 << 31), 1, 1, 1);
        let wrapped = 2 * ((1u128 << 63) + (1 << 32)) - (1 << 64);
        assert_eq!(wrapped, 8 * u128::from(GIB));
        for ram in [64 * GIB, u64::MAX] {
            let p = plan(&h, &s, &machine(Some(ram)), CPU_BUILD);
            assert_refused(&p);
            assert_eq!(p.n_ctx, 1 << 31);
            assert_eq!(p.devices[0].kv_bytes, u64::MAX, "--ram {ram}");
        }
    }
}

/// `hw_profile` found it: a unified machine's integrated GPU takes the RAM's
/// bandwidth as an assumed figure; the profile writer dropped assumed
/// figures, so the written profile read back as a GPU with no bandwidth (the
/// unknown-GPU default at plan time): another machine.
#[test]
fn a_unified_gpu_s_assumed_bandwidth_survives_a_round_trip() {
    let path = std::path::Path::new("fuzz.toml");
    use headroom_planner::hw;
    let machine = hw::parse_profile("[unified]\ngpu_limit = \"12GiB\"\n", path)
        .expect("a unified profile parses");
    assert!(machine.gpus[0].bandwidth_bytes_per_s.is_some());
    let written = hw::to_profile_toml(&machine).expect("written");
    let again = hw::parse_profile(&written, path).expect("read back");
    assert_eq!(again.gpus, machine.gpus);
}
