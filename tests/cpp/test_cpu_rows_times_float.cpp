// The one-token product loops over row-major float32 weights (AVX2 and
// AVX-512, rows_times_float.hpp) against a plain double-precision loop: 1 to
// 4 rows, inner lengths with and without the four-row remainder, widths
// with and without a partial vector, strided operands inside larger
// buffers, and the result added to what is already there.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/matmul/rows_times_float.hpp"

namespace {

using kiln::rows_times_float_args;

void check(void (*multiply)(const rows_times_float_args&), std::size_t rows, std::size_t inner, std::size_t width) {
    // Operands live inside wider buffers, so the strides differ from the extents.
    const std::size_t a_stride = inner + 3, b_stride = width + 5, y_stride = width + 7;
    std::mt19937 gen(static_cast<unsigned>(rows * 1000 + inner * 10 + width));
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> a(rows * a_stride), b(inner * b_stride), y(rows * y_stride);
    for (auto& v : a) v = value(gen);
    for (auto& v : b) v = value(gen);
    for (auto& v : y) v = value(gen);
    const std::vector<float> before = y;
    multiply({a.data(), a_stride, rows, inner, b.data(), b_stride, width, y.data(), y_stride});
    for (std::size_t m = 0; m < rows; ++m)
        for (std::size_t c = 0; c < y_stride; ++c) {
            const float got = y[m * y_stride + c];
            if (c >= width) {  // outside the block: untouched
                ASSERT_EQ(got, before[m * y_stride + c]) << "row " << m << " column " << c << " past the width";
                continue;
            }
            double expected = before[m * y_stride + c];
            for (std::size_t k = 0; k < inner; ++k)
                expected += static_cast<double>(a[m * a_stride + k]) * b[k * b_stride + c];
            ASSERT_NEAR(got, expected, 1e-5 * (inner + 1))
                << "rows " << rows << " inner " << inner << " width " << width << " at [" << m << ", " << c << "]";
        }
}

void check_all(void (*multiply)(const rows_times_float_args&), std::size_t max_rows) {
    for (std::size_t rows = 1; rows <= max_rows; ++rows)
        for (std::size_t inner : {1, 3, 4, 7, 64, 77})
            for (std::size_t width : {1, 7, 8, 15, 16, 17, 40, 129}) check(multiply, rows, inner, width);
}

TEST(CpuRowsTimesFloat, Avx2MatchesPlainLoop) {
    if (!kiln::avx2::supported()) GTEST_SKIP() << "no AVX2 on this CPU";
    check_all(kiln::avx2::rows_times_float, kiln::avx2::rows_times_float_max_rows);
}

TEST(CpuRowsTimesFloat, Avx512MatchesPlainLoop) {
    if (!kiln::avx512::supported()) GTEST_SKIP() << "no AVX-512 on this CPU";
    check_all(kiln::avx512::rows_times_float, kiln::avx512::rows_times_float_max_rows);
}

}  // namespace
