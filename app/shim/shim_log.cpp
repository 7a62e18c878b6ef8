// headroom log routing: the one permanent llama.cpp / ggml log callback that
// keeps each shim call's captured lines on its own thread (see shim_log.h for
// why the logger is never swapped per call).

#include "accounting.h"
#include "shim_log.h"

#include <atomic>
#include <exception>
#include <mutex>
#include <new>

namespace hr {
namespace {

// The capture active on this thread, if a shim call is running on it.
thread_local log_capture * t_active = nullptr;

// The logger log_dispatch forwards to. A pointer to an immutable pair, so a
// thread logging while the pair is replaced reads either the old one or the
// new one, never the callback of one with the user data of the other (which,
// for llama-cpp-2's bridge, would dereference the wrong state). A replaced
// pair is never freed: another thread may still be calling through it, and
// replacements happen a handful of times per process (start-up, tests).
std::atomic<const log_sink *> g_downstream{nullptr};

// Serialises install_log_dispatch and swap_log_downstream (never taken by
// log_dispatch itself, so logging never waits on it).
std::mutex & route_mutex() {
    static std::mutex m;
    return m;
}

// Must be called with route_mutex held.
void install_locked() {
    ggml_log_callback cb = nullptr;
    void *            ud = nullptr;
    // llama_log_get returns ggml's logger (llama-impl.cpp), so ggml's is all
    // anyone can read back: it is what the last llama_log_set or ggml_log_set
    // installed. llama-cpp-2 sets llama.cpp's and then ggml's own bridge
    // state; after this, llama.cpp's lines go through ggml's state too (their
    // `module` field reads `ggml::...`; the `llama-cpp-2` target that the log
    // filters and llama::log::Capture key on is the same).
    ggml_log_get(&cb, &ud);
    if (cb == log_dispatch) {
        return;
    }
    const log_sink * down = new (std::nothrow) log_sink{cb, ud};
    if (down == nullptr) {
        return; // out of memory: leave the logger as it is, captures just stay empty
    }
    g_downstream.store(down, std::memory_order_release);
    // llama.cpp stores the callback and its user data as two plain fields
    // that another thread may be reading right now. Passing the downstream's
    // own user data keeps any mix of old and new fields a valid pair:
    // log_dispatch ignores its user data, and the old callback gets its own.
    llama_log_set(log_dispatch, ud);
    ggml_log_set(log_dispatch, ud);
}

} // namespace

void log_dispatch(ggml_log_level level, const char * msg, void * /*user_data: see install_locked*/) noexcept {
    if (msg == nullptr) {
        return;
    }
    log_capture * cap = t_active;
    if (cap != nullptr) {
        cap->add(level, msg);
        if (!cap->forward) {
            return;
        }
    }
    const log_sink * down = g_downstream.load(std::memory_order_acquire);
    if (down != nullptr && down->callback != nullptr && down->callback != log_dispatch) {
        down->callback(level, msg, down->user_data);
    }
}

void install_log_dispatch() noexcept {
    try {
        std::lock_guard<std::mutex> lock(route_mutex());
        install_locked();
    } catch (...) {
        // std::mutex::lock failing (std::system_error): without the
        // dispatcher a call's capture stays empty; its error still has our
        // own summary.
    }
}

log_sink swap_log_downstream(log_sink next) noexcept {
    try {
        std::lock_guard<std::mutex> lock(route_mutex());
        install_locked();
        const log_sink * fresh = new (std::nothrow) log_sink{next};
        if (fresh == nullptr) {
            return next; // unchanged; hand the caller's own sink back
        }
        const log_sink * prev = g_downstream.exchange(fresh, std::memory_order_acq_rel);
        return prev != nullptr ? *prev : log_sink{};
    } catch (...) {
        return next;
    }
}

scoped_log::scoped_log(log_capture & cap) : prev_(t_active) {
    install_log_dispatch();
    t_active = &cap;
}

scoped_log::~scoped_log() {
    t_active = prev_;
}

} // namespace hr

extern "C" void hr_log_swap_downstream(ggml_log_callback callback, void * user_data, ggml_log_callback * prev_callback,
                                       void ** prev_user_data) {
    const hr::log_sink prev = hr::swap_log_downstream(hr::log_sink{callback, user_data});
    if (prev_callback != nullptr) {
        *prev_callback = prev.callback;
    }
    if (prev_user_data != nullptr) {
        *prev_user_data = prev.user_data;
    }
}
