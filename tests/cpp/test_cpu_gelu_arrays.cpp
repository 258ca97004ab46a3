// gelu_array (targets/cpu/kernels/gelu_arrays.hpp), the GELU loop the product
// epilogues call: the AVX-512 loop where avx512::enabled(), the AVX2 one when
// KILN_CPU_ISA=avx2 or the CPU has no AVX-512, nothing for a kind that is no
// GELU; its values against the double-precision reference semantics.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/post_ops.hpp"
#include "scoped_env.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/gelu_arrays.hpp"
#include "targets/cpu/kernels/pointwise/pointwise_avx2.hpp"
#include "targets/cpu/kernels/vector_math_arrays_avx512.hpp"

namespace {

using kiln::op::post_op_kind;

TEST(cpu_gelu_arrays, only_gelu_kinds_have_a_loop) {
    for (auto kind : {post_op_kind::relu, post_op_kind::tanh, post_op_kind::add, post_op_kind::sigmoid})
        EXPECT_EQ(kiln::gelu_array(kind), nullptr);
}

TEST(cpu_gelu_arrays, widest_enabled_isa_is_chosen) {
    if (!kiln::avx2::supported()) GTEST_SKIP() << "no AVX2 on this CPU";
    {
        kiln::test::scoped_env forced("KILN_CPU_ISA", "avx2");
        EXPECT_EQ(kiln::gelu_array(post_op_kind::gelu_erf), &kiln::avx2::gelu_erf_array);
        EXPECT_EQ(kiln::gelu_array(post_op_kind::gelu_tanh), &kiln::avx2::gelu_tanh_array);
    }
    if (!kiln::avx512::supported()) GTEST_SKIP() << "no AVX-512 on this CPU";
    EXPECT_EQ(kiln::gelu_array(post_op_kind::gelu_erf), &kiln::avx512::gelu_erf_array);
    EXPECT_EQ(kiln::gelu_array(post_op_kind::gelu_tanh), &kiln::avx512::gelu_tanh_array);
}

// GELU in double, in forms that lose nothing for negative x (1 + erf(v) as
// erfc(-v), 1 + tanh(u) as 2 / (1 + e^-2u)).
double gelu64(post_op_kind kind, double x) {
    if (kind == post_op_kind::gelu_erf) return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    return x / (1.0 + std::exp(-2.0 * u));
}

// In place over a length that leaves a tail on both vector widths, against
// GELU in double: within the loops' documented bounds (vector_math_avx2.hpp:
// a few ulps, the tanh form 1e-5 relative in its negative tail).
TEST(cpu_gelu_arrays, values_follow_the_reference_in_place) {
    if (!kiln::avx2::supported()) GTEST_SKIP() << "no AVX2 on this CPU";
    for (const char* isa : {"avx2", "avx512"}) {
        if (std::string(isa) == "avx512" && !kiln::avx512::supported()) continue;
        kiln::test::scoped_env forced("KILN_CPU_ISA", isa);
        for (auto kind : {post_op_kind::gelu_erf, post_op_kind::gelu_tanh}) {
            SCOPED_TRACE(std::string(isa) + (kind == post_op_kind::gelu_erf ? " erf" : " tanh"));
            std::vector<float> x;
            for (int i = 0; i < 1003; ++i) x.push_back(-9.0f + 0.018f * static_cast<float>(i));
            std::vector<float> y = x;
            kiln::gelu_array(kind)(y.data(), y.data(), y.size());
            for (std::size_t i = 0; i < x.size(); ++i) {
                const double want = gelu64(kind, x[i]);
                const double bound = kind == post_op_kind::gelu_tanh && x[i] < -3 ? 1e-5 : 1e-6;
                EXPECT_NEAR(y[i], want, bound * std::abs(want) + 1e-37) << "x = " << x[i];
            }
        }
    }
}

}  // namespace
