#pragma once
// mapped_file: the bytes of a whole file, read-only, for as long as the object
// lives. Model files run to hundreds of MiB; mapping them hands protobuf the
// page cache directly instead of copying every byte into a fresh buffer.
#include <cstddef>
#include <string>

namespace kiln::onnx_import {

class mapped_file {
public:
    // Raises a Kiln error naming `path` when it cannot be opened or read.
    explicit mapped_file(const std::string& path);
    ~mapped_file();
    mapped_file(const mapped_file&) = delete;
    mapped_file& operator=(const mapped_file&) = delete;

    const void* data() const { return data_; }
    std::size_t size() const { return size_; }
    // The bytes in [begin, begin + size) will not be read again: the whole
    // pages among them leave the process's resident memory (a mapped file's
    // pages count in it; the file keeps them, so a later read still works).
    void release(const void* begin, std::size_t size) const;
    // Copies the bytes in [begin, begin + size) into `out` by reading the
    // file, not the mapping: if another process has cut the file short since
    // it was mapped, touching the mapping kills the process with SIGBUS, and
    // a read just comes back short (a Kiln error naming the file).
    void copy_out(const void* begin, std::size_t size, void* out) const;

private:
    std::string path_;
    int fd_ = -1;  // open while mapped, for copy_out
    void* data_ = nullptr;
    std::size_t size_ = 0;
    bool mapped_ = false;  // false: data_ is a heap copy (files mmap refuses)
};

}  // namespace kiln::onnx_import
