//! llama.cpp's own memory accounting (through the C++ shim) on synthetic
//! models: proves every synthetic shape × mix is a file llama.cpp accepts, that
//! a `no_alloc` load reads no weights yet sizes them exactly, and that the
//! simulated numbers equal a real load's.
//!
//! Run with `cargo test --release -p headroom --test cli accounting_smoke:: -- --nocapture`
//! to print the per-buffer numbers the planner is calibrated against.

use headroom::llama::{AccountingParams, Breakdown, FlashAttn, TensorOverride, breakdown};
use headroom_planner::gguf::Header;
use headroom_planner::synth::zoo::{self, Model};
use headroom_planner::synth::{self, Mix, Shape};
use std::path::Path;

/// ggml's CPU buffer alignment (`TENSOR_ALIGNMENT` in ggml-backend.cpp): each
/// tensor's allocation is rounded up to it.
const CPU_ALIGNMENT: u64 = 32;

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn aligned_tensor_bytes(h: &Header) -> u64 {
    h.tensors
        .iter()
        .map(|t| t.bytes.div_ceil(CPU_ALIGNMENT) * CPU_ALIGNMENT)
        .sum()
}

fn print(label: &str, b: &Breakdown) {
    println!(
        "{label}: total {:.2} MiB, n_ctx {}, flash_attn {:?}",
        mib(b.total()),
        b.info.n_ctx,
        b.info.flash_attn
    );
    for r in &b.buffers {
        println!(
            "    {:<12} model {:>14} context {:>12} compute {:>12}",
            r.name, r.model, r.context, r.compute
        );
    }
}

fn query(path: &Path, n_ctx: u32, fa: FlashAttn) -> Breakdown {
    let p = AccountingParams {
        n_ctx,
        flash_attn: fa,
        ..AccountingParams::for_model(path)
    };
    match breakdown(&p) {
        Ok(b) => b,
        Err(e) => panic!("llama.cpp rejected {}: {e}", path.display()),
    }
}

#[test]
fn every_synthetic_model_loads_and_weights_are_sized_exactly() {
    let dir = tempfile::tempdir().expect("temp dir");
    for shape in Shape::ALL {
        let spec = shape.spec();
        for mix in Mix::ALL {
            let path = dir
                .path()
                .join(format!("{}-{}.gguf", shape.name(), mix.name()));
            let h = synth::write_sparse(&path, shape, mix).expect("write synthetic model");
            for fa in [FlashAttn::Auto, FlashAttn::Off] {
                let b = query(&path, 4096, fa);
                print(&format!("{} {} fa={fa:?}", shape.name(), mix.name()), &b);

                // Weights: llama.cpp's model buffers hold exactly the file's
                // tensors, each padded to the buffer alignment.
                assert_eq!(
                    b.model_total(),
                    aligned_tensor_bytes(&h),
                    "{} {}: model buffers vs tensor bytes",
                    shape.name(),
                    mix.name()
                );
                assert_eq!(b.info.model_size, h.total_tensor_bytes().unwrap_or(0));
                assert_eq!(b.info.n_layer, spec.n_layer as i32);
                assert_eq!(b.info.n_vocab as u64, spec.n_vocab);
                assert_eq!(b.info.n_ctx, 4096);
                assert_eq!(b.info.flash_attn, Some(fa != FlashAttn::Off));
                assert!(b.buffers.iter().all(|r| r.in_ram()), "CPU-only build");

                let context: u64 = b.buffers.iter().map(|r| r.context).sum();
                let compute: u64 = b.buffers.iter().map(|r| r.compute).sum();
                assert!(compute > 0, "a compute buffer is always reserved");
                if spec.sliding_window.is_none() {
                    // A plain KV cache: K and V, every layer, every cell, F16.
                    let kv =
                        2 * u64::from(spec.n_layer) * 4096 * spec.n_head_kv * spec.head_dim * 2;
                    assert_eq!(context, kv, "{} KV cache", shape.name());
                } else {
                    // SWA layers keep fewer cells than the context.
                    let full =
                        2 * u64::from(spec.n_layer) * 4096 * spec.n_head_kv * spec.head_dim * 2;
                    assert!(
                        context > 0 && context < full,
                        "{} SWA cache {context}",
                        shape.name()
                    );
                }
            }
        }
    }
}

/// Every architecture of the zoo is a file llama.cpp loads, and its model
/// buffers hold exactly the file's tensors but the MTP blocks llama.cpp
/// skips without `load_mtp` (which the planner leaves out too).
#[test]
fn every_zoo_architecture_loads_and_skipped_blocks_are_not_allocated() {
    let dir = tempfile::tempdir().expect("temp dir");
    for m in Model::ALL {
        let path = dir.path().join(format!("{}.gguf", m.name()));
        let h = zoo::write_sparse(&path, m, m.file_type()).expect("write synthetic model");
        let b = query(&path, 4096, FlashAttn::Auto);
        print(m.name(), &b);
        let p = headroom_planner::profile::profile(&h).expect("profile");
        let skipped: Vec<&str> = p.skipped.iter().map(|t| t.name.as_str()).collect();
        let loaded: u64 = h
            .tensors
            .iter()
            .filter(|t| !skipped.contains(&t.name.as_str()))
            .map(|t| t.bytes.div_ceil(CPU_ALIGNMENT) * CPU_ALIGNMENT)
            .sum();
        // An architecture that creates its tied output before the token
        // embedding (gemma3n) finds nothing to share it with on the CPU:
        // llama.cpp allocates the embedding a second time.
        let tied_twice = headroom_planner::arch::TIED_OUTPUT_CREATED_FIRST.contains(&m.arch())
            && !h.tensors.iter().any(|t| t.name == "output.weight");
        let loaded = loaded
            + if tied_twice {
                h.tensors
                    .iter()
                    .find(|t| t.name == "token_embd.weight")
                    .map_or(0, |t| t.bytes.div_ceil(CPU_ALIGNMENT) * CPU_ALIGNMENT)
            } else {
                0
            };
        assert_eq!(b.model_total(), loaded, "{}: model buffers", m.name());
        let mtp = h.get_u64(&format!("{}.nextn_predict_layers", m.arch()));
        assert_eq!(
            skipped.is_empty(),
            mtp.is_none(),
            "{}: MTP blocks",
            m.name()
        );
    }
}

#[test]
fn simulated_numbers_equal_a_real_load() {
    // llama-1b is small enough to really load (sparse file: the "weights" read
    // back as zeros). Without mmap, real buffers are allocated per buffer type
    // exactly as the simulation sized them.
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("llama-1b.gguf");
    synth::write_sparse(&path, Shape::Llama1B, Mix::Q4KM).expect("write synthetic model");
    let sim = AccountingParams {
        n_ctx: 512,
        ..AccountingParams::for_model(&path)
    };
    let real = AccountingParams {
        no_alloc: false,
        use_mmap: false,
        ..sim.clone()
    };
    let a = breakdown(&sim).expect("simulated");
    let b = breakdown(&real).expect("real load");
    print("llama-1b Q4_K_M simulated", &a);
    print("llama-1b Q4_K_M real", &b);
    assert_eq!(a, b);
}

#[test]
fn only_use_extra_bufts_moves_weights_out_of_cpu_repack() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("llama-1b.gguf");
    let h = synth::write_sparse(&path, Shape::Llama1B, Mix::Q4KM).expect("write synthetic model");
    let base = AccountingParams::for_model(&path);
    let with_repack = breakdown(&base).expect("default");
    let repacked = with_repack.get("CPU_REPACK").map_or(0, |r| r.model);
    assert!(repacked > 0, "Q4_K matmul weights are repacked by default");

    let no_extra = breakdown(&AccountingParams {
        use_extra_bufts: false,
        ..base.clone()
    })
    .expect("no extra bufts");
    print("llama-1b Q4_K_M use_extra_bufts=false", &no_extra);
    assert!(no_extra.get("CPU_REPACK").is_none());
    assert_eq!(no_extra.model_total(), aligned_tensor_bytes(&h));

    // `-ot ffn_.*=CPU` is no way to avoid repacking: llama.cpp treats an
    // override to CPU as "the best CPU buffer type", extra types included
    // (llama-model-loader.cpp), so on a CPU-only build nothing moves.
    let pinned = breakdown(&AccountingParams {
        tensor_overrides: vec![TensorOverride {
            pattern: "ffn_.*".into(),
            buffer_type: "CPU".into(),
        }],
        ..base
    })
    .expect("override");
    assert_eq!(pinned, with_repack);
}

#[test]
fn real_gemma_270m() {
    // The project's real test model, found as every other test finds it.
    let path = headroom::source::demo::demo_model().unwrap_or_else(|e| panic!("demo model: {e:#}"));
    let h = headroom_planner::gguf::read_header_from_file(&path).expect("header");
    let b = query(&path, 512, FlashAttn::Auto);
    print("gemma-3-270m Q4_K_M n_ctx 512", &b);
    assert_eq!(b.model_total(), aligned_tensor_bytes(&h));
    // The vocabulary (262,144 × 4 bytes of logits for 512 tokens) dominates
    // the compute buffer: 512 MiB of it.
    let compute: u64 = b.buffers.iter().map(|r| r.compute).sum();
    assert!(compute > 512 * 1024 * 1024, "compute {compute}");
}
