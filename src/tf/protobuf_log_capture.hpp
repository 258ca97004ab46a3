#pragma once
// Protobuf says why a parse failed (a string field of the proto3 schemas
// that is not UTF-8) only through its log, on stderr, before ParseFrom*
// returns false. While a protobuf_log_capture exists, what protobuf logs on
// this thread is kept for the importer's own error instead.
#include <string>

namespace kiln {

class protobuf_log_capture {
public:
    protobuf_log_capture();
    ~protobuf_log_capture();
    protobuf_log_capture(const protobuf_log_capture&) = delete;
    protobuf_log_capture& operator=(const protobuf_log_capture&) = delete;

    // Ends an error message about the failed parse: protobuf's reason when it
    // logged one, else "malformed or truncated protobuf".
    std::string reason() const;

    void add(const std::string& message);

private:
    std::string messages_;
    protobuf_log_capture* outer_;
};

}  // namespace kiln
