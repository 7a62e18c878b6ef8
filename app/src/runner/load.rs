//! From a plan to the exact llama.cpp parameters that execute it.
//!
//! One value, [`AccountingParams`], describes the load: the runner hands it to
//! llama.cpp's `no_alloc` accounting (the cross-check before the real load)
//! and converts the very same value into llama-cpp-2's model and context
//! parameters for the real load, so the check and the load cannot drift apart.
//!
//! llama-cpp-2 0.1.160 has no setter for `tensor_split` or `use_extra_bufts`,
//! and only CPU tensor-buffer overrides (enough for `--n-cpu-moe`). Several
//! GPUs get llama.cpp's default split by free memory, which is what the
//! planner assumes (the accounting cross-check would catch a difference);
//! `--no-repack` cannot be executed and is refused here, with the reason,
//! rather than run approximately.

use std::ffi::CString;
use std::num::NonZeroU32;
use std::pin::Pin;

use anyhow::{Result, bail};
use headroom_planner::plan::{Plan, Settings};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::model::params::{LlamaModelParams, LlamaSplitMode};

use crate::llama::{AccountingParams, FlashAttn, SplitMode, TensorOverride};

/// Why `--no-repack` cannot be run.
pub const NO_REPACK: &str = "--no-repack cannot be run by this build: llama-cpp-2 0.1.160 cannot turn off llama.cpp's CPU repacking (plan --no-repack still plans it for llama.cpp's own tools)";

/// llama.cpp's pattern for the MoE expert tensors of layer `il` (`--n-cpu-moe`).
#[must_use]
pub fn expert_pattern(il: u32) -> String {
    format!("blk\\.{il}\\.ffn_(up|down|gate|gate_up)_(ch|)exps")
}

/// The load that executes `plan` (from `settings`, the options it was made
/// with), with `threads` CPU threads.
///
/// # Errors
/// A plan this build cannot execute exactly (see the module docs).
pub fn spec_for(plan: &Plan, settings: &Settings, threads: i32) -> Result<AccountingParams> {
    let path = std::path::Path::new(&plan.model.path);
    let mut p = AccountingParams::from_settings(
        path,
        settings,
        plan.n_ctx,
        i32::try_from(plan.n_gpu_layers).unwrap_or(i32::MAX),
    )?;
    p.no_alloc = true;
    p.use_mmap = plan.settings.mmap;
    p.n_batch = plan.settings.n_batch;
    p.n_ubatch = plan.settings.n_ubatch;
    p.n_seq_max = plan.n_parallel;
    p.flash_attn = if plan.settings.flash_attn {
        FlashAttn::On
    } else {
        FlashAttn::Off
    };
    p.n_threads = threads;
    let on_gpus = plan.settings.tensor_split.len();
    // Several GPUs: llama.cpp's default split is by free memory, which is what
    // the planner assumes; the accounting cross-check catches a difference.
    p.split_mode = if on_gpus > 1 {
        SplitMode::Layer
    } else {
        SplitMode::None
    };
    p.tensor_overrides = (0..plan.n_cpu_moe)
        .map(|il| TensorOverride {
            pattern: expert_pattern(il),
            buffer_type: "CPU".into(),
        })
        .collect();
    if !plan.settings.repack {
        // llama-cpp-2 has no setter for use_extra_bufts, and a CPU tensor
        // override does not help: llama.cpp re-selects the extra buffer types
        // for tensors overridden to the CPU (tests/run_load.rs shows it).
        bail!(NO_REPACK);
    }
    Ok(p)
}

/// llama-cpp-2's model parameters, with the override patterns they point into.
pub struct ModelParams {
    /// The parameters (pinned: they refer to themselves).
    pub params: Pin<Box<LlamaModelParams>>,
    // llama-cpp-2 stores raw pointers to these; their heap buffers stay put
    // when the Vec moves, and they live as long as the params.
    _patterns: Vec<CString>,
}

/// llama-cpp-2's model parameters for `spec`, with an optional load-progress
/// callback (return false to cancel the load).
///
/// # Errors
/// A field llama-cpp-2 cannot set (see the module docs).
pub fn model_params(
    spec: &AccountingParams,
    progress: Option<Box<dyn FnMut(f32) -> bool>>,
) -> Result<ModelParams> {
    if !spec.tensor_split.is_empty() {
        bail!("an explicit tensor split cannot be set through llama-cpp-2 0.1.160");
    }
    if !spec.use_extra_bufts {
        bail!(
            "use_extra_bufts=false cannot be set through llama-cpp-2 0.1.160 (use CPU overrides)"
        );
    }
    if spec.no_host || spec.kv_unified || !spec.offload_kqv || !spec.op_offload {
        bail!("a context option this runner does not pass was set");
    }
    let split = match spec.split_mode {
        SplitMode::None => LlamaSplitMode::None,
        SplitMode::Layer => LlamaSplitMode::Layer,
        SplitMode::Row => LlamaSplitMode::Row,
        SplitMode::Tensor => bail!("tensor-parallel split is not supported by this runner"),
    };
    let mut params = LlamaModelParams::default()
        .with_n_gpu_layers(u32::try_from(spec.n_gpu_layers.max(0)).unwrap_or(0))
        .with_main_gpu(spec.main_gpu)
        .with_split_mode(split)
        .with_use_mmap(spec.use_mmap);
    if let Some(cb) = progress {
        params = params.with_progress_callback(cb);
    }
    let mut params = Box::pin(params);
    let mut patterns = Vec::with_capacity(spec.tensor_overrides.len());
    for o in &spec.tensor_overrides {
        if o.buffer_type != "CPU" {
            bail!(
                "tensor override {}={} cannot be set through llama-cpp-2 (CPU only)",
                o.pattern,
                o.buffer_type
            );
        }
        let pattern = CString::new(o.pattern.as_str())
            .map_err(|_| anyhow::anyhow!("tensor override pattern contains NUL"))?;
        params.as_mut().add_cpu_buft_override(&pattern);
        patterns.push(pattern);
    }
    Ok(ModelParams {
        params,
        _patterns: patterns,
    })
}

/// llama-cpp-2's context parameters for `spec`.
///
/// # Errors
/// `spec` sets `n_outputs_max` and llama-cpp-2's parameters are not laid out
/// as llama.cpp's (see [`with_n_outputs_max`]).
pub fn context_params(spec: &AccountingParams) -> Result<LlamaContextParams> {
    let fa = match spec.flash_attn {
        FlashAttn::Auto => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_AUTO,
        FlashAttn::Off => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_DISABLED,
        FlashAttn::On => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_ENABLED,
    };
    let mut c = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(spec.n_ctx))
        .with_n_batch(spec.n_batch)
        .with_n_ubatch(spec.n_ubatch)
        .with_n_seq_max(spec.n_seq_max)
        .with_type_k(spec.type_k)
        .with_type_v(spec.type_v)
        .with_flash_attention_policy(fa)
        .with_swa_full(spec.swa_full);
    if spec.n_threads > 0 {
        c = c
            .with_n_threads(spec.n_threads)
            .with_n_threads_batch(spec.n_threads);
    }
    if spec.n_outputs_max > 0 {
        c = with_n_outputs_max(c, spec.n_outputs_max)?;
    }
    Ok(c)
}

/// `c` with llama.cpp's `n_outputs_max` set, which llama-cpp-2 0.1.160 has
/// no setter for. Its `LlamaContextParams` is a struct of one field, llama.cpp's
/// `llama_context_params`; Rust does not promise such a wrapper the field's
/// layout, so before writing through it this checks that three fields set by
/// the crate's own setters read back at llama.cpp's offsets, and refuses
/// otherwise (a failed load, not a wrong one). Hand-written because the
/// alternative, a context without it, reserves a logits row per token of
/// the batch: 512 MiB for Gemma 3 that headroom never reads.
///
/// # Errors
/// The layout check fails.
pub fn with_n_outputs_max(c: LlamaContextParams, n: u32) -> Result<LlamaContextParams> {
    use llama_cpp_sys_2::llama_context_params as Raw;
    // `transmute` checks the sizes at compile time.
    // SAFETY: both are plain data of the same size; `Raw` has no invalid bit
    // patterns (integers, floats, pointers, function pointers as `Option`).
    let raw = |p: LlamaContextParams| unsafe { std::mem::transmute::<LlamaContextParams, Raw>(p) };
    let probe = raw(LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(0x1357_9BDF))
        .with_n_batch(0x2468_ACE0)
        .with_n_seq_max(0x0102_0304));
    if (probe.n_ctx, probe.n_batch, probe.n_seq_max) != (0x1357_9BDF, 0x2468_ACE0, 0x0102_0304) {
        bail!(
            "cannot set llama.cpp's n_outputs_max: llama-cpp-2's context parameters are not laid out as llama.cpp's"
        );
    }
    let mut r = raw(c);
    r.n_outputs_max = n;
    // SAFETY: the inverse of the checked conversion above.
    Ok(unsafe { std::mem::transmute::<Raw, LlamaContextParams>(r) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn n_outputs_max_is_set_and_nothing_else_moves() {
        let c = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(4096))
            .with_n_batch(77)
            .with_n_ubatch(33);
        let c = with_n_outputs_max(c, 3).expect("llama-cpp-2's layout is llama.cpp's");
        assert_eq!(
            (c.n_ctx(), c.n_batch(), c.n_ubatch()),
            (NonZeroU32::new(4096), 77, 33)
        );
        // SAFETY: the layout was just checked by `with_n_outputs_max`.
        let raw = unsafe {
            std::mem::transmute::<LlamaContextParams, llama_cpp_sys_2::llama_context_params>(c)
        };
        assert_eq!(raw.n_outputs_max, 3);
    }
}
