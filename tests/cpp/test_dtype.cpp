#include <gtest/gtest.h>

#include <cmath>

#include "kiln/kiln.hpp"

using namespace kiln;

// Expected bit patterns from numpy: hex(np.float16(v).view(np.uint16)).
TEST(dtype, half_conversion_matches_numpy) {
    const std::vector<std::pair<float, std::uint16_t>> cases = {
        {0.0f, 0x0},     {-0.0f, 0x8000}, {1.0f, 0x3c00},    {-2.5f, 0xc100}, {65504.0f, 0x7bff},
        {65520.0f, 0x7c00}, {1e-7f, 0x2},  {6.1e-5f, 0x3ff},  {5.96e-8f, 0x1}, {2.98e-8f, 0x0},
        {2.99e-8f, 0x1}, {3.14159f, 0x4248}, {1e6f, 0x7c00}, {INFINITY, 0x7c00},
    };
    for (auto [f, bits] : cases) EXPECT_EQ(half(f).bits, bits) << f;
    EXPECT_TRUE(std::isnan(static_cast<float>(half(NAN))));
    // Every finite half converts to float and back unchanged.
    for (std::uint32_t b = 0; b < 0x10000; ++b) {
        half h = half::from_bits(static_cast<std::uint16_t>(b));
        float f = h;
        if (std::isnan(f)) continue;
        ASSERT_EQ(half(f).bits, b) << std::hex << b;
    }
}

// Expected bit patterns from torch: torch.tensor(v, dtype=torch.bfloat16).view(torch.int16).
TEST(dtype, bfloat16_conversion_matches_torch) {
    const std::vector<std::pair<float, std::uint16_t>> cases = {
        {1.0f, 0x3f80}, {3.14159f, 0x4049}, {-2.5f, 0xc020}, {1e-40f, 0x1},
        {65504.0f, 0x4780}, {1.00390625f, 0x3f80}, {1.01171875f, 0x3f82},
    };
    for (auto [f, bits] : cases) EXPECT_EQ(bfloat16(f).bits, bits) << f;
}

TEST(dtype, names_sizes_and_parsing) {
    EXPECT_EQ(to_string(dtype::float_type), "float_type");
    EXPECT_EQ(dtype_size(dtype::half_type), 2u);
    EXPECT_EQ(dtype_size(dtype::uint64_type), 8u);
    EXPECT_EQ(dtype_size(dtype::bool_type), 1u);
    EXPECT_EQ(parse_dtype("float"), dtype::float_type);
    EXPECT_EQ(parse_dtype("float16"), dtype::half_type);
    EXPECT_EQ(parse_dtype("int64_type"), dtype::int64_type);
    for (dtype t : all_dtypes) EXPECT_EQ(parse_dtype(to_string(t)), t);
    try {
        parse_dtype("complex64");
        FAIL();
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("complex64"), std::string::npos);
    }
}
