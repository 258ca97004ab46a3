#include "onnx/model_bytes.hpp"

#include <fcntl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kiln/errors.hpp"

namespace kiln::onnx_import {

namespace {
using google::protobuf::io::ZeroCopyInputStream;

// The file from its first byte, read with pread so that nothing else moves
// the position, and skipped without reading (raw_data is most of a model).
class pread_stream final : public google::protobuf::io::CopyingInputStream {
public:
    explicit pread_stream(int fd) : fd_(fd) {}
    int Read(void* buffer, int size) override {
        for (;;) {
            const ssize_t n = ::pread(fd_, buffer, static_cast<std::size_t>(size), position_);
            if (n < 0 && errno == EINTR) continue;
            if (n > 0) position_ += n;
            return static_cast<int>(n);  // 0 at the end of the file, -1 on an error
        }
    }
    int Skip(int count) override {
        position_ += count;  // a skip past the end shows as the next read's end of file
        return count;
    }

private:
    int fd_;
    off_t position_ = 0;
};

// A CopyingInputStreamAdaptor that owns its pread_stream.
class file_stream final : public ZeroCopyInputStream {
public:
    explicit file_stream(int fd) : source_(fd), adaptor_(&source_, 1 << 16) {}
    bool Next(const void** data, int* size) override { return adaptor_.Next(data, size); }
    void BackUp(int count) override { adaptor_.BackUp(count); }
    bool Skip(int count) override { return adaptor_.Skip(count); }
    std::int64_t ByteCount() const override { return adaptor_.ByteCount(); }

private:
    pread_stream source_;
    google::protobuf::io::CopyingInputStreamAdaptor adaptor_;
};

void check_range(byte_range range, std::size_t size, const std::string& what) {
    if (range.offset > size || range.size > size - range.offset)
        fail(error_kind::parse_error, what + ": bytes " + std::to_string(range.offset) + ".." +
                                          std::to_string(range.offset + range.size) + " lie past its end (" +
                                          std::to_string(size) + " bytes)");
}
}  // namespace

std::unique_ptr<ZeroCopyInputStream> memory_model_bytes::stream() const {
    return std::make_unique<google::protobuf::io::ArrayInputStream>(data_, static_cast<int>(size_));
}

void memory_model_bytes::copy(byte_range range, void* out) const {
    check_range(range, size_, "ONNX buffer");
    std::memcpy(out, data_ + range.offset, range.size);
}

file_model_bytes::file_model_bytes(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail(error_kind::file_not_found, "parse_onnx: cannot open " + path_ + ": " + std::strerror(errno));
    struct stat info {};
    if (::fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode)) {
        ::close(fd_);
        fail(error_kind::invalid_argument, "parse_onnx: " + path_ + " is not a regular file");
    }
    size_ = static_cast<std::size_t>(info.st_size);
}

file_model_bytes::~file_model_bytes() {
    ::close(fd_);
}

std::unique_ptr<ZeroCopyInputStream> file_model_bytes::stream() const {
    return std::make_unique<file_stream>(fd_);
}

void file_model_bytes::copy(byte_range range, void* out) const {
    check_range(range, size_, path_);
    std::size_t done = 0;
    while (done < range.size) {
        const ssize_t n =
            ::pread(fd_, static_cast<char*>(out) + done, range.size - done, static_cast<off_t>(range.offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail(error_kind::parse_error, "parse_onnx: cannot read " + path_ + ": " + std::strerror(errno));
        if (n == 0) check_unchanged();
        if (n == 0)
            fail(error_kind::parse_error,
                 "parse_onnx: " + path_ + " ends before byte " + std::to_string(range.offset + range.size));
        done += static_cast<std::size_t>(n);
    }
}

void file_model_bytes::check_unchanged() const {
    struct stat info {};
    if (::fstat(fd_, &info) != 0 || static_cast<std::size_t>(info.st_size) != size_)
        fail(error_kind::parse_error, "parse_onnx: " + path_ + " changed while it was read: it was " +
                                          std::to_string(size_) + " bytes and is " +
                                          std::to_string(static_cast<long long>(info.st_size)) + " now");
}

}  // namespace kiln::onnx_import
