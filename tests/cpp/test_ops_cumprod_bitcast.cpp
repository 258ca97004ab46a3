// cumprod and bitcast. Expected values are numpy's (the expression is beside
// each); expect_op runs each op directly and on ref and cpu.
#include <gtest/gtest.h>

#include "kiln/op_registry.hpp"
#include "op_test_helpers.hpp"

using namespace kiln;
using test::expect_op;
using test::make;
using test::make_strided;

namespace {

constexpr auto f32 = dtype::float_type;
constexpr auto i32 = dtype::int32_type;

operation cumprod(std::int64_t axis, bool exclusive, bool reverse) {
    return make_op("cumprod", value_map{{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}});
}

}  // namespace

TEST(ops_cumprod, forward_exclusive_and_reverse) {
    auto c = make(f32, {2, 3}, {1, 2, 3, 4, 5, 6});
    expect_op(cumprod(1, false, false), {c}, {2, 3}, {1, 2, 6, 4, 20, 120});  // np.cumprod(c, 1)
    expect_op(cumprod(0, true, false), {c}, {2, 3}, {1, 1, 1, 1, 2, 3});      // shifted down, 1 first
    expect_op(cumprod(-1, false, true), {c}, {2, 3},
              {6, 6, 3, 120, 30, 6});                                     // np.flip(np.cumprod(np.flip(c, 1), 1), 1)
    expect_op(cumprod(1, true, true), {c}, {2, 3}, {6, 3, 1, 30, 6, 1});  // the same shifted left, 1 last
    // int32 data stored transposed
    auto ct = make_strided(i32, {2, 3}, {1, 2}, {1, 2, 3, 4, 5, 6});
    expect_op(cumprod(1, false, false), {ct}, {2, 3}, {1, 2, 6, 4, 20, 120});
}

TEST(ops_cumprod, rejects_bad_axis_and_bool) {
    test::expect_shape_error(cumprod(2, false, false), {shape{f32, {2, 3}}}, {"cumprod", "axis 2"});
    test::expect_shape_error(cumprod(0, false, false), {shape{dtype::bool_type, {2}}}, {"cumprod", "bool"});
}

TEST(ops_bitcast, reinterprets_bytes) {
    auto op = [](dtype t) { return make_op("bitcast", value_map{{"target_type", to_string(t)}}); };
    // np.array([1.0, -2.0, 0.5], np.float32).view(np.int32)
    expect_op(op(i32), {make(f32, {3}, {1.0, -2.0, 0.5})}, {3}, {1065353216, -1073741824, 1056964608});
    // np.array([-1, 1], np.int32).view(np.uint32)
    expect_op(op(dtype::uint32_type), {make(i32, {2}, {-1, 1})}, {2}, {4294967295.0, 1});
    // a transposed int16 view: np.array([[1, -1], [2, -2]], np.int16).T.view(np.uint16)
    auto t = make_strided(dtype::int16_type, {2, 2}, {1, 2}, {1, 2, -1, -2});
    expect_op(op(dtype::uint16_type), {t}, {2, 2}, {1, 2, 65535, 65534});
    // bool <-> uint8 keep 0 / 1
    expect_op(op(dtype::uint8_type), {make(dtype::bool_type, {2}, {1, 0})}, {2}, {1, 0});
    expect_op(op(f32), {make(i32, {}, {1065353216})}, {}, {1.0});
}

TEST(ops_bitcast, rejects_a_different_element_size) {
    auto op = make_op("bitcast", value_map{{"target_type", "int64_type"}});
    test::expect_shape_error(op, {shape{f32, {2}}}, {"bitcast", "float_type", "4 bytes", "int64_type"});
}
