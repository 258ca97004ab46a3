#include <gtest/gtest.h>

#include <cmath>

#include "op_test_helpers.hpp"

using namespace kiln;
using test::expect_op;
using test::expect_shape_error;
using test::make;

namespace {
const dtype f32 = dtype::float_type;
const double tol = 2e-6;  // expected values are printed with 7 significant digits

// numpy: ((np.arange(n) % mod) - off) / div
std::vector<double> pattern(std::size_t n, std::size_t mod, double off, double div) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = (static_cast<double>(i % mod) - off) / div;
    return v;
}

// x = torch.tensor(pattern(24, 7, 3, 2)).reshape(2, 3, 4)
argument x234() {
    return make(f32, {2, 3, 4}, pattern(24, 7, 3, 2));
}

operation with_axis(const char* name, std::int64_t axis) {
    return make_op(name, value_map{{"axis", value(axis)}});
}
}  // namespace

// Expected values come from torch (expression in each comment, in float64)
// on the inputs built by pattern().

TEST(softmax_op, last_axis_by_default) {
    // torch.softmax(x, -1)
    expect_op(make_op("softmax"), {x234()}, {2, 3, 4},
              {0.1015363, 0.1674051, 0.2760043, 0.4550542, 0.1817409, 0.2996401,  0.494023,   0.02459596,
               0.1015363, 0.1674051, 0.2760043, 0.4550542, 0.3489011, 0.5752407,  0.02863955, 0.04721863,
               0.1015363, 0.1674051, 0.2760043, 0.4550542, 0.7891368, 0.03928881, 0.0647763,  0.1067981},
              tol);
}

TEST(softmax_op, middle_axis) {
    // torch.softmax(x, 1)
    expect_op(with_axis("softmax", 1), {x234()}, {2, 3, 4},
              {0.09962365, 0.09962365, 0.09962365, 0.3482074, 0.7361247, 0.7361247,  0.7361247,  0.07769558,
               0.1642516,  0.1642516,  0.1642516,  0.574097,  0.3482074, 0.785597,   0.09962365, 0.09962365,
               0.07769558, 0.1752904,  0.7361247,  0.7361247, 0.574097,  0.03911257, 0.1642516,  0.1642516},
              tol);
}

TEST(softmax_op, stable_for_large_inputs) {
    // torch.softmax(torch.tensor([1000., 1001., 1002.]), 0): exp(1000) would overflow
    expect_op(make_op("softmax"), {make(f32, {3}, {1000, 1001, 1002})}, {3}, {0.09003057, 0.2447285, 0.6652409}, tol);
    expect_op(make_op("log_softmax"), {make(f32, {2}, {1000, 1000})}, {2}, {-0.6931472, -0.6931472}, tol);
}

TEST(softmax_op, reads_transposed_input_and_half) {
    // Logical [[1,2],[3,4],[5,6]] stored column-major; softmax over axis 0 of each
    // column [1,3,5]: np.exp([-4,-2,0]) / np.exp([-4,-2,0]).sum()
    auto t = test::make_strided(f32, {3, 2}, {1, 3}, {1, 2, 3, 4, 5, 6});
    expect_op(with_axis("softmax", 0), {t}, {3, 2},
              {0.01587624, 0.01587624, 0.1173104, 0.1173104, 0.8668133, 0.8668133}, tol);
    // softmax([0, ln 3]) = [0.25, 0.75]
    auto h = make(dtype::half_type, {2}, {0, 1.0986123});
    expect_op(make_op("softmax"), {h}, {2}, {0.25, 0.75}, 1e-3);
}

TEST(log_softmax_op, first_axis) {
    // torch.log_softmax(x, 0)
    expect_op(with_axis("log_softmax", -3), {x234()}, {2, 3, 4},
              {-2.57889,  -2.57889,   -0.3132617, -0.3132617,  -0.3132617,  -0.3132617,  -0.3132617, -2.57889,
               -2.57889,  -0.3132617, -0.3132617, -0.3132617,  -0.07888973, -0.07888973, -1.313262,  -1.313262,
               -1.313262, -1.313262,  -1.313262,  -0.07888973, -0.07888973, -1.313262,   -1.313262,  -1.313262},
              tol);
}

TEST(softmax_op, rejects_bad_inputs) {
    expect_shape_error(with_axis("softmax", 2), {shape{f32, {2, 3}}}, {"softmax", "axis 2", "rank 2"});
    expect_shape_error(make_op("log_softmax"), {shape{dtype::int32_type, {3}}}, {"log_softmax", "floating"});
    expect_shape_error(make_op("softmax"), {shape{f32, {}}}, {"softmax", "rank 0"});
    expect_shape_error(make_op("softmax"), {}, {"softmax", "expected 1 input"});
}

namespace {
// scale, bias, mean, variance for 3 channels
std::vector<argument> bn_params() {
    return {make(f32, {3}, {0.5, -1.0, 2.0}), make(f32, {3}, {0.1, 0.2, -0.3}), make(f32, {3}, {0.25, -0.5, 0.0}),
            make(f32, {3}, {1.0, 0.5, 2.0})};
}
std::vector<argument> bn_inputs(const argument& x) {
    std::vector<argument> in{x};
    for (auto& p : bn_params()) in.push_back(p);
    return in;
}
}  // namespace

TEST(batch_norm_inference_op, matches_torch) {
    // F.batch_norm(x, mean, var, scale, bias, training=False, eps=...) with
    // x = pattern(24, 11, 5, 3).reshape(2,3,2,2), scale [0.5,-1,2], bias [0.1,0.2,-0.3],
    // mean [0.25,-0.5,0], var [1,0.5,2]
    auto x = make(f32, {2, 3, 2, 2}, pattern(24, 11, 5, 3));
    expect_op(make_op("batch_norm_inference"), bn_inputs(x), {2, 3, 2, 2},
              {-0.8583285, -0.6916627, -0.5249969, -0.358331, -0.0356999, -0.5070997, -0.9784995, -1.449899,
               1.11421,    1.585613,   2.057017,   -2.657017, -0.6916627, -0.5249969, -0.358331,  -0.1916652,
               -0.5070997, -0.9784995, -1.449899,  -1.921299, 1.585613,   2.057017,   -2.657017,  -2.185613},
              tol);
    // eps=0.1
    expect_op(make_op("batch_norm_inference", value_map{{"epsilon", 0.1}}), bn_inputs(x), {2, 3, 2, 2},
              {-0.813735,  -0.6548245, -0.4959141, -0.3370037, -0.01516574, -0.4454972, -0.8758287, -1.30616,
               1.080131,   1.540175,   2.000219,   -2.600219,  -0.6548245,  -0.4959141, -0.3370037, -0.1780933,
               -0.4454972, -0.8758287, -1.30616,   -1.736492,  1.540175,    2.000219,   -2.600219,  -2.140175},
              tol);
}

TEST(batch_norm_inference_op, rank_two_and_broadcast_input) {
    // x [[1, 2, 3]] repeated over 2 rows (stride 0): per channel (x - mean) / sqrt(var + 1e-5) * scale + bias
    auto x = test::make_strided(f32, {2, 3}, {0, 1}, {1, 2, 3, 1, 2, 3});
    // by hand: 0.5*(0.75)/sqrt(1.00001)+0.1, -1*(2.5)/sqrt(0.50001)+0.2, 2*3/sqrt(2.00001)-0.3
    double c0 = 0.5 * 0.75 / std::sqrt(1.00001) + 0.1;
    double c1 = -2.5 / std::sqrt(0.50001) + 0.2;
    double c2 = 6.0 / std::sqrt(2.00001) - 0.3;
    expect_op(make_op("batch_norm_inference"), bn_inputs(x), {2, 3}, {c0, c1, c2, c0, c1, c2}, tol);
}

TEST(batch_norm_inference_op, rejects_bad_inputs) {
    shape x{f32, {2, 3, 4}};
    shape c{f32, {3}};
    auto op = make_op("batch_norm_inference");
    expect_shape_error(op, {x, c, c, shape{f32, {4}}, c}, {"batch_norm_inference", "mean", "{3}", "{4}"});
    expect_shape_error(op, {x, c, c, c, shape{f32, {1, 3}}}, {"batch_norm_inference", "variance"});
    expect_shape_error(op, {shape{f32, {3}}, c, c, c, c}, {"batch_norm_inference", "[N, C, ...]"});
    expect_shape_error(op, {x, c, c, c}, {"batch_norm_inference", "expected 5 inputs"});
    expect_shape_error(op, {x, c, c, c, shape{dtype::double_type, {3}}}, {"batch_norm_inference", "double_type"});
    shape i{dtype::int32_type, {2, 3}};
    shape ic{dtype::int32_type, {3}};
    expect_shape_error(op, {i, ic, ic, ic, ic}, {"batch_norm_inference", "floating"});
}

namespace {
const std::vector<double> gamma4 = {0.5, 1, 1.5, 2};        // pattern(4, 5, 1, 2) + 1
const std::vector<double> beta4 = {-0.25, 0, 0.25, -0.25};  // pattern(4, 3, 1, 4)
}  // namespace

TEST(layer_norm_op, last_axis_with_scale_and_bias) {
    // F.layer_norm(x, (4,), gamma4, beta4, eps=1e-5)
    expect_op(make_op("layer_norm"), {x234(), make(f32, {4}, gamma4), make(f32, {4}, beta4)}, {2, 3, 4},
              {-0.9208097, -0.4472064, 0.9208097, 2.433239, -0.1951181, 0.5488192,  1.731812,   -3.542915,
               -0.9208097, -0.4472064, 0.9208097, 2.433239, 0.1422311,  1.176693,   -1.51504,   -1.818924,
               -0.9208097, -0.4472064, 0.9208097, 2.433239, 0.5732288,  -0.9878745, -0.5732288, -0.4695277},
              tol);
}

TEST(layer_norm_op, two_trailing_axes_without_parameters) {
    // F.layer_norm(x, (3, 4), eps=1e-3)
    expect_op(make_op("layer_norm", value_map{{"axis", value(1)}, {"epsilon", 1e-3}}), {x234()}, {2, 3, 4},
              {-1.398191,  -0.8569555, -0.3157204, 0.2255146, 0.7667496, 1.307985,  1.84922,    -1.398191,
               -0.8569555, -0.3157204, 0.2255146,  0.7667496, 0.9734364, 1.440686,  -1.362811,  -0.8955615,
               -0.428312,  0.03893746, 0.5061869,  0.9734364, 1.440686,  -1.362811, -0.8955615, -0.428312},
              tol);
}

TEST(layer_norm_op, scale_broadcasts_over_normalized_dims) {
    // numpy: (x - x.mean((1,2), keepdims=True)) / np.sqrt(x.var((1,2), keepdims=True) + 1e-5) * gamma4.reshape(1,4)
    expect_op(make_op("layer_norm", value_map{{"axis", value(-2)}}), {x234(), make(f32, {1, 4}, gamma4)}, {2, 3, 4},
              {-0.6995011, -0.857453,  -0.4738556, 0.451291, 0.3835974, 1.308744, 2.77544,   -2.798004,
               -0.4287265, -0.3159037, 0.3384683,  1.53439,  0.4869287, 1.441309, -2.045101, -1.791898,
               -0.2142486, 0.0389543,  0.7596088,  1.947715, 0.7206545, -1.3634,  -1.343923, -0.8569946},
              tol);
}

TEST(layer_norm_op, reads_transposed_input) {
    // Logical [[1,2,3],[4,6,8]] stored column-major; each row normalized by hand:
    // row 0: mean 2, var 2/3; row 1: mean 6, var 8/3
    auto t = test::make_strided(f32, {2, 3}, {1, 2}, {1, 2, 3, 4, 6, 8});
    double a = 1 / std::sqrt(2.0 / 3.0 + 1e-5);
    double b = 2 / std::sqrt(8.0 / 3.0 + 1e-5);
    expect_op(make_op("layer_norm"), {t}, {2, 3}, {-a, 0, a, -b, 0, b}, tol);
}

TEST(layer_norm_op, rejects_bad_inputs) {
    shape x{f32, {2, 3, 4}};
    expect_shape_error(make_op("layer_norm"), {x, shape{f32, {3}}}, {"layer_norm", "scale {3}", "{4}"});
    expect_shape_error(make_op("layer_norm"), {x, shape{f32, {4}}, shape{f32, {3, 4}}},
                       {"layer_norm", "bias {3, 4}", "normalized dimensions {4}"});
    expect_shape_error(with_axis("layer_norm", 3), {x}, {"layer_norm", "axis 3", "rank 3"});
    expect_shape_error(make_op("layer_norm"), {x, x, x, x}, {"layer_norm", "1 to 3 inputs"});
    expect_shape_error(make_op("layer_norm"), {shape{dtype::int8_type, {4}}}, {"layer_norm", "floating"});
    expect_shape_error(make_op("layer_norm"), {x, shape{dtype::half_type, {4}}}, {"layer_norm", "half_type"});
}
