// Owned buffers (small ones from the heap, large ones mapped from the kernel)
// and literals built in place.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "kiln/kiln.hpp"

using namespace kiln;

namespace {
bool all_zero(const std::byte* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        if (p[i] != std::byte{0}) return false;
    return true;
}
}  // namespace

TEST(argument, owned_buffers_are_aligned_and_zeroed_at_every_size) {
    // Sizes on both sides of the size from which buffers are mapped directly.
    for (std::size_t bytes : {std::size_t{1}, std::size_t{100}, std::size_t{1} << 20, (std::size_t{3} << 20) + 7}) {
        SCOPED_TRACE(bytes);
        auto buffer = allocate_aligned(bytes);
        ASSERT_NE(buffer, nullptr);
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer.get()) % buffer_alignment, 0u);
        EXPECT_TRUE(all_zero(buffer.get(), bytes));
        std::memset(buffer.get(), 0xab, bytes);  // the whole size is writable
    }
    argument big(shape{dtype::float_type, {1024, 1024}});
    EXPECT_TRUE(all_zero(big.data(), big.get_shape().bytes()));
}

TEST(literal, built_in_place_holds_what_fill_wrote) {
    for (std::size_t n : {std::size_t{5}, std::size_t{1} << 19}) {
        SCOPED_TRACE(n);
        std::vector<std::int32_t> values(n);
        for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<std::int32_t>(i * 7) - 3;
        shape s{dtype::int32_type, {n}};
        literal lit(s, [&](std::byte* out) { std::memcpy(out, values.data(), n * sizeof(std::int32_t)); });
        EXPECT_EQ(lit.get_shape(), s);
        EXPECT_EQ(lit.to_vector<std::int32_t>(), values);
        EXPECT_TRUE(values_equal(lit.get_argument(), literal(s, values).get_argument()));
    }
}

TEST(literal, built_in_place_is_standard_even_for_a_strided_shape) {
    shape transposed{dtype::float_type, {2, 3}, {1, 2}};
    literal lit(transposed, [](std::byte* out) {
        float* p = reinterpret_cast<float*>(out);
        for (int i = 0; i < 6; ++i) p[i] = static_cast<float>(i);
    });
    EXPECT_TRUE(lit.get_shape().standard());
    EXPECT_EQ(lit.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
}
