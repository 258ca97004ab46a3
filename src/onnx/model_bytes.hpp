#pragma once
// model_bytes: the bytes of a serialized model, in the caller's memory or in a
// file. A file is read with pread, never mapped: another process may cut it
// short while it is read, and touching a mapping past the new end kills the
// process with SIGBUS, where a read just comes back short (a Kiln error).
#include <google/protobuf/io/zero_copy_stream.h>

#include <cstddef>
#include <memory>
#include <string>

namespace kiln::onnx_import {

// `size` bytes starting `offset` bytes into a model.
struct byte_range {
    std::size_t offset = 0;
    std::size_t size = 0;
};

class model_bytes {
public:
    virtual ~model_bytes() = default;
    virtual std::size_t size() const = 0;
    // All the bytes, from the first, as protobuf reads them.
    virtual std::unique_ptr<google::protobuf::io::ZeroCopyInputStream> stream() const = 0;
    // Copies `range` into `out`; a Kiln error when the bytes are not there (any more).
    virtual void copy(byte_range range, void* out) const = 0;
    // Raises a Kiln error when the bytes changed since they were opened (a
    // file cut short or grown meanwhile), to explain a failed parse.
    virtual void check_unchanged() const {}
};

// Bytes the caller owns and keeps alive.
class memory_model_bytes final : public model_bytes {
public:
    memory_model_bytes(const void* data, std::size_t size) : data_(static_cast<const char*>(data)), size_(size) {}
    std::size_t size() const override { return size_; }
    std::unique_ptr<google::protobuf::io::ZeroCopyInputStream> stream() const override;
    void copy(byte_range range, void* out) const override;

private:
    const char* data_;
    std::size_t size_;
};

// A regular file, open for as long as the object lives.
class file_model_bytes final : public model_bytes {
public:
    // Raises a Kiln error naming `path` when it cannot be opened or is not a regular file.
    explicit file_model_bytes(std::string path);
    ~file_model_bytes() override;
    file_model_bytes(const file_model_bytes&) = delete;
    file_model_bytes& operator=(const file_model_bytes&) = delete;

    std::size_t size() const override { return size_; }
    std::unique_ptr<google::protobuf::io::ZeroCopyInputStream> stream() const override;
    void copy(byte_range range, void* out) const override;
    void check_unchanged() const override;

private:
    std::string path_;
    int fd_ = -1;
    std::size_t size_ = 0;
};

}  // namespace kiln::onnx_import
