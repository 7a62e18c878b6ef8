//! The split `estimate` held to the single function it replaced (copied here
//! verbatim as `estimate_orig`), over random models, settings, placements and
//! machines: the split must not change one byte. Kept only until each piece
//! has its own tests.
use super::*;
use crate::plan::FlashAttn;
/// Estimate allocation and residency for one placement and context.
#[must_use]
fn estimate_orig(
    p: &ModelProfile,
    settings: &Settings,
    ctx: &Context,
    placement: &Placement,
    m: &MachineSpec,
) -> Estimate {
    let n_layer = p.n_layer;
    let n_gpu = m.gpus.len();
    let uses_gpu = n_gpu > 0 && placement.n_gpu_layers > 0;
    // A CUDA build puts the CUDA_Host buffer type ahead of the CPU's extra types,
    // and with mmap such weights land in plain CPU memory: no repacking when a GPU
    // backend is present (`make_cpu_buft_list`, `llama-model-loader.cpp:1271`).
    let repack_active = settings.repack && n_gpu == 0;

    let mut cpu_plain = 0u64;
    let mut cpu_repack = 0u64;
    // File range [first, last) of the weights in the plain CPU buffer: with mmap that
    // range stays mapped (and populated) after the load (`unmap_fragment`).
    let mut map_lo = u64::MAX;
    let mut map_hi = 0u64;
    let mut gpu_weights = vec![0u64; n_gpu];
    let mut cpu_active = 0u64;
    let mut gpu_active = vec![0u64; n_gpu];
    let mut place = |t: &Tensor, dev: Option<usize>, active_share: f64| {
        let active = (t.bytes as f64 * active_share) as u64;
        match dev {
            Some(g) if g < n_gpu => {
                gpu_weights[g] = sum([gpu_weights[g], cuda_alloc_bytes(t)]);
                gpu_active[g] = sum([gpu_active[g], active]);
            }
            _ => {
                if repack_active && m.repack.repacks(t) {
                    cpu_repack = sum([cpu_repack, t.bytes]);
                } else {
                    cpu_plain = sum([cpu_plain, pad(t.bytes, 32)]);
                    map_lo = map_lo.min(t.offset);
                    map_hi = map_hi.max(sum([t.offset, t.bytes]));
                }
                cpu_active = sum([cpu_active, active]);
            }
        }
    };
    let expert_share = p
        .experts
        .map_or(1.0, |e| f64::from(e.used) / f64::from(e.count.max(1)));
    for (il, layer) in p.layers.iter().enumerate() {
        let il = il as u32;
        let dev = placement.device_of(n_layer, il);
        for t in &layer.tensors {
            let expert = t.is_expert();
            let d = if expert && il < placement.n_cpu_moe {
                None
            } else {
                dev
            };
            place(t, d, if expert { expert_share } else { 1.0 });
        }
    }
    let out_dev = placement.device_of(n_layer, n_layer);
    // The input layer (token embedding) always stays on the CPU; the logits read the
    // output matrix, or the tied embedding when there is none.
    if let Some(t) = &p.token_embd {
        place(t, None, if p.output.is_none() { 1.0 } else { 0.0 });
    }
    if let Some(t) = &p.output {
        place(t, out_dev, 1.0);
    }
    for t in &p.globals {
        place(t, out_dev, 1.0);
    }
    if p.output.is_none() && out_dev.is_some() {
        // A tied output on the GPU: llama.cpp loads a GPU copy of the embedding for the logits.
        if let Some(t) = &p.token_embd
            && let Some(g) = out_dev
        {
            gpu_weights[g] = sum([gpu_weights[g], cuda_alloc_bytes(t)]);
            gpu_active[g] = sum([gpu_active[g], t.bytes]);
            cpu_active -= t.bytes.min(cpu_active);
        }
    }

    // A tied output is a second tensor over the same data; as a matrix-product weight
    // it may repack, and then it is held twice (CPU for GET_ROWS, CPU_REPACK for logits).
    let tied_repack = match (&p.output, &p.token_embd, out_dev) {
        (None, Some(t), None) if repack_active => {
            let as_output = Tensor {
                name: "output.weight".into(),
                ..t.clone()
            };
            if m.repack.repacks(&as_output) {
                t.bytes
            } else {
                0
            }
        }
        _ => 0,
    };
    cpu_repack = sum([cpu_repack, tied_repack]);

    // KV cache: each layer's cache on that layer's device (offload_kqv on).
    let mut cpu_kv = 0u64;
    let mut gpu_kv = vec![0u64; n_gpu];
    for il in 0..p.layers.len() {
        let b = kv_bytes_layer(p, ctx, il);
        match placement.device_of(n_layer, il as u32) {
            Some(g) if g < n_gpu => gpu_kv[g] = sum([gpu_kv[g], b]),
            _ => cpu_kv = sum([cpu_kv, b]),
        }
    }

    // Compute buffers.
    let c = compute_parts(p, ctx);
    let layers_gpu = placement.layers_per_gpu(n_layer);
    let cpu_layers = n_layer - layers_gpu.iter().sum::<u32>();
    // The output stage: the last layer's residual tensors and the logits.
    let output_stage = sum([product([3, c.et4]), c.logits]);
    let cpu_compute_alloc = if uses_gpu {
        let mut b = c.inputs;
        if cpu_layers > 0 {
            b = sum([b, c.layer_peak]);
        }
        if out_dev.is_none() {
            b = sum([b, output_stage]);
        }
        b
    } else {
        sum([c.inputs, c.layer_peak.max(output_stage)])
    };
    let gpu_compute: Vec<u64> = (0..n_gpu)
        .map(|g| {
            if layers_gpu.get(g).copied().unwrap_or(0) == 0 && out_dev != Some(g) {
                return 0;
            }
            let b = sum([c.inputs, c.layer_peak]);
            if out_dev == Some(g) {
                b.max(sum([c.inputs, output_stage]))
            } else {
                b
            }
        })
        .collect();
    // The host output buffer (logits for n_seq outputs at start; not in llama.cpp's breakdown).
    let output_buf = product([p.n_vocab, u64::from(ctx.n_seq), 4]);

    // Residency: what RAM really holds at the peak.
    let mapped_bytes = if settings.mmap && map_hi > map_lo {
        map_hi - map_lo
    } else {
        0
    };
    let vocab_overhead = product([p.n_vocab, overhead::PER_TOKEN]);
    let cuda_host = if uses_gpu { overhead::CUDA_HOST } else { 0 };
    let base = sum([overhead::CPU_BASE, vocab_overhead, cuda_host]);
    // The compute buffer is touched only as far as a real batch reaches: the
    // activations of a full ubatch, and one logits row per sequence.
    let cpu_compute_touched = if cpu_layers > 0 || !uses_gpu {
        sum([c.inputs, c.layer_peak])
    } else {
        c.inputs
    };
    // Without flash attention the CPU converts the whole KQ matrix to f16 in its work
    // buffer (`ggml_graph_plan`): half the KQ tensor, outside every llama.cpp buffer.
    let n_head = u64::from(p.n_head.iter().copied().max().unwrap_or(0));
    let work_buf = if !ctx.flash_attn && (cpu_layers > 0 || !uses_gpu) {
        product([u64::from(ctx.n_ctx_seq), u64::from(ctx.n_tokens), n_head, 2])
    } else {
        0
    };
    let cpu_plain_anon = if settings.mmap { 0 } else { cpu_plain };
    let anonymous_bytes = sum([
        cpu_repack,
        cpu_plain_anon,
        cpu_kv,
        cpu_compute_touched.min(cpu_compute_alloc),
        work_buf,
        output_buf,
        base,
    ]);

    let threads = u64::from(m.threads.max(1));
    let allocated_bytes = sum([
        p.file_bytes(),
        cpu_repack,
        cpu_plain_anon,
        cpu_kv,
        cpu_compute_alloc,
        work_buf,
        output_buf,
        overhead::VIRTUAL_BASE,
        product([threads, overhead::VIRTUAL_PER_THREAD]),
    ]);

    let margin_ram = settings
        .margin_bytes
        .unwrap_or_else(|| (m.ram_budget_bytes / 20).max(overhead::RAM_MARGIN_MIN));
    let mut devices = Vec::with_capacity(1 + n_gpu);
    let cpu_buf_name = if uses_gpu { "CUDA_Host" } else { "CPU" };
    let mut cpu_buffers = vec![BufferUse {
        name: "CPU".into(),
        model_bytes: cpu_plain,
        context_bytes: cpu_kv,
        compute_bytes: if uses_gpu { 0 } else { cpu_compute_alloc },
    }];
    if uses_gpu {
        cpu_buffers.push(BufferUse {
            name: cpu_buf_name.into(),
            model_bytes: 0,
            context_bytes: 0,
            compute_bytes: cpu_compute_alloc,
        });
    }
    if cpu_repack > 0 {
        cpu_buffers.push(BufferUse {
            name: "CPU_REPACK".into(),
            model_bytes: cpu_repack,
            context_bytes: 0,
            compute_bytes: 0,
        });
    }
    let cpu_weights = sum([cpu_plain, cpu_repack]);
    let cpu_compute = sum([cpu_compute_alloc, output_buf]);
    devices.push(DeviceUse {
        name: "CPU".into(),
        kind: DeviceKind::Cpu,
        budget_bytes: m.ram_budget_bytes,
        weights_bytes: cpu_weights,
        kv_bytes: cpu_kv,
        compute_bytes: cpu_compute,
        overhead_bytes: base,
        margin_bytes: margin_ram,
        total_bytes: sum([cpu_weights, cpu_kv, cpu_compute, base, margin_ram]),
        n_layers: cpu_layers,
        buffers: cpu_buffers,
    });
    for (g, spec) in m.gpus.iter().enumerate() {
        let overhead = match spec.kind {
            DeviceKind::Unified => overhead::UNIFIED_CONTEXT,
            _ => overhead::CUDA_CONTEXT,
        };
        let used = sum([gpu_weights[g], gpu_kv[g], gpu_compute[g]]);
        let (overhead, margin) = if used == 0 {
            (0, 0)
        } else {
            (
                overhead,
                settings.margin_bytes.unwrap_or(overhead::GPU_MARGIN),
            )
        };
        devices.push(DeviceUse {
            name: spec.name.clone(),
            kind: spec.kind,
            budget_bytes: spec.budget_bytes,
            weights_bytes: gpu_weights[g],
            kv_bytes: gpu_kv[g],
            compute_bytes: gpu_compute[g],
            overhead_bytes: overhead,
            margin_bytes: margin,
            total_bytes: sum([used, overhead, margin]),
            n_layers: layers_gpu.get(g).copied().unwrap_or(0),
            buffers: vec![BufferUse {
                name: format!("CUDA{g}"),
                model_bytes: gpu_weights[g],
                context_bytes: gpu_kv[g],
                compute_bytes: gpu_compute[g],
            }],
        });
    }
    let mut active_bytes = vec![cpu_active];
    active_bytes.extend(gpu_active);
    Estimate {
        ctx: *ctx,
        devices,
        anonymous_bytes,
        mapped_bytes,
        // Repacked weights are read from the mapping once, at load; only the
        // weights used in place must stay in the page cache while it runs.
        mapped_working_bytes: if settings.mmap {
            cpu_plain.min(mapped_bytes)
        } else {
            0
        },
        allocated_bytes,
        active_bytes,
    }
}

use crate::profile::{self, ModelProfile};
use crate::synth::{self, Mix, Shape};
use proptest::prelude::*;
use std::sync::OnceLock;

fn profiles() -> &'static Vec<ModelProfile> {
    static P: OnceLock<Vec<ModelProfile>> = OnceLock::new();
    P.get_or_init(|| {
        let mut v = Vec::new();
        for s in Shape::ALL.into_iter().chain([Shape::Llama70B]) {
            for m in Mix::ALL {
                v.push(profile::profile(&synth::build(s, m).unwrap()).unwrap());
            }
        }
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    #[test]
    fn split_estimate_equals_original(
        pi in 0usize..18,
        n_ctx in prop_oneof![1u32..70000, Just(u32::MAX)],
        np in 0u32..300,
        ub in 1u32..4096, b in 1u32..4096,
        fa in 0u8..3, swa_full: bool, mmap: bool, repack: bool,
        margin in proptest::option::of(0u64..(1 << 40)),
        ctk in 0usize..4, ctv in 0usize..4,
        ngl in 0u32..100, n_cpu_moe in 0u32..60,
        gpus in proptest::collection::vec((1u64..(1u64 << 40), any::<bool>()), 0..3),
        extra_split: bool, zero_split: bool,
        ram in 0u64..(1u64 << 42), threads in 0u32..64, avx2: bool,
    ) {
        let p = &profiles()[pi];
        let types = [GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::F32];
        let s = Settings {
            n_ctx: Some(n_ctx), n_batch: b, n_ubatch: ub, n_parallel: np, n_gpu_layers: None,
            cache_type_k: types[ctk], cache_type_v: types[ctv],
            flash_attn: [FlashAttn::Auto, FlashAttn::On, FlashAttn::Off][fa as usize],
            swa_full, mmap, repack, margin_bytes: margin,
        };
        let ctx = Context::resolve(&s, n_ctx);
        let mut split: Vec<f64> = gpus.iter().map(|g| g.0 as f64).collect();
        if extra_split && p.output.is_some() { split.push(1e9); }
        if zero_split { split.iter_mut().for_each(|x| *x = 0.0); }
        let pl = Placement { n_gpu_layers: ngl, split, n_cpu_moe };
        let m = MachineSpec {
            gpus: gpus.iter().enumerate().map(|(i, g)| GpuSpec {
                name: format!("g{i}"),
                kind: if g.1 { DeviceKind::Gpu } else { DeviceKind::Unified },
                budget_bytes: g.0,
            }).collect(),
            repack: if avx2 { RepackRules::for_cpu("x86_64", &["avx2".into()]) } else { RepackRules::default() },
            ram_budget_bytes: ram, alloc_limit_bytes: None, threads,
        };
        prop_assert_eq!(estimate(p, &s, &ctx, &pl, &m), estimate_orig(p, &s, &ctx, &pl, &m));
    }
}
