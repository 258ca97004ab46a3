#pragma once
// A fast 128-bit hash of byte ranges, for keys (the compile cache's
// fingerprint of a program's weights), not for integrity or security: it reads
// 32 bytes per step in four independent multiply-rotate lanes, so hashing
// runs near memory speed (zlib's crc32 plus adler32 took half a second on
// BERT-base's 418 MB of weights; this takes a tenth of that).
#include <array>
#include <cstddef>
#include <cstdint>

namespace kiln::io {

class content_hash {
public:
    // Adds `size` bytes; the result depends on every byte and on how the
    // bytes were split between calls only through their concatenation.
    void add(const void* data, std::size_t size);
    // The two 64-bit halves of the hash of everything added.
    std::uint64_t first() const;
    std::uint64_t second() const;

private:
    void mix_block(const unsigned char* block);
    std::array<std::uint64_t, 4> finished_lanes() const;

    std::uint64_t lanes_[4] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull,
                               0x082efa98ec4e6c89ull};
    unsigned char pending_[32] = {};
    std::size_t pending_size_ = 0;
    std::uint64_t total_ = 0;
};

}  // namespace kiln::io
