// dft against numpy.fft (the expression is beside each); expect_op runs the
// op directly and on ref and cpu.
#include <gtest/gtest.h>

#include "kiln/op_registry.hpp"
#include "op_test_helpers.hpp"

using namespace kiln;
using test::expect_op;
using test::make;

namespace {

constexpr auto f32 = dtype::float_type;

operation dft(std::int64_t length, bool inverse, bool onesided, std::int64_t axis = 1) {
    return make_op("dft", value_map{{"axis", axis}, {"length", length}, {"inverse", inverse}, {"onesided", onesided}});
}

// x = [1, 2, 3, 4] as a real [1, 4, 1] signal; X = np.fft.fft(x) = [10, -2+2j, -2, -2-2j]
argument real_signal() {
    return make(f32, {1, 4, 1}, {1, 2, 3, 4});
}
argument spectrum() {
    return make(f32, {1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2});
}

}  // namespace

TEST(ops_dft, forward_full_and_one_sided) {
    expect_op(dft(4, false, false), {real_signal()}, {1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2}, 1e-5);
    expect_op(dft(4, false, true), {real_signal()}, {1, 3, 2}, {10, 0, -2, 2, -2, 0}, 1e-5);  // np.fft.rfft(x)
    expect_op(dft(2, false, false), {real_signal()}, {1, 2, 2}, {3, 0, -1, 0}, 1e-5);         // np.fft.fft(x, 2)
    // zero-padded: np.fft.fft(x, 5)[1] = 1 e^0 + 2 w + 3 w^2 + 4 w^3, w = e^(-2 pi i / 5)
    expect_op(dft(5, false, false), {real_signal()}, {1, 5, 2},
              {10, 0, -4.0450850, -1.3143278, 1.5450850, -2.1266270, 1.5450850, 2.1266270, -4.0450850, 1.3143278},
              1e-5);
}

TEST(ops_dft, inverse_full_and_one_sided) {
    expect_op(dft(4, true, false), {spectrum()}, {1, 4, 2}, {1, 0, 2, 0, 3, 0, 4, 0}, 1e-5);  // np.fft.ifft(X)
    auto half = make(f32, {1, 3, 2}, {10, 0, -2, 2, -2, 0});
    expect_op(dft(4, true, true), {half}, {1, 4, 1}, {1, 2, 3, 4}, 1e-5);  // np.fft.irfft(X[:3], 4)
}

TEST(ops_dft, transforms_along_a_leading_axis) {
    // [4, 1, 1]: the same signal along axis 0
    expect_op(dft(4, false, false, 0), {make(f32, {4, 1, 1}, {1, 2, 3, 4})}, {4, 1, 2}, {10, 0, -2, 2, -2, 0, -2, -2},
              1e-5);
}

TEST(ops_dft, rejects_bad_inputs) {
    test::expect_shape_error(dft(4, false, false, 2), {shape{f32, {1, 4, 2}}}, {"dft", "last dim"});
    test::expect_shape_error(dft(4, false, false), {shape{f32, {1, 4, 3}}}, {"dft", "[..., 1]"});
    test::expect_shape_error(dft(4, false, true), {shape{f32, {1, 4, 2}}}, {"dft", "real input"});
    test::expect_shape_error(dft(4, true, true), {shape{f32, {1, 4, 1}}}, {"dft", "complex input"});
}
