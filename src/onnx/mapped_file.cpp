#include "onnx/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kiln/errors.hpp"

namespace kiln::onnx_import {

namespace {
// Closes the descriptor on every path out of the constructor.
struct fd_closer {
    int fd;
    ~fd_closer() { ::close(fd); }
};

// Reads all `size` bytes of `fd` into `out` (read may return fewer per call).
bool read_all(int fd, char* out, std::size_t size) {
    std::size_t done = 0;
    while (done < size) {
        ssize_t n = ::read(fd, out + done, size - done);
        if (n <= 0) return false;
        done += static_cast<std::size_t>(n);
    }
    return true;
}
}  // namespace

mapped_file::mapped_file(const std::string& path) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(error_kind::file_not_found, "parse_onnx: cannot open " + path);
    fd_closer closer{fd};
    struct stat info {};
    if (::fstat(fd, &info) != 0) fail(error_kind::file_not_found, "parse_onnx: cannot read the size of " + path);
    size_ = static_cast<std::size_t>(info.st_size);
    if (size_ == 0) return;
    // MAP_POPULATE maps the whole file up front rather than a page per fault.
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p != MAP_FAILED) {
        data_ = p;
        mapped_ = true;
        fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);  // the closer closes `fd`; copy_out reads through this one
        if (fd_ < 0) {
            ::munmap(data_, size_);
            fail(error_kind::runtime, "parse_onnx: out of file descriptors reading " + path);
        }
        return;
    }
    // Some file systems cannot map files: read them instead.
    data_ = std::malloc(size_);
    if (data_ == nullptr) fail(error_kind::runtime, "parse_onnx: out of memory reading " + path);
    if (!read_all(fd, static_cast<char*>(data_), size_)) {
        std::free(data_);
        fail(error_kind::parse_error, "parse_onnx: cannot read " + path);
    }
}

void mapped_file::release(const void* begin, std::size_t size) const {
    if (!mapped_ || size == 0) return;
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto start = (reinterpret_cast<std::uintptr_t>(begin) + page - 1) / page * page;
    const auto end = (reinterpret_cast<std::uintptr_t>(begin) + size) / page * page;
    if (start < end) ::madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED);
}

void mapped_file::copy_out(const void* begin, std::size_t size, void* out) const {
    if (!mapped_) {
        std::memcpy(out, begin, size);
        return;
    }
    const auto offset = static_cast<std::size_t>(static_cast<const char*>(begin) - static_cast<const char*>(data_));
    std::size_t done = 0;
    while (done < size) {
        const ssize_t n = ::pread(fd_, static_cast<char*>(out) + done, size - done, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail(error_kind::parse_error, "parse_onnx: cannot read " + path_ + ": " + std::strerror(errno));
        if (n == 0)
            fail(error_kind::parse_error, "parse_onnx: " + path_ +
                                              " changed while it was read: it ends before byte " +
                                              std::to_string(offset + size) + " (was " + std::to_string(size_) +
                                              " bytes)");
        done += static_cast<std::size_t>(n);
    }
}

mapped_file::~mapped_file() {
    if (mapped_) {
        ::munmap(data_, size_);
        ::close(fd_);
    } else {
        std::free(data_);
    }
}

}  // namespace kiln::onnx_import
