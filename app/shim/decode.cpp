// llama_decode, guarded against C++ exceptions.
//
// Why: llama-cpp-2 calls llama_decode itself, with its context pointer
// private, and a C++ exception that unwinds into Rust aborts the process.
// The Vulkan backend throws (vk::SystemError) when a buffer it allocates
// lazily at the first decode (its scratch, staging buffers) cannot be had,
// or when the device is lost. So the linker routes every call the program
// makes to llama_decode here (`-Wl,--wrap=llama_decode`, app/build.rs);
// the real function is `__real_llama_decode`. A caught exception returns
// HR_DECODE_THREW with its message kept for the calling thread.
// GGML_ABORT cannot be caught: it goes through the abort callback.

#include "llama.h"
#include "shim_guard.h"

#include <atomic>
#include <cstdint>
#include <stdexcept>

extern "C" int32_t __real_llama_decode(llama_context * ctx, llama_batch batch);

namespace {

// Outside llama_decode's own codes (0, 1, 2, -1, -2, -3).
constexpr int32_t HR_DECODE_THREW = -100;

thread_local char g_error[512];
std::atomic<uint64_t> g_calls{ 0 };

template <typename F> int32_t guarded_decode(F && decode) {
    g_calls.fetch_add(1, std::memory_order_relaxed);
    g_error[0] = '\0';
    int32_t ret = 0;
    if (hr::guarded([&] { ret = decode(); }, g_error, sizeof g_error) != 0) {
        return HR_DECODE_THREW;
    }
    return ret;
}

}  // namespace

extern "C" int32_t __wrap_llama_decode(llama_context * ctx, llama_batch batch) {
    return guarded_decode([&] { return __real_llama_decode(ctx, batch); });
}

// The message of the exception the calling thread's last decode caught
// ("" when it caught none).
extern "C" const char * hr_decode_error(void) {
    return g_error;
}

// How many decodes went through the guard: proves the linker's wrap is in
// effect.
extern "C" uint64_t hr_decode_calls(void) {
    return g_calls.load(std::memory_order_relaxed);
}

// The guard's path with an exception thrown where the backend's would be.
extern "C" int32_t hr_decode_guard_selftest(void) {
    return guarded_decode([]() -> int32_t { throw std::runtime_error("vk::Device::allocateMemory: ErrorOutOfDeviceMemory"); });
}
