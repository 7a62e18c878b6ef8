// headroom quantization shim: asks llama.cpp's quantizer which type each
// tensor of a model would get, without any tensor data.
//
// Why this exists: synthetic models (headroom-planner's `synth`) claim to have
// the tensor types of real `llama-quantize` output; this is the ground truth
// they are tested against. It uses the helpers llama.cpp exports for its own
// quantization tests (src/llama-ext.h: llama_quant_model_from_metadata,
// llama_quant_compute_types), so the rules are llama.cpp's, not a copy.

#include "accounting.h"
#include "shim_log.h"

#include "ggml.h"
#include "llama-ext.h"
#include "llama-hparams.h" // LLAMA_MAX_LAYERS
#include "llama.h"

#include <exception>
#include <string>
#include <vector>

namespace {

struct quant_holder {
    llama_model *         model = nullptr;
    quantize_state_impl * qs    = nullptr;
    ggml_context *        ctx   = nullptr;

    ~quant_holder() {
        if (qs != nullptr) {
            llama_quant_free(qs);
        }
        if (model != nullptr) {
            llama_model_free(model);
        }
        if (ctx != nullptr) {
            ggml_free(ctx);
        }
    }
};

int32_t quant_impl(const hr_quant_model * m, int32_t ftype, const hr_quant_tensor * tensors, size_t n,
                   int32_t * out_types, char * err, size_t err_len, hr::log_capture & cap) {
    if (m == nullptr || m->arch == nullptr || (n > 0 && (tensors == nullptr || out_types == nullptr))) {
        hr::set_error(err, err_len, "hr_quant_types: null argument", cap);
        return HR_BAD_ARGUMENT;
    }
    // llama_quant_model_from_metadata asserts (aborts) on these: check first.
    if (m->n_layer == 0 || m->n_layer > LLAMA_MAX_LAYERS) {
        hr::set_error(err, err_len, "n_layer must be in 1.." + std::to_string(LLAMA_MAX_LAYERS), cap);
        return HR_BAD_ARGUMENT;
    }
    for (size_t i = 0; i < n; ++i) {
        const hr_quant_tensor & t = tensors[i];
        if (t.name == nullptr || t.n_dims < 1 || t.n_dims > GGML_MAX_DIMS || t.src_type < 0 ||
            t.src_type >= GGML_TYPE_COUNT) {
            hr::set_error(err, err_len, "tensor " + std::to_string(i) + ": bad name, n_dims or src_type", cap);
            return HR_BAD_ARGUMENT;
        }
        // ggml_new_tensor asserts on these.
        for (int d = 0; d < GGML_MAX_DIMS; ++d) {
            if (t.ne[d] < 1) {
                hr::set_error(err, err_len, std::string("tensor ") + t.name + ": a dimension is < 1", cap);
                return HR_BAD_ARGUMENT;
            }
        }
        // Removed type ids have block size 0.
        const int64_t blck = ggml_blck_size(static_cast<ggml_type>(t.src_type));
        if (blck <= 0 || t.ne[0] % blck != 0) {
            hr::set_error(err, err_len, std::string("tensor ") + t.name + ": rows are not whole blocks of src_type", cap);
            return HR_BAD_ARGUMENT;
        }
    }

    llama_quant_model_desc desc = {};
    desc.architecture  = m->arch;
    desc.n_embd        = m->n_embd;
    desc.n_ff          = m->n_ff;
    desc.n_layer       = m->n_layer;
    desc.n_head        = m->n_head;
    desc.n_head_kv     = m->n_head_kv;
    desc.n_expert      = m->n_expert;
    desc.n_embd_head_k = m->n_embd_head_k;
    desc.n_embd_head_v = m->n_embd_head_v;

    quant_holder h;
    h.model = llama_quant_model_from_metadata(&desc);
    if (h.model == nullptr) {
        hr::set_error(err, err_len, std::string("llama.cpp has no model for architecture ") + m->arch, cap);
        return HR_BAD_ARGUMENT;
    }
    llama_model_quantize_params params = llama_model_quantize_default_params();
    params.ftype                       = static_cast<llama_ftype>(ftype);
    h.qs                               = llama_quant_init(h.model, &params);

    // Metadata-only tensors: names, shapes and types, no data.
    ggml_init_params ip = {};
    ip.mem_size         = (n + 1) * ggml_tensor_overhead();
    ip.mem_buffer       = nullptr;
    ip.no_alloc         = true;
    h.ctx               = ggml_init(ip);
    if (h.ctx == nullptr) {
        hr::set_error(err, err_len, "ggml_init failed", cap);
        return HR_EXCEPTION;
    }

    // llama_quant_compute_types expects only tensors that may be quantized.
    std::vector<ggml_tensor *> quantizable;
    std::vector<size_t>        index;
    for (size_t i = 0; i < n; ++i) {
        const hr_quant_tensor & t  = tensors[i];
        ggml_tensor *           gt = ggml_new_tensor(h.ctx, static_cast<ggml_type>(t.src_type), t.n_dims, t.ne);
        ggml_set_name(gt, t.name);
        out_types[i] = t.src_type;
        if (llama_quant_tensor_allows_quantization(h.qs, gt)) {
            quantizable.push_back(gt);
            index.push_back(i);
        }
    }
    std::vector<ggml_type> result(quantizable.size(), GGML_TYPE_COUNT);
    llama_quant_compute_types(h.qs, static_cast<llama_ftype>(ftype), quantizable.data(), result.data(),
                              quantizable.size());
    for (size_t k = 0; k < index.size(); ++k) {
        out_types[index[k]] = static_cast<int32_t>(result[k]);
    }
    return HR_OK;
}

} // namespace

extern "C" int32_t hr_quant_types(const hr_quant_model * m, int32_t ftype, const hr_quant_tensor * tensors, size_t n,
                                  int32_t * out_types, char * err, size_t err_len) {
    if (err != nullptr && err_len > 0) {
        err[0] = '\0';
    }
    try {
        std::lock_guard<std::mutex> lock(hr::global_mutex());
        hr::log_capture             cap;
        hr::scoped_log              guard(cap);
        try {
            return quant_impl(m, ftype, tensors, n, out_types, err, err_len, cap);
        } catch (const std::exception & e) {
            hr::set_error(err, err_len, std::string("llama.cpp threw: ") + e.what(), cap);
            return HR_EXCEPTION;
        }
    } catch (const std::exception & e) {
        hr::copy_str(err, err_len, std::string("llama.cpp threw: ") + e.what());
        return HR_EXCEPTION;
    } catch (...) {
        hr::copy_str(err, err_len, "llama.cpp threw a non-standard exception");
        return HR_EXCEPTION;
    }
}
