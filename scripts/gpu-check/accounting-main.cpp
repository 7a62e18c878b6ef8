// llama.cpp's own memory accounting for a list of cases, on whatever backends
// this llama.cpp build has (built by scripts/gpu-check.sh on a GPU machine,
// where headroom itself cannot be built: it has no Rust).
//
// It links headroom's accounting shim (app/shim/accounting.cpp), the same
// code `headroom llama-accounting` calls: a no_alloc load, a context, and
// llama_get_memory_breakdown. One JSON object per case on stdout.
//
// Input: a TSV file, one case per line:
//   id path n_gpu_layers n_ctx n_batch n_ubatch n_seq_max n_outputs_max
//   type_k type_v flash_attn(-1/0/1) swa_full(0/1) use_extra_bufts(0/1)
// (type_k/type_v as enum ggml_type numbers).

#include "accounting.h"

#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

void quiet(ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR) {
        std::fputs(text, stderr);
    }
}

std::string json_str(const char * s) {
    std::string out = "\"";
    for (const char * c = s; *c != '\0'; ++c) {
        if (*c == '"' || *c == '\\') {
            out += '\\';
            out += *c;
        } else if (static_cast<unsigned char>(*c) < 0x20) {
            out += ' ';
        } else {
            out += *c;
        }
    }
    return out + "\"";
}

}  // namespace

int main(int argc, char ** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s CASES.tsv\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    std::ifstream in(argv[1]);
    if (!in) {
        std::fprintf(stderr, "cannot read %s\n", argv[1]);
        return 2;
    }
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) {
            continue;
        }
        std::istringstream f(line);
        std::string id, path;
        int32_t ngl = 0, type_k = 1, type_v = 1, fa = -1;
        uint32_t n_ctx = 0, n_batch = 0, n_ubatch = 0, n_seq = 1, n_out = 0;
        int swa_full = 0, extra = 1;
        if (!(f >> id >> path >> ngl >> n_ctx >> n_batch >> n_ubatch >> n_seq >> n_out >> type_k >> type_v >> fa >>
              swa_full >> extra)) {
            std::fprintf(stderr, "bad case line: %s\n", line.c_str());
            return 2;
        }
        hr_params p{};
        p.path            = path.c_str();
        p.n_gpu_layers    = ngl;
        p.split_mode      = LLAMA_SPLIT_MODE_LAYER;
        p.load_mode       = 0;
        p.use_extra_bufts = extra != 0;
        p.no_alloc        = true;
        p.n_ctx           = n_ctx;
        p.n_batch         = n_batch;
        p.n_ubatch        = n_ubatch;
        p.n_seq_max       = n_seq;
        p.n_outputs_max   = n_out;
        p.type_k          = type_k;
        p.type_v          = type_v;
        p.flash_attn      = fa;
        p.swa_full        = swa_full != 0;
        p.offload_kqv     = true;
        p.op_offload      = true;
        std::vector<hr_buffer> rows(32);
        size_t n = 0;
        hr_info info{};
        std::vector<char> err(8192, '\0');
        int32_t status = hr_memory_breakdown(&p, rows.data(), rows.size(), &n, &info, err.data(), err.size());
        std::ostringstream o;
        o << "{\"id\":" << json_str(id.c_str()) << ",\"status\":" << status;
        if (status != HR_OK) {
            o << ",\"error\":" << json_str(err.data()) << "}";
            std::cout << o.str() << std::endl;
            continue;
        }
        o << ",\"n_ctx\":" << info.n_ctx << ",\"n_ubatch\":" << info.n_ubatch << ",\"n_seq_max\":" << info.n_seq_max
          << ",\"flash_attn\":" << info.flash_attn << ",\"buffers\":[";
        for (size_t i = 0; i < n && i < rows.size(); ++i) {
            const hr_buffer & b = rows[i];
            o << (i ? "," : "") << "{\"name\":" << json_str(b.name) << ",\"device\":" << json_str(b.device)
              << ",\"device_type\":" << b.device_type << ",\"is_host\":" << (b.is_host ? "true" : "false")
              << ",\"model_bytes\":" << b.model << ",\"context_bytes\":" << b.context
              << ",\"compute_bytes\":" << b.compute << "}";
        }
        o << "]}";
        std::cout << o.str() << std::endl;
    }
    llama_backend_free();
    return 0;
}
