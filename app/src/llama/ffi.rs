//! Raw `#[repr(C)]` mirrors of `app/shim/accounting.h`, the C ABI of our C++
//! accounting shim. Kept private to the `llama` module: the safe wrapper in
//! `accounting.rs` is the only caller. Field order and types must match the
//! header exactly; `hr_struct_sizes` lets the wrapper verify that at run time.

use std::ffi::c_char;

/// Mirrors `HR_ABI_VERSION` in accounting.h.
pub(crate) const HR_ABI_VERSION: i32 = 1;

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

unsafe extern "C" {
    /// Returns the shim's `HR_ABI_VERSION`.
    pub(crate) fn hr_abi_version() -> i32;

    /// Writes `sizeof` of each shim struct, as the C++ compiler laid it out.
    pub(crate) fn hr_struct_sizes(
        params: *mut usize,
        buffer: *mut usize,
        info: *mut usize,
        quant_model: *mut usize,
        quant_tensor: *mut usize,
    );

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
