// Shared by the shim's translation units: capturing llama.cpp's global
// logger for the duration of one call, and the mutex that serialises such
// calls (the logger is process-global state).
#pragma once

#include "ggml.h"
#include "llama.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

namespace hr {

// Keep at most this much captured warning/error text: only the tail matters
// (llama.cpp logs the reason for a failure last).
constexpr size_t k_log_capture_max = 4096;

// Captures llama.cpp / ggml log output for the duration of one call so a
// failure can be explained ("key not found in model: ...") instead of a bare
// "failed to load model", and so tests stay quiet.
struct log_capture {
    ggml_log_callback prev_llama_cb = nullptr;
    void *            prev_llama_ud = nullptr;
    ggml_log_callback prev_ggml_cb  = nullptr;
    void *            prev_ggml_ud  = nullptr;
    bool              forward       = false;
    ggml_log_level    last_level    = GGML_LOG_LEVEL_NONE;
    std::string       text; // WARN and ERROR lines only
    int32_t           flash_attn = -1; // as resolved by llama.cpp, see note_flash_attn

    // llama.cpp has no API telling whether `-fa auto` ended up on or off; it
    // logs the decision (llama-context.cpp: resolve_fused_ops and the forced
    // switches in llama_init_from_model). These strings are from the pinned
    // llama.cpp version; if they change, the result is just "unknown" (-1) or
    // the requested mode.
    void note_flash_attn(const char * msg) {
        if (std::strstr(msg, "Flash Attention enabled") != nullptr ||
            std::strstr(msg, "enabling flash_attn since") != nullptr) {
            flash_attn = 1;
        } else if (std::strstr(msg, "Flash Attention not supported") != nullptr ||
                   std::strstr(msg, "flash_attn is not compatible") != nullptr) {
            flash_attn = 0;
        }
    }

    static void callback(ggml_log_level level, const char * msg, void * ud) {
        auto * self = static_cast<log_capture *>(ud);
        if (self == nullptr || msg == nullptr) {
            return;
        }
        // CONT continues the previous message: classify it like that one.
        const ggml_log_level eff = level == GGML_LOG_LEVEL_CONT ? self->last_level : level;
        if (level != GGML_LOG_LEVEL_CONT) {
            self->last_level = level;
        }
        self->note_flash_attn(msg);
        if (eff == GGML_LOG_LEVEL_WARN || eff == GGML_LOG_LEVEL_ERROR) {
            try {
                self->text += msg;
                if (self->text.size() > k_log_capture_max) {
                    self->text.erase(0, self->text.size() - k_log_capture_max);
                }
            } catch (...) {
                // Out of memory while logging: dropping a log line is harmless.
            }
        }
        if (self->forward && self->prev_llama_cb != nullptr) {
            self->prev_llama_cb(level, msg, self->prev_llama_ud);
        }
    }
};

// Installs a log_capture as llama.cpp's and ggml's logger and restores both
// previous loggers on scope exit (llama_log_set sets both, so the ggml one is
// saved separately: a caller such as llama-cpp-2's tracing bridge may have
// installed different callbacks for the two).
class scoped_log {
  public:
    explicit scoped_log(log_capture & cap) : cap_(cap) {
        llama_log_get(&cap_.prev_llama_cb, &cap_.prev_llama_ud);
        ggml_log_get(&cap_.prev_ggml_cb, &cap_.prev_ggml_ud);
        llama_log_set(log_capture::callback, &cap_);
    }

    ~scoped_log() {
        llama_log_set(cap_.prev_llama_cb, cap_.prev_llama_ud);
        ggml_log_set(cap_.prev_ggml_cb, cap_.prev_ggml_ud);
    }

    scoped_log(const scoped_log &)             = delete;
    scoped_log & operator=(const scoped_log &) = delete;

  private:
    log_capture & cap_;
};

// One shim call at a time: llama.cpp's logger is process-global state.
inline std::mutex & global_mutex() {
    static std::mutex m;
    return m;
}

// Copies `src` into a fixed-size, always NUL-terminated C buffer.
inline void copy_str(char * dst, size_t cap, const std::string & src) {
    if (dst == nullptr || cap == 0) {
        return;
    }
    const size_t n = std::min(src.size(), cap - 1);
    std::memcpy(dst, src.data(), n);
    dst[n] = '\0';
}

// A failure message: our own summary, then what llama.cpp logged.
inline void set_error(char * err, size_t err_len, const std::string & what, const log_capture & cap) {
    std::string msg = what;
    if (!cap.text.empty()) {
        msg += "\nllama.cpp said:\n";
        msg += cap.text;
    }
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) {
        msg.pop_back();
    }
    copy_str(err, err_len, msg);
}

} // namespace hr
