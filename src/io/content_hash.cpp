#include "io/content_hash.hpp"

#include <cstring>

namespace kiln::io {

namespace {

constexpr std::uint64_t odd_a = 0x9e3779b97f4a7c15ull;
constexpr std::uint64_t odd_b = 0xc2b2ae3d27d4eb4full;

constexpr std::uint64_t rotl(std::uint64_t v, int r) { return (v << r) | (v >> (64 - r)); }

std::uint64_t load_word(const unsigned char* p) {
    std::uint64_t w;
    std::memcpy(&w, p, sizeof w);
    return w;
}

// Spreads every input bit over the whole word (the murmur3 finaliser's shifts and constants).
std::uint64_t avalanche(std::uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

}  // namespace

void content_hash::mix_block(const unsigned char* block) {
    for (int i = 0; i < 4; ++i) lanes_[i] = rotl(lanes_[i] ^ (load_word(block + 8 * i) * odd_b), 31) * odd_a;
}

void content_hash::add(const void* data, std::size_t size) {
    if (size == 0) return;  // data may be null then (an empty vector's), which memcpy must not see
    const auto* p = static_cast<const unsigned char*>(data);
    total_ += size;
    if (pending_size_ > 0) {
        const std::size_t take = size < 32 - pending_size_ ? size : 32 - pending_size_;
        std::memcpy(pending_ + pending_size_, p, take);
        pending_size_ += take;
        p += take;
        size -= take;
        if (pending_size_ < 32) return;
        mix_block(pending_);
        pending_size_ = 0;
    }
    for (; size >= 32; p += 32, size -= 32) mix_block(p);
    std::memcpy(pending_, p, size);
    pending_size_ = size;
}

std::array<std::uint64_t, 4> content_hash::finished_lanes() const {
    // The zero-padded tail goes in as one more block; the length, mixed in by
    // first() and second(), tells trailing zero bytes from the padding.
    unsigned char tail[32] = {};
    std::memcpy(tail, pending_, pending_size_);
    std::array<std::uint64_t, 4> lanes{lanes_[0], lanes_[1], lanes_[2], lanes_[3]};
    for (int i = 0; i < 4; ++i) lanes[i] = rotl(lanes[i] ^ (load_word(tail + 8 * i) * odd_b), 31) * odd_a;
    return lanes;
}

std::uint64_t content_hash::first() const {
    std::uint64_t h = total_ * odd_a;
    for (auto lane : finished_lanes()) h = rotl(h ^ avalanche(lane), 27) * odd_b + odd_a;
    return avalanche(h);
}

std::uint64_t content_hash::second() const {
    // Another combination of the same lanes: the other order, other constants and rotations.
    const auto lanes = finished_lanes();
    std::uint64_t h = ~total_ * odd_b;
    for (int i = 3; i >= 0; --i) h = rotl(h + avalanche(lanes[i] ^ odd_b), 41) * odd_a;
    return avalanche(h);
}

}  // namespace kiln::io
