// headroom vocabulary shim: llama.cpp's tokenizer entry points with C++
// exceptions turned into an error code and a message.
//
// Why this exists: llama_tokenize and llama_token_to_piece are C functions,
// but their C++ bodies throw (std::out_of_range from unordered_map::at when a
// byte has no token in a malformed vocabulary, for one). An exception that
// unwinds into Rust aborts the whole process ("Rust cannot catch foreign
// exceptions"), taking the chat's terminal with it. Here it stops.

#include "llama.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>

namespace {

void write_error(char * err, size_t err_len, const char * what) {
    if (err != nullptr && err_len > 0) {
        std::snprintf(err, err_len, "%s", what);
    }
}

}  // namespace

extern "C" {

// llama_tokenize; its return value goes to *result. Returns 0, or 1 when
// llama.cpp threw (the reason in err).
int hr_tokenize(const llama_vocab * vocab, const char * text, int32_t text_len, llama_token * tokens,
                int32_t n_tokens_max, bool add_special, bool parse_special, int32_t * result, char * err,
                size_t err_len) {
    try {
        *result = llama_tokenize(vocab, text, text_len, tokens, n_tokens_max, add_special, parse_special);
        return 0;
    } catch (const std::exception & e) {
        write_error(err, err_len, e.what());
    } catch (...) {
        write_error(err, err_len, "an unknown C++ exception");
    }
    return 1;
}

// llama_token_to_piece; its return value goes to *result. Returns 0, or 1
// when llama.cpp threw (the reason in err).
int hr_token_to_piece(const llama_vocab * vocab, llama_token token, char * buf, int32_t length, int32_t lstrip,
                      bool special, int32_t * result, char * err, size_t err_len) {
    try {
        *result = llama_token_to_piece(vocab, token, buf, length, lstrip, special);
        return 0;
    } catch (const std::exception & e) {
        write_error(err, err_len, e.what());
    } catch (...) {
        write_error(err, err_len, "an unknown C++ exception");
    }
    return 1;
}

}  // extern "C"
