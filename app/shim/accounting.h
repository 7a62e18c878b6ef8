// headroom accounting shim: a C ABI over llama.cpp's C++-only memory accounting.
//
// Why this exists: llama-cpp-2 0.1.160 does not wrap llama_get_memory_breakdown
// (declared in the vendored src/llama-ext.h, a C++ header returning a std::map),
// nor several model/context parameters the planner must vary (use_extra_bufts,
// tensor_split, tensor buffer-type overrides). This header is the contract the
// Rust side (app/src/llama/ffi.rs) mirrors field for field; keep both in sync.
#pragma once

#include "ggml.h" // ggml_log_callback

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Bumped whenever a struct below changes layout; the Rust side checks it.
// 2: hr_struct_sizes gave way to hr_struct_layout (offsets, not just sizes).
#define HR_ABI_VERSION 2

// Result codes of hr_memory_breakdown.
enum hr_status {
    HR_OK               = 0,
    HR_BAD_ARGUMENT     = 1, // a null pointer or an out-of-range value
    HR_MODEL_LOAD       = 2, // llama_model_load_from_file returned null
    HR_CONTEXT_INIT     = 3, // llama_init_from_model returned null
    HR_BUFFER_TOO_SMALL = 4, // *n_out holds the number of rows needed
    HR_EXCEPTION        = 5, // a C++ exception was caught at the boundary
    HR_UNKNOWN_BUFT     = 6, // a tensor override named an unknown buffer type
};

struct hr_params {
    const char * path;            // GGUF file (first split)
    int32_t      n_gpu_layers;    // <0: all layers
    int32_t      main_gpu;
    int32_t      split_mode;      // enum llama_split_mode
    int32_t      load_mode;       // enum llama_load_mode; forced to NONE when no_alloc
    const float * tensor_split;   // null, or n_tensor_split proportions
    size_t       n_tensor_split;  // at most llama_max_devices()
    // Tensor buffer-type overrides (llama.cpp's `-ot PATTERN=BUFT`): two parallel arrays.
    const char * const * override_patterns;
    const char * const * override_bufts;   // buffer type names, e.g. "CPU", "CUDA0"
    size_t       n_overrides;
    bool         use_extra_bufts; // allow repacked CPU weights (CPU_REPACK, AMX, ...)
    bool         no_host;
    bool         no_alloc;        // true: simulate, read no weights, allocate nothing
    bool         forward_logs;    // true: pass llama.cpp's log lines to the previous logger
    uint32_t     n_ctx;           // 0: n_ctx_train
    uint32_t     n_batch;
    uint32_t     n_ubatch;
    uint32_t     n_seq_max;
    uint32_t     n_outputs_max;   // 0: n_batch
    int32_t      type_k;          // enum ggml_type
    int32_t      type_v;
    int32_t      flash_attn;      // -1 auto, 0 off, 1 on
    bool         swa_full;
    bool         kv_unified;
    bool         offload_kqv;
    bool         op_offload;
    int32_t      n_threads;       // <=0: llama.cpp's default
};

struct hr_buffer {
    char     name[64];   // ggml_backend_buft_name: "CPU", "CPU_REPACK", "CUDA0", "CUDA_Host", ...
    char     device[64]; // ggml_backend_dev_name of the buffer type's device, "" when none
    uint64_t model;      // weights
    uint64_t context;    // KV cache / recurrent state
    uint64_t compute;    // scheduler compute buffers (worst-case graph)
    int32_t  device_type; // enum ggml_backend_dev_type of `device` (0 CPU, 1 GPU, 2 IGPU, 3 ACCEL, 4 META); -1 none
    bool     is_host;    // ggml_backend_buft_is_host: plain host memory the CPU reads directly
                         // (false for CPU_REPACK even though it is in RAM: its layout is private)
};

// Resolved facts about the context, reported alongside the rows.
struct hr_info {
    uint32_t n_ctx;        // context actually created (n_ctx 0 resolves to n_ctx_train; padding)
    uint32_t n_ctx_train;
    uint32_t n_batch;
    uint32_t n_ubatch;
    uint32_t n_seq_max;
    int32_t  n_layer;
    int32_t  n_vocab;
    uint64_t n_params;
    uint64_t model_size;   // llama_model_size: sum of tensor bytes
    int32_t  flash_attn;   // resolved: 1 on, 0 off, -1 unknown (auto is resolved by llama.cpp
                           // at context creation; read from its log, see accounting.cpp)
};

int32_t hr_abi_version(void);

// One fact about a struct's layout as this compiler laid it out: `name` is
// "hr_params" for sizeof(struct hr_params) or "hr_params.path" for
// offsetof(struct hr_params, path).
struct hr_layout_entry {
    const char * name;
    size_t       value;
};

// The sizeof and every field's offsetof of each struct in this header (the
// ones app/src/llama/ffi.rs mirrors), as a static table of *n entries. The
// Rust side compares them, by name, with size_of and offset_of! of its own
// #[repr(C)] mirrors before the first call: a field reordered or retyped on
// one side only is caught even when the sizes still agree.
const struct hr_layout_entry * hr_struct_layout(size_t * n);

// Loads `p->path` (with no_alloc: metadata only), creates a context and copies
// llama_get_memory_breakdown into `out` (one row per buffer type). On failure a
// NUL-terminated reason is written into `err` (with the last llama.cpp error
// log lines). Never throws. Serialised internally: safe to call from threads.
int32_t hr_memory_breakdown(const struct hr_params * p, struct hr_buffer * out, size_t cap,
                            size_t * n_out, struct hr_info * info, char * err, size_t err_len);

// ---------------------------------------------------------------------------
// Quantization type choice (llama-quant.cpp through the llama-ext.h helpers):
// which ggml type `llama-quantize` would give each tensor of a model. Used to
// check that synthetic models mirror real quantized files.

struct hr_quant_model {
    const char * arch;       // "llama", "gemma3", "qwen3moe", ...
    uint32_t     n_embd;
    uint32_t     n_ff;
    uint32_t     n_layer;
    uint32_t     n_head;
    uint32_t     n_head_kv;
    uint32_t     n_expert;
    uint32_t     n_embd_head_k;
    uint32_t     n_embd_head_v;
};

struct hr_quant_tensor {
    const char * name;       // GGUF tensor name
    int64_t      ne[4];      // dimensions, innermost first; unused ones 1
    int32_t      n_dims;     // 1..4
    int32_t      src_type;   // enum ggml_type of the unquantized tensor (F32, F16, ...)
};

// Fills out_types[i] with the enum ggml_type llama-quantize would write for
// tensors[i] with file type `ftype` (enum llama_ftype) and default options (no
// imatrix, no overrides). Tensors llama.cpp never quantizes keep src_type.
int32_t hr_quant_types(const struct hr_quant_model * m, int32_t ftype, const struct hr_quant_tensor * tensors,
                       size_t n, int32_t * out_types, char * err, size_t err_len);

// ---------------------------------------------------------------------------
// Logging (app/shim/shim_log.cpp): the shim keeps one permanent llama.cpp log
// callback that captures a shim call's lines on that call's thread and passes
// every other line on to a "downstream" logger (whatever the process had
// installed: llama-cpp-2's bridge into `tracing`, or llama.cpp's default).

// Makes `callback(level, text, user_data)` the downstream logger, installing
// the shim's callback first if needed; the previous downstream is written to
// *prev_callback / *prev_user_data (either may be null). For tests that watch
// what reaches the downstream, and put the previous one back after.
void hr_log_swap_downstream(ggml_log_callback callback, void * user_data, ggml_log_callback * prev_callback,
                            void ** prev_user_data);

#ifdef __cplusplus
}
#endif
