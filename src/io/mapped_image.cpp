#include "io/mapped_image.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "io/file_header.hpp"
#include "kiln/errors.hpp"

namespace kiln::io {

mapped_image::mapped_image(const std::string& path) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) fail(error_kind::file_not_found, path + ": no such file");
        fail_parse(path, std::string("cannot open: ") + std::strerror(errno));
    }
    fd_ = std::shared_ptr<int>(new int(fd), [](int* p) {
        ::close(*p);
        delete p;
    });
    struct stat info {};
    if (::fstat(fd, &info) != 0) fail_parse(path, std::string("cannot read its size: ") + std::strerror(errno));
    // Devices and pipes could be endless; only regular files have a size to trust.
    if (!S_ISREG(info.st_mode)) fail_parse(path, "not a regular file; not a Kiln program file");
    size_ = static_cast<std::size_t>(info.st_size);
    if (size_ == 0) return;
    // Read-only: the pages are the page cache's, shared with every process
    // mapping the file. Constants are never written (a kernel that did would
    // fault here rather than silently copy 4 KiB pages).
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) fail_parse(path, std::string("cannot map the file: ") + std::strerror(errno));
    data_ = static_cast<const unsigned char*>(p);
    const std::size_t size = size_;
    owner_ = std::shared_ptr<void>(p, [size](void* q) { ::munmap(q, size); });
}

void mapped_image::read(std::size_t offset, std::size_t n, void* out) const {
    std::size_t done = 0;
    while (done < n) {
        const ssize_t got = ::pread(*fd_, static_cast<char*>(out) + done, n - done, static_cast<off_t>(offset + done));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) fail_parse(path_, std::string("cannot read: ") + std::strerror(errno));
        if (got == 0)
            fail_parse(path_, "truncated while being loaded: it now ends before byte " + std::to_string(offset + n) +
                                  " (it had " + std::to_string(size_) + " bytes when opened)");
        done += static_cast<std::size_t>(got);
    }
}

}  // namespace kiln::io
