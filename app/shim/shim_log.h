// Shared by the shim's translation units: what llama.cpp logs during one
// shim call, kept for that call's error message, without touching what it
// logs on any other thread.
//
// Why per thread: llama.cpp has ONE process-global logger (llama_log_set
// also sets ggml's). Swapping it around each shim call, as this shim once
// did, raced with the engine: while an accounting call on one thread had its
// capture installed, the model thread's decode warnings landed in that
// capture (lost to `tracing`, and quoted in the wrong error), and the swap
// back could cut in while the other thread was reading the logger.
//
// The design that makes the race impossible: install_log_dispatch() puts
// one permanent callback, log_dispatch, in front of whatever logger the
// process had (llama-cpp-2's bridge into `tracing`, or llama.cpp's default
// stderr printer) and never swaps it per call. A shim call activates a
// log_capture for ITS thread only (scoped_log sets a thread_local pointer);
// log_dispatch runs on the thread that logs, so it hands a line to that
// thread's capture when one is active and to the downstream logger
// otherwise. A line cannot reach another thread's capture, and a line from
// a thread without one cannot be swallowed.
//
// What this does not cover: a line llama.cpp logs from a worker thread it
// started itself during a shim call goes downstream rather than into the
// capture (not lost, just not quoted); the shim's no_alloc loads start none.
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

// What llama.cpp / ggml logged on one thread during one shim call, so a
// failure can be explained ("key not found in model: ...") instead of a bare
// "failed to load model", and so tests stay quiet.
struct log_capture {
    bool           forward    = false; // also pass each line to the downstream logger
    ggml_log_level last_level = GGML_LOG_LEVEL_NONE;
    std::string    text;            // WARN and ERROR lines only
    int32_t        flash_attn = -1; // as resolved by llama.cpp, see note_flash_attn

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

    // Records one line (or continuation) llama.cpp logged on this thread.
    void add(ggml_log_level level, const char * msg) {
        // CONT continues the previous message: classify it like that one.
        const ggml_log_level eff = level == GGML_LOG_LEVEL_CONT ? last_level : level;
        if (level != GGML_LOG_LEVEL_CONT) {
            last_level = level;
        }
        note_flash_attn(msg);
        if (eff == GGML_LOG_LEVEL_WARN || eff == GGML_LOG_LEVEL_ERROR) {
            try {
                text += msg;
                if (text.size() > k_log_capture_max) {
                    text.erase(0, text.size() - k_log_capture_max);
                }
            } catch (...) {
                // Out of memory while logging: dropping a log line is harmless.
            }
        }
    }
};

// The permanent llama.cpp / ggml log callback (see the top of this file).
// Never throws: it is called from C code.
void log_dispatch(ggml_log_level level, const char * msg, void * user_data) noexcept;

// Puts log_dispatch in front of the current logger, unless it is already
// there. Called at the start of every capturing shim call: if something
// (llama-cpp-2's send_logs_to_tracing, at start-up) set a logger since,
// that logger becomes the new downstream and log_dispatch goes back in front.
void install_log_dispatch() noexcept;

// The logger log_dispatch forwards to, and a way to replace it (for tests
// that watch what reaches it). Returns the previous one.
struct log_sink {
    ggml_log_callback callback  = nullptr;
    void *            user_data = nullptr;
};

log_sink swap_log_downstream(log_sink next) noexcept;

// Activates `cap` for the calling thread for the lifetime of this object
// (restoring whatever capture was active before, should calls ever nest).
class scoped_log {
  public:
    explicit scoped_log(log_capture & cap);
    ~scoped_log();

    scoped_log(const scoped_log &)             = delete;
    scoped_log & operator=(const scoped_log &) = delete;

  private:
    log_capture * prev_;
};

// One model-loading shim call at a time. Not for the logger any more (the
// captures above are per thread), but each no_alloc load holds a model's
// vocabulary and metadata (tens of MB) and runs while the memory budget is
// being decided: two at once would double that peak for no gain.
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
