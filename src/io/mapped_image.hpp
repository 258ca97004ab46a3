#pragma once
// mapped_image: a whole .kiln file mapped into memory, so that a loaded
// program's weights point into the page cache instead of a private copy:
// loading touches only the metadata, and processes running the same file
// share its pages. Literals hold the mapping through `owner()`, so it lives
// as long as the program (or any argument taken from it) does.
#include <cstddef>
#include <memory>
#include <string>

namespace kiln::io {

class mapped_image {
public:
    // Maps the regular file at `path`. Missing files raise file_not_found;
    // anything else that stops the mapping raises parse_error naming `path`.
    explicit mapped_image(const std::string& path);

    const unsigned char* data() const { return data_; }
    // The size the file had when mapped; bytes past the end of a file that
    // has shrunk since would raise SIGBUS, so callers check sizes against it.
    std::size_t size() const { return size_; }
    // Keeps the mapping alive; empty for an empty file.
    const std::shared_ptr<void>& owner() const { return owner_; }

    // Reads [offset, offset + n) with pread, not through the mapping: a
    // file cut short by another process since it was mapped gives a short
    // read (a parse_error) where touching the mapping would kill the process.
    void read(std::size_t offset, std::size_t n, void* out) const;

private:
    std::string path_;
    std::shared_ptr<int> fd_;
    std::shared_ptr<void> owner_;
    const unsigned char* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace kiln::io
