// DenseNet's scale-shift-ReLU-quantize rows on sixteen lanes
// (scale_shift_relu_codes_avx512.cpp) against the eight-lane loop
// (scale_shift_relu_codes_avx2.cpp, itself held bitwise to numpy's
// dequantize -> batch norm -> ReLU -> quantize in test_dense_block_codes.py):
// the same codes, byte for byte, for every input and output code type, row
// lengths that leave each tail of both loops, strided rows, values that
// saturate, and float inputs of NaN, infinities, -0 and subnormals; and no
// byte written outside the rows.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/pointwise/scale_shift_relu_codes_avx2.hpp"
#include "targets/cpu/kernels/pointwise/scale_shift_relu_codes_avx512.hpp"

using namespace kiln;

namespace {

constexpr std::size_t rows = 3, guard = 7;
constexpr std::uint8_t untouched = 0xA5;

// Rows of n inputs at a stride of n + 5 elements, as the given code type.
std::vector<std::byte> input_rows(row_codes type, std::size_t n, std::mt19937& gen) {
    const std::size_t count = rows * (n + 5);
    std::vector<std::byte> bytes(count * (type == row_codes::float32 ? sizeof(float) : 1));
    if (type != row_codes::float32) {
        for (auto& b : bytes) b = static_cast<std::byte>(gen());
        return bytes;
    }
    const float inf = std::numeric_limits<float>::infinity();
    const float specials[] = {
        std::numeric_limits<float>::quiet_NaN(), inf, -inf, -0.0f, 1e-40f, -1e-40f, 3e38f, -3e38f};
    std::normal_distribution<float> normal(0.0f, 4.0f);
    std::vector<float> values(count);
    for (std::size_t i = 0; i < count; ++i) values[i] = i % 11 == 3 ? specials[(i / 11) % 8] : normal(gen);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
}

}  // namespace

TEST(scale_shift_relu_rows_each_isa, sixteen_lanes_write_the_eight_lane_codes) {
    if (!avx512::supported() || !avx2::supported()) GTEST_SKIP() << "needs AVX-512 and AVX2";
    std::mt19937 gen(42);
    std::uniform_real_distribution<float> scale(-1.5f, 1.5f), shift(-0.5f, 0.5f);
    for (const row_codes in : {row_codes::float32, row_codes::uint8, row_codes::int8})
        for (const row_codes out : {row_codes::uint8, row_codes::int8})
            for (std::size_t n = 1; n <= 49; ++n) {
                SCOPED_TRACE("input " + std::to_string(static_cast<int>(in)) + ", output " +
                             std::to_string(static_cast<int>(out)) + ", n " + std::to_string(n));
                scale_shift_relu_row row;
                row.input = in;
                row.input_scale = 0.043f;
                row.input_zero_point = in == row_codes::uint8 ? 9.0f : -6.0f;
                row.output = out;
                row.output_scale = 0.021f;
                row.output_zero_point = out == row_codes::uint8 ? 4.0f : -3.0f;
                const auto x = input_rows(in, n, gen);
                std::vector<float> a(n), b(n);
                for (std::size_t c = 0; c < n; ++c) a[c] = c == 2 ? 1e30f : scale(gen), b[c] = shift(gen);
                const std::size_t y_stride = n + guard;  // rows of the result with bytes between them
                std::vector<std::uint8_t> eight(rows * y_stride + guard, untouched), sixteen = eight;
                avx2::scale_shift_relu_code_rows(row, x.data(), n + 5, a.data(), b.data(), eight.data(), y_stride, n,
                                                 rows);
                avx512::scale_shift_relu_code_rows(row, x.data(), n + 5, a.data(), b.data(), sixteen.data(), y_stride,
                                                   n, rows);
                ASSERT_EQ(sixteen, eight);
                for (std::size_t r = 0; r < rows; ++r)
                    for (std::size_t k = n; k < y_stride; ++k) ASSERT_EQ(sixteen[r * y_stride + k], untouched);
            }
}
