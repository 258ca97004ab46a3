// The AVX-512 kernels' float32 math (vector_math_avx512.hpp) against the
// AVX2 one (vector_math_avx2.hpp, itself checked against the C library in
// test_avx2_vector_math.cpp): the same formulas on 16 lanes must give the
// same float, bit for bit, for every sample (every 997th float over wide
// ranges, the formulas' switch points, infinities, NaN) and for array
// lengths that leave every tail of 1..15 lanes. exp and erf are also held
// to their ulp bounds against the C library directly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/pointwise/pointwise_avx2.hpp"
#include "targets/cpu/kernels/vector_math_arrays_avx512.hpp"

namespace {

using array_fn = void (*)(const float*, float*, std::size_t);

std::uint32_t bits(float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, sizeof b);
    return b;
}

std::int64_t ordered(float f) {
    std::int32_t i;
    std::memcpy(&i, &f, sizeof i);
    return i < 0 ? -static_cast<std::int64_t>(i & 0x7fffffff) : i;
}

std::vector<float> samples(float lo, float hi, std::vector<float> extra) {
    std::vector<float> xs = std::move(extra);
    for (std::int64_t k = ordered(lo); k <= ordered(hi); k += 997) {
        std::int32_t b = k < 0 ? static_cast<std::int32_t>((-k) | 0x80000000) : static_cast<std::int32_t>(k);
        float f;
        std::memcpy(&f, &b, sizeof f);
        xs.push_back(f);
    }
    return xs;
}

const float inf = std::numeric_limits<float>::infinity();
const float quiet_nan = std::numeric_limits<float>::quiet_NaN();

struct math_case {
    const char* name;
    array_fn avx2_fn;
    array_fn avx512_fn;
    std::vector<float> xs;
};

std::vector<math_case> cases() {
    const float lowest = std::numeric_limits<float>::lowest();
    return {
        {"exp", kiln::avx2::exp_array, kiln::avx512::exp_array,
         samples(-110.0f, 90.0f, {0.0f, -0.0f, 88.7228f, 88.7229f, -87.33f, -103.97f, -104.0f, inf, -inf, quiet_nan})},
        {"tanh", kiln::avx2::tanh_array, kiln::avx512::tanh_array,
         samples(-20.0f, 20.0f, {0.625f, -0.625f, 0.62499994f, 1e-30f, -1e-40f, -0.0f, inf, -inf, quiet_nan})},
        {"sigmoid", kiln::avx2::sigmoid_array, kiln::avx512::sigmoid_array,
         samples(-90.0f, 40.0f, {0.0f, inf, -inf, quiet_nan})},
        {"erf", kiln::avx2::erf_array, kiln::avx512::erf_array,
         samples(-6.0f, 6.0f, {0.921875f, -0.921875f, 0.92187494f, 3.92f, 1e-30f, -0.0f, inf, -inf, quiet_nan})},
        {"gelu_erf", kiln::avx2::gelu_erf_array, kiln::avx512::gelu_erf_array,
         samples(-40.0f, 10.0f, {1.3037f, -1.3037f, -13.4f, -100.0f, lowest, inf, -inf, quiet_nan})},
        {"gelu_tanh", kiln::avx2::gelu_tanh_array, kiln::avx512::gelu_tanh_array,
         samples(-9.0f, 10.0f, {-100.0f, lowest, inf, -inf, quiet_nan})},
    };
}

class avx512_vector_math : public ::testing::Test {
protected:
    void SetUp() override {
        if (!kiln::avx512::supported()) GTEST_SKIP() << "no AVX-512 on this CPU";
    }
};

}  // namespace

TEST_F(avx512_vector_math, every_function_matches_the_avx2_one_bit_for_bit) {
    for (const auto& c : cases()) {
        std::vector<float> want(c.xs.size()), got(c.xs.size(), 7.0f);
        c.avx2_fn(c.xs.data(), want.data(), c.xs.size());
        c.avx512_fn(c.xs.data(), got.data(), c.xs.size());
        std::size_t differ = 0;
        for (std::size_t i = 0; i < c.xs.size(); ++i)
            if (bits(got[i]) != bits(want[i]) && !(std::isnan(got[i]) && std::isnan(want[i])))
                if (++differ <= 3)
                    ADD_FAILURE() << c.name << "(" << c.xs[i] << "): avx512 " << got[i] << ", avx2 " << want[i];
        EXPECT_EQ(differ, 0U) << c.name << " over " << c.xs.size() << " samples";
    }
}

// Lengths 1..40 from an offset start: every tail of 1..15 lanes, and the
// floats just past the end left as they were.
TEST_F(avx512_vector_math, tails_write_only_their_lanes) {
    const std::vector<float> xs = samples(-5.0f, 5.0f, {});
    for (const auto& c : cases()) {
        for (std::size_t n = 1; n <= 40; ++n) {
            std::vector<float> want(n), got(n + 16, -123.0f);
            c.avx2_fn(xs.data() + 3, want.data(), n);
            c.avx512_fn(xs.data() + 3, got.data(), n);
            for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(bits(got[i]), bits(want[i])) << c.name << " n=" << n;
            for (std::size_t i = n; i < n + 16; ++i) EXPECT_EQ(got[i], -123.0f) << c.name << " n=" << n;
        }
    }
}

TEST_F(avx512_vector_math, exp_within_one_ulp_and_erf_within_two_of_the_c_library) {
    const struct {
        array_fn fn;
        double (*truth)(double);
        std::vector<float> xs;
        std::int64_t bound;
    } checks[] = {
        {kiln::avx512::exp_array, [](double x) { return std::exp(x); }, samples(-110.0f, 90.0f, {}), 1},
        {kiln::avx512::erf_array, [](double x) { return std::erf(x); }, samples(-6.0f, 6.0f, {}), 2},
    };
    for (const auto& c : checks) {
        std::vector<float> got(c.xs.size());
        c.fn(c.xs.data(), got.data(), c.xs.size());
        std::int64_t worst = 0;
        float worst_x = 0;
        for (std::size_t i = 0; i < c.xs.size(); ++i) {
            const std::int64_t ulp = std::llabs(ordered(got[i]) - ordered(static_cast<float>(c.truth(c.xs[i]))));
            if (ulp > worst) worst = ulp, worst_x = c.xs[i];
        }
        EXPECT_LE(worst, c.bound) << "at x = " << worst_x;
    }
}
