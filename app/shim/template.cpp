// headroom chat-template shim: llama_chat_apply_template with C++ exceptions
// turned into an error code and a message.
//
// Why this exists: the template text comes from a stranger's GGUF
// (tokenizer.chat_template) or a --chat-template file. llama.cpp copies it
// into std::string and formats the whole conversation into another, so a
// huge input can throw std::bad_alloc or std::length_error; an exception
// that unwinds into Rust aborts the process instead of being an error.

#include "llama.h"
#include "shim_guard.h"

#include <cstddef>
#include <cstdint>

extern "C" {

// llama_chat_apply_template; its return value goes to *result. Returns 0,
// or 1 when llama.cpp threw (the reason in err).
int hr_chat_apply_template(const char * tmpl, const llama_chat_message * chat, size_t n_msg, bool add_ass,
                           char * buf, int32_t length, int32_t * result, char * err, size_t err_len) {
    return hr::guarded([&] { *result = llama_chat_apply_template(tmpl, chat, n_msg, add_ass, buf, length); }, err,
                       err_len);
}

}  // extern "C"
