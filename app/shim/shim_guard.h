// Shared by the shim's entry points that call llama.cpp on untrusted input:
// a C++ exception becomes an error code and a message.
//
// Why: llama.cpp's C API has C++ bodies that throw (std::out_of_range from a
// malformed vocabulary, std::bad_alloc or std::length_error on huge input).
// An exception that unwinds into Rust aborts the whole process ("Rust cannot
// catch foreign exceptions"), taking the chat's terminal with it.
#pragma once

#include <cstddef>
#include <cstdio>
#include <exception>

namespace hr {

// Runs `call`; returns 0, or 1 with the exception's message in err.
template <typename F> int guarded(F && call, char * err, size_t err_len) {
    const char * what = nullptr;
    try {
        call();
        return 0;
    } catch (const std::exception & e) {
        what = e.what();
    } catch (...) {
        what = "an unknown C++ exception";
    }
    if (err != nullptr && err_len > 0) {
        std::snprintf(err, err_len, "%s", what);
    }
    return 1;
}

}  // namespace hr
