// Owned buffers (small ones from the heap, large ones mapped from the kernel)
// and literals built in place.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

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

namespace {

// The kernel's "THPeligible" flag of the mapping that holds `address`: 1
// when transparent huge pages may back it (the system allows them and,
// under THP's madvise mode, the mapping was advised), 0 if not, -1 if unknown.
int huge_page_eligible(const void* address) {
    std::ifstream maps("/proc/self/smaps");
    const auto at = reinterpret_cast<std::uintptr_t>(address);
    bool inside = false;
    for (std::string line; std::getline(maps, line);) {
        std::uintptr_t first = 0, last = 0;
        char dash = 0;
        std::istringstream range(line);
        if (range >> std::hex >> first >> dash >> last && dash == '-') {
            inside = first <= at && at < last;
        } else if (inside && line.rfind("THPeligible:", 0) == 0) {
            return std::stoi(line.substr(12));
        }
    }
    return -1;
}

std::string transparent_huge_pages_mode() {
    std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string text;
    std::getline(mode, text);
    return text;
}

}  // namespace

// From 2 MiB, buffers start on a 2 MiB boundary and are advised for
// transparent huge pages: a TLB entry then covers 2 MiB of weights instead
// of 4 KiB (a decode step's products read 1.04-1.95x faster on a Zen 4 VM).
TEST(argument, large_buffers_start_on_a_huge_page_that_may_back_them) {
    for (std::size_t bytes : {std::size_t{2} << 20, (std::size_t{5} << 20) + 3}) {
        SCOPED_TRACE(bytes);
        auto buffer = allocate_aligned(bytes);
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer.get()) % (std::size_t{2} << 20), 0u);
        EXPECT_TRUE(all_zero(buffer.get(), bytes));
        std::memset(buffer.get(), 0xcd, bytes);
        // Where the system offers huge pages at all (THP "always" or "madvise").
        if (transparent_huge_pages_mode().find("[never]") == std::string::npos) {
            EXPECT_EQ(huge_page_eligible(buffer.get()), 1) << transparent_huge_pages_mode();
        }
    }
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
