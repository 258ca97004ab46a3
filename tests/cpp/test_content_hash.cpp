// The compile cache's hash of weights: the same bytes give the same hash
// however they are split between calls (where each literal's bytes lie is in
// the metadata the fingerprint hashes with them); one changed bit or one more
// zero byte gives another.
#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <utility>
#include <vector>

#include "io/content_hash.hpp"

using kiln::io::content_hash;

namespace {

std::pair<std::uint64_t, std::uint64_t> hash_of(const std::vector<unsigned char>& bytes,
                                                std::vector<std::size_t> cuts = {}) {
    content_hash h;
    std::size_t start = 0;
    cuts.push_back(bytes.size());
    for (std::size_t cut : cuts) {
        h.add(bytes.data() + start, cut - start);
        start = cut;
    }
    return {h.first(), h.second()};
}

std::vector<unsigned char> sample(std::size_t n) {
    std::vector<unsigned char> bytes(n);
    unsigned state = 12345;
    for (auto& b : bytes) b = static_cast<unsigned char>((state = state * 1103515245u + 12345u) >> 16);
    return bytes;
}

}  // namespace

TEST(content_hash, the_split_between_calls_does_not_matter) {
    const auto bytes = sample(1000);
    const auto whole = hash_of(bytes);
    for (std::vector<std::size_t> cuts : {std::vector<std::size_t>{1}, {31, 32, 33}, {7, 64, 65, 500, 999}, {0, 0, 1000}})
        EXPECT_EQ(hash_of(bytes, cuts), whole);
}

TEST(content_hash, every_changed_bit_changes_both_halves) {
    const auto bytes = sample(200);
    const auto original = hash_of(bytes);
    std::set<std::uint64_t> firsts{original.first}, seconds{original.second};
    for (std::size_t i = 0; i < bytes.size(); ++i)
        for (int bit = 0; bit < 8; ++bit) {
            auto changed = bytes;
            changed[i] = static_cast<unsigned char>(changed[i] ^ (1u << bit));
            const auto h = hash_of(changed);
            firsts.insert(h.first);
            seconds.insert(h.second);
        }
    // 1600 one-bit changes and the original: all distinct in each half.
    EXPECT_EQ(firsts.size(), 1601u);
    EXPECT_EQ(seconds.size(), 1601u);
}

TEST(content_hash, lengths_and_trailing_zeros_count) {
    std::set<std::pair<std::uint64_t, std::uint64_t>> seen;
    for (std::size_t n = 0; n <= 70; ++n) seen.insert(hash_of(std::vector<unsigned char>(n, 0)));
    EXPECT_EQ(seen.size(), 71u);  // 0..70 zero bytes: 71 different hashes
    EXPECT_NE(hash_of(sample(40)), hash_of(sample(41)));
}
