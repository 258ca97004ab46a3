// ops::for_each_broadcast against a plain per-element walk of every dim:
// the same indices and offsets, in the same order, with dims of length 1,
// broadcast inputs, transposed strides and dims that merge.
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <vector>

#include "ops/op_helpers.hpp"

using namespace kiln;

namespace {

// (index, offset of input 0, offset of input 1) for each element, dim by dim.
std::vector<std::array<std::size_t, 3>> plain_walk(const std::vector<std::size_t>& lens,
                                                   const std::vector<std::vector<std::size_t>>& strides) {
    std::vector<std::array<std::size_t, 3>> out;
    std::size_t total = 1;
    for (auto l : lens) total *= l;
    for (std::size_t i = 0; i < total; ++i) {
        std::size_t rest = i, a = 0, b = 0;
        for (std::size_t d = lens.size(); d-- > 0;) {
            const std::size_t c = rest % lens[d];
            rest /= lens[d];
            a += c * strides[0][d];
            b += c * strides[1][d];
        }
        out.push_back({i, a, b});
    }
    return out;
}

}  // namespace

TEST(broadcast_walk, visits_what_a_plain_walk_visits_in_its_order) {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 300; ++trial) {
        const std::size_t rank = rng() % 5;
        std::vector<std::size_t> lens(rank);
        for (auto& l : lens) l = 1 + rng() % 4;
        // Input 0 standard (so its dims merge), input 1 broadcast or permuted.
        std::vector<std::vector<std::size_t>> strides(2, std::vector<std::size_t>(rank));
        std::size_t standard = 1;
        for (std::size_t d = rank; d-- > 0;) {
            strides[0][d] = standard;
            standard *= lens[d];
        }
        for (std::size_t d = 0; d < rank; ++d) strides[1][d] = rng() % 3 == 0 ? 0 : strides[0][rank - 1 - d] * 3;
        std::vector<std::array<std::size_t, 3>> got;
        ops::for_each_broadcast<2>(lens, strides, [&](std::size_t i, const std::size_t* off) {
            got.push_back({i, off[0], off[1]});
        });
        EXPECT_EQ(got, plain_walk(lens, strides)) << "trial " << trial;
    }
    // No dims (a scalar) and an empty dim.
    std::vector<std::size_t> calls;
    ops::for_each_broadcast<1>({}, {{}}, [&](std::size_t i, const std::size_t*) { calls.push_back(i); });
    EXPECT_EQ(calls, std::vector<std::size_t>{0});
    calls.clear();
    ops::for_each_broadcast<1>({3, 0, 2}, {{0, 2, 1}}, [&](std::size_t i, const std::size_t*) { calls.push_back(i); });
    EXPECT_TRUE(calls.empty());
}
