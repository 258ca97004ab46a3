// The AVX2 kernels' float32 math against the C library evaluated in double
// and rounded once (the correctly rounded result, barring rare ties), in ulp
// of float over wide ranges: every 997th float between the ends, which walks
// every binade, plus the edges where each approximation switches formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/pointwise/pointwise_avx2.hpp"

namespace {

// Floats as integers in their numeric order, so that a difference counts ulp.
std::int64_t ordered(float f) {
    std::int32_t i;
    std::memcpy(&i, &f, sizeof i);
    return i < 0 ? -static_cast<std::int64_t>(i & 0x7fffffff) : i;
}

std::vector<float> samples(float lo, float hi, std::vector<float> extra = {}) {
    std::vector<float> xs = std::move(extra);
    for (std::int64_t k = ordered(lo); k <= ordered(hi); k += 997) {
        std::int32_t bits = k < 0 ? static_cast<std::int32_t>((-k) | 0x80000000) : static_cast<std::int32_t>(k);
        float f;
        std::memcpy(&f, &bits, sizeof f);
        xs.push_back(f);
    }
    return xs;
}

struct accuracy {
    std::int64_t worst_ulp = 0;
    float worst_x = 0;
};

accuracy measure(void (*vector_fn)(const float*, float*, std::size_t), const std::function<double(double)>& truth,
                 const std::vector<float>& xs) {
    std::vector<float> got(xs.size());
    vector_fn(xs.data(), got.data(), xs.size());
    accuracy a;
    for (std::size_t i = 0; i < xs.size(); ++i) {
        const float want = static_cast<float>(truth(xs[i]));
        if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got[i])) << "x = " << xs[i];
            continue;
        }
        const std::int64_t ulp = std::llabs(ordered(got[i]) - ordered(want));
        if (ulp > a.worst_ulp) a = {ulp, xs[i]};
    }
    return a;
}

const float inf = std::numeric_limits<float>::infinity();
const float quiet_nan = std::numeric_limits<float>::quiet_NaN();

class avx2_vector_math : public ::testing::Test {
protected:
    void SetUp() override {
        if (!kiln::avx2::supported()) GTEST_SKIP() << "this CPU has no AVX2/FMA; the kernels are not used here";
    }
};

}  // namespace

TEST_F(avx2_vector_math, exp_within_one_ulp) {
    auto a = measure(
        kiln::avx2::exp_array, [](double x) { return std::exp(x); },
        samples(-110.0f, 90.0f, {0.0f, -0.0f, 88.7228f, 88.7229f, -87.33f, -103.97f, -104.0f, inf, -inf, quiet_nan}));
    EXPECT_LE(a.worst_ulp, 1) << "at x = " << a.worst_x;
}

TEST_F(avx2_vector_math, tanh_within_two_ulp) {
    auto a = measure(
        kiln::avx2::tanh_array, [](double x) { return std::tanh(x); },
        samples(-20.0f, 20.0f, {0.625f, -0.625f, 0.62499994f, 1e-30f, -1e-40f, inf, -inf, quiet_nan}));
    EXPECT_LE(a.worst_ulp, 2) << "at x = " << a.worst_x;
}

TEST_F(avx2_vector_math, sigmoid_within_two_ulp) {
    auto a = measure(
        kiln::avx2::sigmoid_array, [](double x) { return 1.0 / (1.0 + std::exp(-x)); },
        samples(-87.0f, 40.0f, {0.0f, inf, quiet_nan}));
    EXPECT_LE(a.worst_ulp, 2) << "at x = " << a.worst_x;
}

TEST_F(avx2_vector_math, erf_within_two_ulp) {
    auto a = measure(
        kiln::avx2::erf_array, [](double x) { return std::erf(x); },
        samples(-6.0f, 6.0f, {0.921875f, -0.921875f, 0.92187494f, 3.92f, 1e-30f, inf, -inf, quiet_nan}));
    EXPECT_LE(a.worst_ulp, 2) << "at x = " << a.worst_x;
}

// erfc's tail polynomial in 1/a loses about an ulp to the rounding of 1/a
// and a few more to its evaluation; the decomposed float formula an exporter
// writes, 1 + erf(u) for negative u, loses all digits there instead.
TEST_F(avx2_vector_math, gelu_erf_within_six_ulp_where_normal) {
    auto truth = [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); };
    // Down to -13 the result stays a normal float; its tail below is checked absolutely.
    auto a = measure(kiln::avx2::gelu_erf_array, truth, samples(-13.0f, 10.0f, {1.3037f, -1.3037f, inf, quiet_nan}));
    EXPECT_LE(a.worst_ulp, 6) << "at x = " << a.worst_x;
    std::vector<float> tail = samples(-40.0f, -13.0f);
    std::vector<float> got(tail.size());
    kiln::avx2::gelu_erf_array(tail.data(), got.data(), tail.size());
    for (std::size_t i = 0; i < tail.size(); ++i) EXPECT_LE(std::fabs(got[i] - truth(tail[i])), 1e-37) << tail[i];
}

// u = sqrt(2/pi) (x + 0.044715 x^3) is rounded a few times in float and
// e^-2u magnifies that by 2|u|, so for negative x the error grows like |x|^3
// (as in any float evaluation of the formula, an exporter's included).
TEST_F(avx2_vector_math, gelu_tanh_within_eight_ulp_near_zero_and_1e5_relative_in_the_tail) {
    auto truth = [](double x) { return x / (1.0 + std::exp(-2 * std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); };
    auto a = measure(kiln::avx2::gelu_tanh_array, truth, samples(-2.0f, 10.0f, {inf, quiet_nan}));
    EXPECT_LE(a.worst_ulp, 8) << "at x = " << a.worst_x;
    std::vector<float> tail = samples(-9.0f, -2.0f);
    std::vector<float> got(tail.size());
    kiln::avx2::gelu_tanh_array(tail.data(), got.data(), tail.size());
    for (std::size_t i = 0; i < tail.size(); ++i)
        EXPECT_LE(std::fabs(got[i] - truth(tail[i])), 1e-5 * std::fabs(truth(tail[i])) + 1e-38) << tail[i];
}

// Far below zero both forms underflow: gelu is 0 (as -0, or a subnormal near
// -13 for the erf form) until x = -inf, where the reference formulas give
// -inf * 0 = NaN.
TEST_F(avx2_vector_math, gelu_far_below_zero_is_zero_and_nan_at_minus_inf) {
    const float lowest = std::numeric_limits<float>::lowest();
    for (auto fn : {kiln::avx2::gelu_erf_array, kiln::avx2::gelu_tanh_array}) {
        std::vector<float> xs = samples(lowest, -40.0f, {-100.0f, -1e30f, lowest});
        std::vector<float> got(xs.size());
        fn(xs.data(), got.data(), xs.size());
        for (std::size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(got[i], 0.0f) << "x = " << xs[i];
        float minus_inf = -inf, y = 0;
        fn(&minus_inf, &y, 1);
        EXPECT_TRUE(std::isnan(y));
    }
}
