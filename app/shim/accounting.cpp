// headroom accounting shim: asks llama.cpp itself how much memory a model and
// context would take, per backend buffer type, without reading the weights.
//
// Why this exists: the planner predicts memory from the GGUF header alone; this
// shim is the ground truth it is calibrated and tested against. It mirrors what
// llama.cpp's own `--fit` does (common/fit.cpp, common_get_device_memory_data):
// load the model with no_alloc = true and load_mode = NONE, create a context,
// then read llama_get_memory_breakdown (src/llama-ext.h, C++ only, hence a shim).
//
// Rules at this boundary: no C++ exception may cross into Rust (every entry
// point catches everything); every llama.cpp object is freed on every path
// (RAII holders below); llama.cpp's global logger is never swapped per call:
// a call captures its own thread's log lines (shim_log.h).

#include "accounting.h"
#include "shim_log.h"

#include "ggml-backend.h"
#include "ggml.h"
#include "llama-ext.h"
#include "llama.h"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

namespace {

using hr::copy_str;
using hr::log_capture;
using hr::scoped_log;
using hr::set_error;

struct model_holder {
    llama_model * ptr = nullptr;
    ~model_holder() {
        if (ptr != nullptr) {
            llama_model_free(ptr);
        }
    }
};

struct context_holder {
    llama_context * ptr = nullptr;
    ~context_holder() {
        if (ptr != nullptr) {
            llama_free(ptr);
        }
    }
};

// Resolves a buffer type by name the way llama.cpp's `-ot` parser does
// (common/arg.cpp, parse_tensor_buffer_overrides: every device's default
// buffer type), plus each device's host buffer type (e.g. "CUDA_Host").
ggml_backend_buffer_type_t find_buft(const char * name) {
    if (name == nullptr) {
        return nullptr;
    }
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        ggml_backend_buffer_type_t candidates[2] = {
            ggml_backend_dev_buffer_type(dev),
            ggml_backend_dev_host_buffer_type(dev),
        };
        for (ggml_backend_buffer_type_t buft : candidates) {
            if (buft != nullptr && std::strcmp(ggml_backend_buft_name(buft), name) == 0) {
                return buft;
            }
        }
    }
    return nullptr;
}

int32_t breakdown_impl(const hr_params * p, hr_buffer * out, size_t cap, size_t * n_out, hr_info * info,
                       char * err, size_t err_len, log_capture & cap_log) {
    if (p == nullptr || p->path == nullptr || n_out == nullptr || (cap > 0 && out == nullptr)) {
        set_error(err, err_len, "hr_memory_breakdown: null argument", cap_log);
        return HR_BAD_ARGUMENT;
    }
    *n_out = 0;
    // Out-of-range enums would reach llama.cpp's asserts (process abort).
    const auto bad_type = [](int32_t t) {
        return t < 0 || t >= GGML_TYPE_COUNT || ggml_blck_size(static_cast<ggml_type>(t)) <= 0;
    };
    if (bad_type(p->type_k) || bad_type(p->type_v) || p->flash_attn < -1 || p->flash_attn > 1 ||
        p->split_mode < LLAMA_SPLIT_MODE_NONE || p->split_mode > LLAMA_SPLIT_MODE_TENSOR ||
        p->load_mode < LLAMA_LOAD_MODE_AUTO || p->load_mode > LLAMA_LOAD_MODE_DIRECT_IO) {
        set_error(err, err_len,
                  "out-of-range cache type (" + std::to_string(p->type_k) + ", " + std::to_string(p->type_v) +
                      "), flash_attn, split_mode or load_mode",
                  cap_log);
        return HR_BAD_ARGUMENT;
    }

    llama_model_params mparams = llama_model_default_params();
    mparams.n_gpu_layers       = p->n_gpu_layers;
    mparams.main_gpu           = p->main_gpu;
    mparams.split_mode         = static_cast<llama_split_mode>(p->split_mode);
    mparams.load_mode          = static_cast<llama_load_mode>(p->load_mode);
    mparams.use_extra_bufts    = p->use_extra_bufts;
    mparams.no_host            = p->no_host;
    mparams.no_alloc           = p->no_alloc;
    if (p->no_alloc) {
        // As common/fit.cpp does: a no_alloc load must not mmap (llama-model.cpp
        // asserts !no_alloc on the mmap path), and nothing is read anyway.
        mparams.load_mode = LLAMA_LOAD_MODE_NONE;
    }

    // llama.cpp reads tensor_split as an array of llama_max_devices() floats.
    std::vector<float> split(llama_max_devices(), 0.0f);
    if (p->tensor_split != nullptr && p->n_tensor_split > 0) {
        if (p->n_tensor_split > split.size()) {
            set_error(err, err_len,
                      "tensor_split has " + std::to_string(p->n_tensor_split) + " entries; this build supports " +
                          std::to_string(split.size()) + " devices",
                      cap_log);
            return HR_BAD_ARGUMENT;
        }
        std::copy(p->tensor_split, p->tensor_split + p->n_tensor_split, split.begin());
        mparams.tensor_split = split.data();
    }

    // Overrides: a list terminated by a {nullptr, nullptr} entry.
    std::vector<llama_model_tensor_buft_override> overrides;
    if (p->n_overrides > 0) {
        if (p->override_patterns == nullptr || p->override_bufts == nullptr) {
            set_error(err, err_len, "tensor overrides given without patterns or buffer types", cap_log);
            return HR_BAD_ARGUMENT;
        }
        for (size_t i = 0; i < p->n_overrides; ++i) {
            ggml_backend_buffer_type_t buft = find_buft(p->override_bufts[i]);
            if (buft == nullptr || p->override_patterns[i] == nullptr) {
                std::string known;
                for (size_t d = 0; d < ggml_backend_dev_count(); ++d) {
                    ggml_backend_buffer_type_t b = ggml_backend_dev_buffer_type(ggml_backend_dev_get(d));
                    if (b != nullptr) {
                        known += known.empty() ? "" : ", ";
                        known += ggml_backend_buft_name(b);
                    }
                }
                set_error(err, err_len,
                          std::string("unknown buffer type '") +
                              (p->override_bufts[i] ? p->override_bufts[i] : "(null)") + "' (known: " + known + ")",
                          cap_log);
                return HR_UNKNOWN_BUFT;
            }
            overrides.push_back({p->override_patterns[i], buft});
        }
        overrides.push_back({nullptr, nullptr});
        mparams.tensor_buft_overrides = overrides.data();
    }

    llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx                = p->n_ctx;
    cparams.n_batch              = p->n_batch;
    cparams.n_ubatch             = p->n_ubatch;
    cparams.n_seq_max            = p->n_seq_max;
    cparams.n_outputs_max        = p->n_outputs_max;
    cparams.type_k               = static_cast<ggml_type>(p->type_k);
    cparams.type_v               = static_cast<ggml_type>(p->type_v);
    cparams.flash_attn_type      = static_cast<llama_flash_attn_type>(p->flash_attn);
    cparams.swa_full             = p->swa_full;
    cparams.kv_unified           = p->kv_unified;
    cparams.offload_kqv          = p->offload_kqv;
    cparams.op_offload           = p->op_offload;
    if (p->n_threads > 0) {
        cparams.n_threads       = p->n_threads;
        cparams.n_threads_batch = p->n_threads;
    }

    model_holder model;
    model.ptr = llama_model_load_from_file(p->path, mparams);
    if (model.ptr == nullptr) {
        set_error(err, err_len, std::string("llama.cpp could not load the model ") + p->path, cap_log);
        return HR_MODEL_LOAD;
    }

    context_holder ctx;
    ctx.ptr = llama_init_from_model(model.ptr, cparams);
    if (ctx.ptr == nullptr) {
        set_error(err, err_len, "llama.cpp could not create a context for the model", cap_log);
        return HR_CONTEXT_INIT;
    }

    const llama_memory_breakdown mb = llama_get_memory_breakdown(ctx.ptr);
    *n_out = mb.size();
    if (mb.size() > cap) {
        set_error(err, err_len,
                  "output holds " + std::to_string(cap) + " rows; " + std::to_string(mb.size()) + " needed", cap_log);
        return HR_BUFFER_TOO_SMALL;
    }
    size_t i = 0;
    for (const auto & [buft, data] : mb) {
        hr_buffer & row = out[i++];
        std::memset(&row, 0, sizeof(row));
        copy_str(row.name, sizeof(row.name), ggml_backend_buft_name(buft));
        row.is_host = ggml_backend_buft_is_host(buft);
        ggml_backend_dev_t dev = ggml_backend_buft_get_device(buft);
        if (dev == nullptr && row.is_host) {
            // The plain CPU buffer type has no device (llama-model.cpp works
            // around the same FIXME the same way).
            dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
        }
        copy_str(row.device, sizeof(row.device), dev != nullptr ? ggml_backend_dev_name(dev) : "");
        row.device_type = dev != nullptr ? static_cast<int32_t>(ggml_backend_dev_type(dev)) : -1;
        row.model   = data.model;
        row.context = data.context;
        row.compute = data.compute;
    }

    if (info != nullptr) {
        std::memset(info, 0, sizeof(*info));
        info->n_ctx       = llama_n_ctx(ctx.ptr);
        info->n_ctx_train = static_cast<uint32_t>(std::max(0, llama_model_n_ctx_train(model.ptr)));
        info->n_batch     = llama_n_batch(ctx.ptr);
        info->n_ubatch    = llama_n_ubatch(ctx.ptr);
        info->n_seq_max   = llama_n_seq_max(ctx.ptr);
        info->n_layer     = llama_model_n_layer(model.ptr);
        info->n_vocab     = llama_vocab_n_tokens(llama_model_get_vocab(model.ptr));
        info->n_params    = llama_model_n_params(model.ptr);
        info->model_size  = llama_model_size(model.ptr);
        // Explicit on/off stays as asked unless llama.cpp logged an override.
        info->flash_attn  = cap_log.flash_attn >= 0 ? cap_log.flash_attn : (p->flash_attn >= 0 ? p->flash_attn : -1);
    }
    return HR_OK;
}

} // namespace

extern "C" int32_t hr_abi_version(void) {
    return HR_ABI_VERSION;
}

// sizeof / offsetof table entries, named the way hr_struct_layout documents.
#define HR_SIZE(s)     {#s, sizeof(s)}
#define HR_FIELD(s, f) {#s "." #f, offsetof(s, f)}

extern "C" const hr_layout_entry * hr_struct_layout(size_t * n) {
    // Every field of every struct in accounting.h, in declaration order.
    static const hr_layout_entry k_layout[] = {
        HR_SIZE(hr_params),
        HR_FIELD(hr_params, path),
        HR_FIELD(hr_params, n_gpu_layers),
        HR_FIELD(hr_params, main_gpu),
        HR_FIELD(hr_params, split_mode),
        HR_FIELD(hr_params, load_mode),
        HR_FIELD(hr_params, tensor_split),
        HR_FIELD(hr_params, n_tensor_split),
        HR_FIELD(hr_params, override_patterns),
        HR_FIELD(hr_params, override_bufts),
        HR_FIELD(hr_params, n_overrides),
        HR_FIELD(hr_params, use_extra_bufts),
        HR_FIELD(hr_params, no_host),
        HR_FIELD(hr_params, no_alloc),
        HR_FIELD(hr_params, forward_logs),
        HR_FIELD(hr_params, n_ctx),
        HR_FIELD(hr_params, n_batch),
        HR_FIELD(hr_params, n_ubatch),
        HR_FIELD(hr_params, n_seq_max),
        HR_FIELD(hr_params, n_outputs_max),
        HR_FIELD(hr_params, type_k),
        HR_FIELD(hr_params, type_v),
        HR_FIELD(hr_params, flash_attn),
        HR_FIELD(hr_params, swa_full),
        HR_FIELD(hr_params, kv_unified),
        HR_FIELD(hr_params, offload_kqv),
        HR_FIELD(hr_params, op_offload),
        HR_FIELD(hr_params, n_threads),

        HR_SIZE(hr_buffer),
        HR_FIELD(hr_buffer, name),
        HR_FIELD(hr_buffer, device),
        HR_FIELD(hr_buffer, model),
        HR_FIELD(hr_buffer, context),
        HR_FIELD(hr_buffer, compute),
        HR_FIELD(hr_buffer, device_type),
        HR_FIELD(hr_buffer, is_host),

        HR_SIZE(hr_info),
        HR_FIELD(hr_info, n_ctx),
        HR_FIELD(hr_info, n_ctx_train),
        HR_FIELD(hr_info, n_batch),
        HR_FIELD(hr_info, n_ubatch),
        HR_FIELD(hr_info, n_seq_max),
        HR_FIELD(hr_info, n_layer),
        HR_FIELD(hr_info, n_vocab),
        HR_FIELD(hr_info, n_params),
        HR_FIELD(hr_info, model_size),
        HR_FIELD(hr_info, flash_attn),

        HR_SIZE(hr_quant_model),
        HR_FIELD(hr_quant_model, arch),
        HR_FIELD(hr_quant_model, n_embd),
        HR_FIELD(hr_quant_model, n_ff),
        HR_FIELD(hr_quant_model, n_layer),
        HR_FIELD(hr_quant_model, n_head),
        HR_FIELD(hr_quant_model, n_head_kv),
        HR_FIELD(hr_quant_model, n_expert),
        HR_FIELD(hr_quant_model, n_embd_head_k),
        HR_FIELD(hr_quant_model, n_embd_head_v),

        HR_SIZE(hr_quant_tensor),
        HR_FIELD(hr_quant_tensor, name),
        HR_FIELD(hr_quant_tensor, ne),
        HR_FIELD(hr_quant_tensor, n_dims),
        HR_FIELD(hr_quant_tensor, src_type),

        HR_SIZE(hr_layout_entry),
        HR_FIELD(hr_layout_entry, name),
        HR_FIELD(hr_layout_entry, value),
    };
    if (n != nullptr) {
        *n = sizeof(k_layout) / sizeof(k_layout[0]);
    }
    return k_layout;
}

#undef HR_SIZE
#undef HR_FIELD

extern "C" int32_t hr_memory_breakdown(const hr_params * p, hr_buffer * out, size_t cap, size_t * n_out,
                                       hr_info * info, char * err, size_t err_len) {
    if (err != nullptr && err_len > 0) {
        err[0] = '\0';
    }
    try {
        std::lock_guard<std::mutex> lock(hr::global_mutex());
        log_capture cap_log;
        cap_log.forward = p != nullptr && p->forward_logs;
        scoped_log guard(cap_log);
        try {
            return breakdown_impl(p, out, cap, n_out, info, err, err_len, cap_log);
        } catch (const std::exception & e) {
            set_error(err, err_len, std::string("llama.cpp threw: ") + e.what(), cap_log);
            return HR_EXCEPTION;
        }
    } catch (const std::exception & e) {
        copy_str(err, err_len, std::string("llama.cpp threw: ") + e.what());
        return HR_EXCEPTION;
    } catch (...) {
        copy_str(err, err_len, "llama.cpp threw a non-standard exception");
        return HR_EXCEPTION;
    }
}
