#pragma once
// Kiln's error type. Every failure caused by user input is reported with one of
// these; `kind` lets the Python layer map it onto the natural built-in exception.
#include <stdexcept>
#include <string>

namespace kiln {

enum class error_kind {
    invalid_argument,  // bad value, shape, dtype, attribute -> ValueError
    type_error,        // wrong kind of object -> TypeError
    not_implemented,   // unsupported op or feature -> NotImplementedError
    file_not_found,    // missing file -> FileNotFoundError
    out_of_range,      // index outside the data -> IndexError
    parse_error,       // malformed file or text -> ValueError
    runtime,           // anything else -> RuntimeError
};

class error : public std::runtime_error {
public:
    error(error_kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
    error_kind kind() const { return kind_; }

private:
    error_kind kind_;
};

[[noreturn]] inline void fail(error_kind kind, const std::string& message) { throw error(kind, message); }
[[noreturn]] inline void fail(const std::string& message) { throw error(error_kind::invalid_argument, message); }

}  // namespace kiln
