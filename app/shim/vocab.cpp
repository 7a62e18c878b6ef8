// headroom vocabulary shim: llama.cpp's tokenizer entry points with C++
// exceptions turned into an error code and a message.
//
// Why this exists: llama_tokenize and llama_token_to_piece are C functions,
// but their C++ bodies throw (std::out_of_range from unordered_map::at when a
// byte has no token in a malformed vocabulary, for one). An exception that
// unwinds into Rust aborts the whole process ("Rust cannot catch foreign
// exceptions"), taking the chat's terminal with it. Here it stops.

#include "llama.h"
#include "shim_guard.h"

#include <cstddef>
#include <cstdint>

extern "C" {

// llama_tokenize; its return value goes to *result. Returns 0, or 1 when
// llama.cpp threw (the reason in err).
int hr_tokenize(const llama_vocab * vocab, const char * text, int32_t text_len, llama_token * tokens,
                int32_t n_tokens_max, bool add_special, bool parse_special, int32_t * result, char * err,
                size_t err_len) {
    return hr::guarded(
        [&] { *result = llama_tokenize(vocab, text, text_len, tokens, n_tokens_max, add_special, parse_special); },
        err, err_len);
}

// llama_token_to_piece; its return value goes to *result. Returns 0, or 1
// when llama.cpp threw (the reason in err).
int hr_token_to_piece(const llama_vocab * vocab, llama_token token, char * buf, int32_t length, int32_t lstrip,
                      bool special, int32_t * result, char * err, size_t err_len) {
    return hr::guarded([&] { *result = llama_token_to_piece(vocab, token, buf, length, lstrip, special); }, err,
                       err_len);
}

}  // extern "C"
