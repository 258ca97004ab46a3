#include "tf/protobuf_log_capture.hpp"

#include <google/protobuf/stubs/logging.h>

#include <cstdio>
#include <mutex>

namespace kiln {

namespace {

thread_local protobuf_log_capture* active = nullptr;

const char* level_name(google::protobuf::LogLevel level) {
    switch (level) {
        case google::protobuf::LOGLEVEL_INFO:
            return "INFO";
        case google::protobuf::LOGLEVEL_WARNING:
            return "WARNING";
        case google::protobuf::LOGLEVEL_ERROR:
            return "ERROR";
        default:
            return "FATAL";
    }
}

// Installed once for the process: a thread that is not capturing logs as
// protobuf's default handler would.
void handle(google::protobuf::LogLevel level, const char* filename, int line, const std::string& message) {
    if (active != nullptr && level != google::protobuf::LOGLEVEL_FATAL) {
        active->add(message);
        return;
    }
    std::fprintf(stderr, "[libprotobuf %s %s:%d] %s\n", level_name(level), filename, line, message.c_str());
    std::fflush(stderr);
}

}  // namespace

protobuf_log_capture::protobuf_log_capture() : outer_(active) {
    static std::once_flag installed;
    std::call_once(installed, [] { google::protobuf::SetLogHandler(handle); });
    active = this;
}

protobuf_log_capture::~protobuf_log_capture() { active = outer_; }

void protobuf_log_capture::add(const std::string& message) {
    // Protobuf's first sentence names the field; the rest is advice to the
    // author of the .proto file.
    std::string first = message.substr(0, message.find(". "));
    while (!first.empty() && (first.back() == ' ' || first.back() == '.')) first.pop_back();
    if (!messages_.empty()) messages_ += "; ";
    messages_ += first;
}

std::string protobuf_log_capture::reason() const {
    return messages_.empty() ? "malformed or truncated protobuf" : "malformed or truncated protobuf: " + messages_;
}

}  // namespace kiln
