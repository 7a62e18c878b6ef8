//! Property tests for the memory model's size arithmetic (issue #6): profiles
//! with hyper-parameters up to 2^32 and 2^64 (more than any header the
//! reader accepts), 512 layers, and settings at their maxima, through
//! `memory::estimate` and `solve::plan`. Tests run in the release profile,
//! where an overflow wraps silently, so wrapping is looked for directly: every
//! total must be the exact sum of its parts or saturated at `u64::MAX`, the KV
//! cache must match a `u128` reference, sizes must grow with the model, and a
//! saturated size must never fit.

use std::path::Path;

use headroom_planner::arch::WindowKind;
use headroom_planner::gguf::GgmlType;
use headroom_planner::hw::{self, Overrides};
use headroom_planner::memory::{self, Context, GpuSpec, MachineSpec, Placement, RepackRules};
use headroom_planner::plan::{DeviceKind, FlashAttn, FrontEnd, Settings, Verdict};
use headroom_planner::profile::{
    Experts, Layer, LayerKind, Mla, ModelProfile, Recurrent, SlidingWindow, Tensor,
};
use headroom_planner::solve::{self, Build};
use proptest::prelude::*;

/// Mostly boundary values, as the `plan_sizes` fuzz target draws them.
fn number() -> impl Strategy<Value = u64> {
    prop_oneof![
        2 => 0..1024u64,
        1 => (0u32..64).prop_map(|s| 1u64 << s),
        1 => (0..256u64).prop_map(|d| u64::from(u32::MAX) - d),
        1 => (0..256u64).prop_map(|d| u64::MAX - d),
        1 => any::<u64>(),
    ]
}

fn number_u32() -> impl Strategy<Value = u32> {
    number().prop_map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// Which optional part of the memory model a profile exercises.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Dense,
    SlidingWindow,
    Experts,
    Latent,
    Recurrent,
}

#[derive(Debug, Clone)]
struct Hyper {
    kind: Kind,
    n_layer: u32,
    n_embd: u32,
    n_head: u32,
    n_head_kv: u32,
    head_dim_k: u32,
    head_dim_v: u32,
    n_ff: u32,
    n_vocab: u64,
    /// Window, expert count/used, latent rank/rope, recurrent sizes.
    extra: [u32; 4],
    /// Bytes and file offset of each layer's weight matrix.
    layer_bytes: u64,
    offset: u64,
    tied: bool,
}

fn hyper() -> impl Strategy<Value = Hyper> {
    (
        prop::sample::select(vec![
            Kind::Dense,
            Kind::SlidingWindow,
            Kind::Experts,
            Kind::Latent,
            Kind::Recurrent,
        ]),
        prop::sample::select(vec![1u32, 2, 7, 64, 512]),
        (
            number_u32(),
            number_u32(),
            number_u32().prop_map(|n| n.max(1)),
        ),
        (number_u32(), number_u32(), number_u32(), number()),
        prop::array::uniform4(number_u32()),
        (number(), number(), any::<bool>()),
    )
        .prop_map(
            |(kind, n_layer, (n_embd, n_head, n_head_kv), (hk, hv, n_ff, n_vocab), extra, w)| {
                Hyper {
                    kind,
                    n_layer,
                    n_embd,
                    n_head,
                    n_head_kv,
                    head_dim_k: hk,
                    head_dim_v: hv,
                    n_ff,
                    n_vocab,
                    extra,
                    layer_bytes: w.0,
                    offset: w.1,
                    tied: w.2,
                }
            },
        )
}

fn tensor(name: String, ty: GgmlType, dims: Vec<u64>, bytes: u64, offset: u64) -> Tensor {
    Tensor {
        name,
        ty,
        dims,
        bytes,
        offset,
    }
}

/// A profile built field by field, past what `profile::profile` would accept.
fn profile(h: &Hyper) -> ModelProfile {
    let n = h.n_layer as usize;
    let [a, b, c, d] = h.extra;
    let layers: Vec<Layer> = (0..n)
        .map(|il| {
            let mut tensors = vec![tensor(
                format!("blk.{il}.attn_q.weight"),
                GgmlType::Q4_0,
                vec![256, u64::from(h.n_embd)],
                h.layer_bytes,
                h.offset,
            )];
            if h.kind == Kind::Experts {
                tensors.push(tensor(
                    format!("blk.{il}.ffn_up_exps.weight"),
                    GgmlType::Q4_K,
                    vec![256, u64::from(b), u64::from(a)],
                    h.layer_bytes,
                    h.offset,
                ));
            }
            Layer { tensors }
        })
        .collect();
    let embd = tensor(
        "token_embd.weight".into(),
        GgmlType::Q4_0,
        vec![u64::from(h.n_embd), h.n_vocab],
        h.layer_bytes,
        0,
    );
    let output = (!h.tied).then(|| Tensor {
        name: "output.weight".into(),
        offset: h.offset,
        ..embd.clone()
    });
    let recurrent = h.kind == Kind::Recurrent;
    // As the reader sums them: every tensor's bytes, saturated.
    let weight_bytes = layers_bytes(&layers)
        .chain([embd.bytes])
        .chain(output.iter().map(|t| t.bytes))
        .fold(0, u64::saturating_add);
    ModelProfile {
        arch: "proptest".into(),
        name: None,
        quant: "Q4_0".into(),
        n_params: h.layer_bytes,
        n_layer: h.n_layer,
        n_embd: h.n_embd,
        n_head: vec![h.n_head; n],
        // A hybrid: every other layer recurrent.
        n_head_kv: (0..n)
            .map(|il| {
                if recurrent && il % 2 == 1 {
                    0
                } else {
                    h.n_head_kv
                }
            })
            .collect(),
        head_dim_k: h.head_dim_k,
        head_dim_v: h.head_dim_v,
        head_dim_k_swa: h.head_dim_k,
        head_dim_v_swa: h.head_dim_v,
        layer_kinds: (0..n)
            .map(|il| match h.kind {
                Kind::Recurrent if il % 2 == 1 => LayerKind::Recurrent,
                Kind::SlidingWindow if il % 6 != 5 => LayerKind::Sliding,
                Kind::Latent => LayerKind::Mla,
                _ => LayerKind::Full,
            })
            .collect(),
        nextn: 0,
        n_ff: h.n_ff,
        n_vocab: h.n_vocab,
        n_ctx_train: u64::from(a),
        swa: (h.kind == Kind::SlidingWindow).then(|| SlidingWindow {
            window: a,
            kind: WindowKind::Sliding,
            layers: (0..n).map(|il| il % 6 != 5).collect(),
        }),
        experts: (h.kind == Kind::Experts).then_some(Experts {
            count: a,
            used: c,
            shared: d,
        }),
        mla: (h.kind == Kind::Latent).then_some(Mla {
            kv_lora_rank: a,
            n_rot: b,
            v_head_dim: c,
        }),
        recurrent: recurrent.then_some(Recurrent {
            d_conv: a,
            d_inner: b,
            d_state: c,
            n_group: d,
            rwkv_state_floats: if a % 2 == 0 { 0 } else { h.offset },
        }),
        layers,
        skipped: Vec::new(),
        token_embd: Some(embd),
        output,
        globals: Vec::new(),
        weight_bytes,
        data_offset: h.offset,
    }
}

fn layers_bytes(layers: &[Layer]) -> impl Iterator<Item = u64> + '_ {
    layers
        .iter()
        .flat_map(|l| l.tensors.iter().map(|t| t.bytes))
}

fn settings() -> impl Strategy<Value = Settings> {
    let cache = prop::sample::select(vec![
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q8_0,
        GgmlType::Q4_0,
    ]);
    (
        (number_u32(), number_u32(), number_u32(), number_u32()),
        (cache.clone(), cache),
        prop::sample::select(vec![FlashAttn::Auto, FlashAttn::On, FlashAttn::Off]),
        (
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        ),
        prop::option::of(number()),
    )
        .prop_map(
            |((ctx, b, ub, np), (k, v), fa, (swa_full, mmap, repack, server, per_seq), margin)| {
                Settings {
                    n_ctx: Some(ctx.max(1)),
                    n_batch: b.max(1),
                    n_ubatch: ub.max(1),
                    n_parallel: np.max(1),
                    n_gpu_layers: None,
                    cache_type_k: k,
                    cache_type_v: v,
                    flash_attn: fa,
                    swa_full,
                    mmap,
                    repack,
                    margin_bytes: margin,
                    front_end: if server {
                        FrontEnd::Server
                    } else {
                        FrontEnd::Cli
                    },
                    logits_per_sequence: per_seq,
                    embeddings: None,
                }
            },
        )
}

/// None, one or two GPUs with any budget, any RAM and address-space limit.
fn machine() -> impl Strategy<Value = MachineSpec> {
    (
        prop::collection::vec(number(), 0..=2),
        number(),
        prop::option::of(number()),
        number_u32(),
    )
        .prop_map(|(gpus, ram, limit, threads)| MachineSpec {
            gpus: gpus
                .into_iter()
                .enumerate()
                .map(|(i, budget_bytes)| GpuSpec {
                    name: format!("GPU{i}"),
                    kind: DeviceKind::Gpu,
                    budget_bytes,
                    split_bytes: budget_bytes,
                    llama: None,
                })
                .collect(),
            repack: RepackRules::for_cpu("x86_64", &["avx2".to_string()]),
            ram_budget_bytes: ram,
            alloc_limit_bytes: limit,
            threads,
            runtime_bytes: 0,
            runtime_virtual_bytes: 0,
        })
}

fn placement(m: &MachineSpec, ngl: u32, n_cpu_moe: u32) -> Placement {
    Placement {
        n_gpu_layers: ngl,
        split: m.gpus.iter().map(|_| 1.0).collect(),
        n_cpu_moe,
    }
}

/// `ggml_row_size` in `u128`, rows that are not whole blocks rounded up.
fn row(ty: GgmlType, n: u128) -> u128 {
    n.div_ceil(u128::from(ty.block_size())) * u128::from(ty.type_size())
}

/// The KV cache of a dense model (every layer attention, no window, no
/// latent row), exactly: K and V rows per cell, cells per stream, streams.
fn exact_dense_kv(p: &ModelProfile, ctx: &Context) -> u128 {
    let kv_heads = u128::from(p.n_head_kv[0]);
    let k = u128::from(p.head_dim_k) * kv_heads;
    let v = u128::from(p.head_dim_v) * kv_heads;
    let per_layer = (row(ctx.type_k, k) + row(ctx.type_v, v))
        * u128::from(ctx.n_ctx_seq)
        * u128::from(ctx.n_seq);
    per_layer * p.layers.len() as u128
}

fn saturate(x: u128) -> u64 {
    u64::try_from(x).unwrap_or(u64::MAX)
}

/// Every size of an estimate: per device (total, weights, KV, compute), RAM.
fn sizes(e: &memory::Estimate) -> Vec<u64> {
    let mut v: Vec<u64> = e
        .devices
        .iter()
        .flat_map(|d| [d.total_bytes, d.weights_bytes, d.kv_bytes, d.compute_bytes])
        .collect();
    v.extend([e.anonymous_bytes, e.allocated_bytes]);
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Totals are the exact sums of their parts or saturated, never wrapped;
    /// a dense model's KV cache is the exact product or saturated.
    #[test]
    fn totals_are_exact_or_saturated(
        h in hyper(),
        s in settings(),
        m in machine(),
        ngl in number_u32(),
        n_cpu_moe in number_u32(),
    ) {
        let p = profile(&h);
        let ctx = Context::resolve(&s, s.n_ctx.unwrap_or(4096));
        let e = memory::estimate(&p, &s, &ctx, &placement(&m, ngl, n_cpu_moe), &m);
        for d in &e.devices {
            let parts = d.parts();
            let exact: u128 = parts.iter().map(|&b| u128::from(b)).sum();
            prop_assert_eq!(d.total_bytes, saturate(exact), "{} {:?}", d.name, parts);
        }
        // The resident and allocated sums hold the CPU's KV cache.
        prop_assert!(e.anonymous_bytes >= e.devices[0].kv_bytes);
        prop_assert!(e.allocated_bytes >= e.devices[0].kv_bytes.max(p.file_bytes()));
        if h.kind == Kind::Dense {
            let kv: u128 = e.devices.iter().map(|d| u128::from(d.kv_bytes)).sum();
            prop_assert_eq!(saturate(kv), saturate(exact_dense_kv(&p, &ctx)));
        }
    }

    /// A bigger model or context never needs less: a wrapped sum would.
    #[test]
    fn sizes_grow_with_the_model(
        h in hyper(),
        s in settings(),
        m in machine(),
        ngl in number_u32(),
        which in 0..6usize,
        grow in number_u32(),
    ) {
        let p = profile(&h);
        let mut q = p.clone();
        let mut t = s.clone();
        match which {
            0 => t.n_ctx = t.n_ctx.map(|c| c.saturating_add(grow)),
            1 => q.head_dim_k = q.head_dim_k.saturating_add(grow),
            2 => q.head_dim_v = q.head_dim_v.saturating_add(grow),
            3 => q.n_embd = q.n_embd.saturating_add(grow),
            4 => q.n_ff = q.n_ff.saturating_add(grow),
            _ => q.n_vocab = q.n_vocab.saturating_add(u64::from(grow)),
        }
        let pl = placement(&m, ngl, 0);
        let small = memory::estimate(&p, &s, &Context::resolve(&s, s.n_ctx.unwrap_or(1)), &pl, &m);
        let big = memory::estimate(&q, &t, &Context::resolve(&t, t.n_ctx.unwrap_or(1)), &pl, &m);
        for (i, (a, b)) in sizes(&small).into_iter().zip(sizes(&big)).enumerate() {
            prop_assert!(b >= a, "grew field {} by {}: size {} {} < {} (small {:?} big {:?})", which, grow, i, b, a, sizes(&small), sizes(&big));
        }
    }

    /// Through the solver: a saturated size never fits, whatever the budgets
    /// (`--ram` of 2^64 - 1 included), and the speeds stay finite for JSON.
    #[test]
    fn saturated_plans_do_not_fit(
        h in hyper(),
        s in settings(),
        ram in number().prop_map(|r| r.max(1)),
        // Only lists `apply_overrides` accepts: no GPU, `--vram 0`, or sizes
        // that are all non-zero (a list mixing zero and non-zero is refused).
        vram in prop_oneof![
            Just(vec![0]),
            prop::collection::vec(number().prop_map(|v| v.max(1)), 0..=2),
        ],
        gpu in any::<bool>(),
    ) {
        let p = profile(&h);
        let base = hw::parse_profile(
            include_str!("fixtures/hw/gpu-8g-ram-16g.toml"),
            Path::new("gpu-8g-ram-16g.toml"),
        )
        .expect("the fixture profile parses");
        let o = Overrides { ram_bytes: Some(ram), vram_bytes: Some(vram), profile: None };
        let machine = hw::apply_overrides(base, &o).expect("valid overrides by construction");
        let plan = solve::plan(&p, "m.gguf", &s, &machine, Build { gpu });
        let saturated = plan.devices.iter().any(|d| d.total_bytes == u64::MAX)
            || plan.ram.anonymous_bytes == u64::MAX
            || plan.ram.allocated_bytes == u64::MAX;
        if saturated {
            prop_assert_eq!(
                plan.verdict,
                Verdict::DoesNotFit,
                "devices {:?}, ram {:?}",
                plan.devices.iter().map(|d| d.total_bytes).collect::<Vec<_>>(),
                plan.ram
            );
        }
        let speeds = [
            plan.est_decode_tokens_per_s,
            plan.est_prompt_tokens_per_s,
            plan.est_full_gpu_decode_tokens_per_s.unwrap_or(0.0),
        ];
        prop_assert!(speeds.iter().all(|x| x.is_finite() && *x >= 0.0), "{:?}", speeds);
        let json = serde_json::to_value(&plan).expect("the plan serializes");
        prop_assert!(json["est_decode_tokens_per_s"].is_number());
    }
}
