// The 64-codes-a-step map (code_map_avx512vbmi.cpp) against a plain table
// lookup: every one of the 256 codes through a random map, lengths that
// leave each tail, in place and into other memory, at unaligned addresses,
// and no byte touched outside the codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/quantize/code_map_avx512vbmi.hpp"

using namespace kiln;

namespace {

constexpr std::size_t guard = 9;
constexpr std::uint8_t untouched = 0xA5;

std::vector<std::uint8_t> random_bytes(std::size_t n, std::mt19937& gen) {
    std::uniform_int_distribution<int> byte(0, 255);
    std::vector<std::uint8_t> v(n);
    for (auto& b : v) b = static_cast<std::uint8_t>(byte(gen));
    return v;
}

}  // namespace

TEST(CodeMapAvx512Vbmi, EveryCodeAndLengthMatchesATableLookup) {
    if (!avx512::vbmi_enabled()) GTEST_SKIP() << "needs AVX-512 BW and VBMI";
    std::mt19937 gen(7);
    const std::vector<std::uint8_t> map = random_bytes(256, gen);
    for (std::size_t n = 0; n <= 300; ++n) {
        // Codes 0..255 in turn first, so that every entry is read, then random ones.
        std::vector<std::uint8_t> in = random_bytes(n, gen);
        std::iota(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(n, 256)), std::uint8_t{0});
        std::vector<std::uint8_t> want(n);
        for (std::size_t i = 0; i < n; ++i) want[i] = map[in[i]];

        std::vector<std::uint8_t> out(n + 2 * guard + 1, untouched);
        std::uint8_t* at = out.data() + guard + 1;  // not 64-byte aligned
        avx512::map_codes(map.data(), in.data(), at, n);
        EXPECT_EQ(std::vector<std::uint8_t>(at, at + n), want) << "n = " << n;
        for (std::size_t i = 0; i < guard + 1; ++i) EXPECT_EQ(out[i], untouched) << "n = " << n;
        for (std::size_t i = 0; i < guard; ++i) EXPECT_EQ(at[n + i], untouched) << "n = " << n;

        std::vector<std::uint8_t> in_place(in.begin(), in.end());
        avx512::map_codes(map.data(), in_place.data(), in_place.data(), n);
        EXPECT_EQ(in_place, want) << "in place, n = " << n;
    }
}
