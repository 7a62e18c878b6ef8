//! Raw `#[repr(C)]` mirrors of `app/shim/accounting.h`, the C ABI of our C++
//! accounting shim. Kept private to the `llama` module: the safe wrapper in
//! `accounting.rs` is the only caller. Field order and types must match the
//! header exactly; `hr_struct_layout` and [`rust_layout`] let the wrapper
//! verify that, size and field offset alike, before the first call.

use std::ffi::c_char;

/// Mirrors `HR_ABI_VERSION` in accounting.h.
pub(crate) const HR_ABI_VERSION: i32 = 2;

/// `hr_status` codes.
pub(crate) const HR_OK: i32 = 0;
pub(crate) const HR_BAD_ARGUMENT: i32 = 1;
pub(crate) const HR_MODEL_LOAD: i32 = 2;
pub(crate) const HR_CONTEXT_INIT: i32 = 3;
pub(crate) const HR_BUFFER_TOO_SMALL: i32 = 4;
pub(crate) const HR_EXCEPTION: i32 = 5;
pub(crate) const HR_UNKNOWN_BUFT: i32 = 6;

/// `struct hr_params`.
#[repr(C)]
pub(crate) struct HrParams {
    pub path: *const c_char,
    pub n_gpu_layers: i32,
    pub main_gpu: i32,
    pub split_mode: i32,
    pub load_mode: i32,
    pub tensor_split: *const f32,
    pub n_tensor_split: usize,
    pub override_patterns: *const *const c_char,
    pub override_bufts: *const *const c_char,
    pub n_overrides: usize,
    pub use_extra_bufts: bool,
    pub no_host: bool,
    pub no_alloc: bool,
    pub forward_logs: bool,
    pub n_ctx: u32,
    pub n_batch: u32,
    pub n_ubatch: u32,
    pub n_seq_max: u32,
    pub n_outputs_max: u32,
    pub type_k: i32,
    pub type_v: i32,
    pub flash_attn: i32,
    pub swa_full: bool,
    pub kv_unified: bool,
    pub offload_kqv: bool,
    pub op_offload: bool,
    pub n_threads: i32,
}

/// `struct hr_buffer`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct HrBuffer {
    pub name: [c_char; 64],
    pub device: [c_char; 64],
    pub model: u64,
    pub context: u64,
    pub compute: u64,
    pub device_type: i32,
    pub is_host: bool,
}

impl HrBuffer {
    /// An all-zero row for the output array the shim fills.
    pub(crate) const ZERO: HrBuffer = HrBuffer {
        name: [0; 64],
        device: [0; 64],
        model: 0,
        context: 0,
        compute: 0,
        device_type: -1,
        is_host: false,
    };
}

/// `struct hr_info`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct HrInfo {
    pub n_ctx: u32,
    pub n_ctx_train: u32,
    pub n_batch: u32,
    pub n_ubatch: u32,
    pub n_seq_max: u32,
    pub n_layer: i32,
    pub n_vocab: i32,
    pub n_params: u64,
    pub model_size: u64,
    pub flash_attn: i32,
}

/// `struct hr_quant_model`.
#[repr(C)]
pub(crate) struct HrQuantModel {
    pub arch: *const c_char,
    pub n_embd: u32,
    pub n_ff: u32,
    pub n_layer: u32,
    pub n_head: u32,
    pub n_head_kv: u32,
    pub n_expert: u32,
    pub n_embd_head_k: u32,
    pub n_embd_head_v: u32,
}

/// `struct hr_quant_tensor`.
#[repr(C)]
pub(crate) struct HrQuantTensor {
    pub name: *const c_char,
    pub ne: [i64; 4],
    pub n_dims: i32,
    pub src_type: i32,
}

/// `struct hr_layout_entry`: one `sizeof` or `offsetof` from the C++ side.
#[repr(C)]
pub(crate) struct HrLayoutEntry {
    pub name: *const c_char,
    pub value: usize,
}

/// `sizeof` / `offsetof` of a mirrored struct, named as `hr_struct_layout`
/// names them (`"hr_params"`, `"hr_params.path"`).
macro_rules! layout {
    ($c:literal: $t:ty { $($field:ident),* $(,)? }) => {
        [
            ($c, size_of::<$t>()),
            $((concat!($c, ".", stringify!($field)), std::mem::offset_of!($t, $field)),)*
        ]
    };
}

/// What the Rust mirrors above look like, in the shape of the C++ table
/// (`hr_struct_layout`). Every field of every struct must be listed: the C++
/// table lists every field of the header, and a name on one side only is a
/// mismatch.
pub(crate) fn rust_layout() -> Vec<(&'static str, usize)> {
    let mut v = Vec::new();
    v.extend(layout!("hr_params": HrParams {
        path, n_gpu_layers, main_gpu, split_mode, load_mode, tensor_split, n_tensor_split,
        override_patterns, override_bufts, n_overrides, use_extra_bufts, no_host, no_alloc,
        forward_logs, n_ctx, n_batch, n_ubatch, n_seq_max, n_outputs_max, type_k, type_v,
        flash_attn, swa_full, kv_unified, offload_kqv, op_offload, n_threads,
    }));
    v.extend(layout!("hr_buffer": HrBuffer {
        name, device, model, context, compute, device_type, is_host,
    }));
    v.extend(layout!("hr_info": HrInfo {
        n_ctx, n_ctx_train, n_batch, n_ubatch, n_seq_max, n_layer, n_vocab, n_params,
        model_size, flash_attn,
    }));
    v.extend(layout!("hr_quant_model": HrQuantModel {
        arch, n_embd, n_ff, n_layer, n_head, n_head_kv, n_expert, n_embd_head_k, n_embd_head_v,
    }));
    v.extend(layout!("hr_quant_tensor": HrQuantTensor { name, ne, n_dims, src_type }));
    v.extend(layout!("hr_layout_entry": HrLayoutEntry { name, value }));
    v
}

unsafe extern "C" {
    /// Returns the shim's `HR_ABI_VERSION`.
    pub(crate) fn hr_abi_version() -> i32;

    /// A static table of `sizeof` / `offsetof` of every shim struct as the
    /// C++ compiler laid it out; its length goes to `*n`.
    pub(crate) fn hr_struct_layout(n: *mut usize) -> *const HrLayoutEntry;

    /// See accounting.h: makes `callback` the logger that llama.cpp lines
    /// outside a shim call's capture go to; the previous one goes to the
    /// out-pointers.
    #[cfg(test)]
    pub(crate) fn hr_log_swap_downstream(
        callback: llama_cpp_sys_2::ggml_log_callback,
        user_data: *mut std::ffi::c_void,
        prev_callback: *mut llama_cpp_sys_2::ggml_log_callback,
        prev_user_data: *mut *mut std::ffi::c_void,
    );

    /// See accounting.h: loads, creates a context, copies the breakdown.
    pub(crate) fn hr_memory_breakdown(
        p: *const HrParams,
        out: *mut HrBuffer,
        cap: usize,
        n_out: *mut usize,
        info: *mut HrInfo,
        err: *mut c_char,
        err_len: usize,
    ) -> i32;

    /// See decode.cpp: the message of the C++ exception the calling
    /// thread's last `llama_decode` caught ("" when none).
    pub(crate) fn hr_decode_error() -> *const c_char;

    /// See decode.cpp: how many `llama_decode` calls went through the guard.
    pub(crate) fn hr_decode_calls() -> u64;

    /// See decode.cpp: the guard's path with an exception thrown in it.
    pub(crate) fn hr_decode_guard_selftest() -> i32;

    /// See accounting.h: llama-quantize's type choice per tensor.
    pub(crate) fn hr_quant_types(
        m: *const HrQuantModel,
        ftype: i32,
        tensors: *const HrQuantTensor,
        n: usize,
        out_types: *mut i32,
        err: *mut c_char,
        err_len: usize,
    ) -> i32;
}
