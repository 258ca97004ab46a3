#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

instruction_ref add(module& m, const std::string& op, std::vector<instruction_ref> inputs, const value& attrs = {}) {
    return m.add_instruction(make_op(op, attrs), inputs);
}

instruction_ref scalar(module& m, float v) {
    return add_float_literal(m, {}, {v});
}

instruction_ref mean(module& m, instruction_ref x, std::vector<std::int64_t> axes) {
    return add(m, "reduce_mean", {x}, value_map{{"axes", ints(axes)}, {"keepdims", true}});
}

// x [3, 5, 16] normalized over `axes` the way pre-LayerNormalization exports spell it.
module decomposed(std::vector<std::int64_t> axes, bool pow_square, bool rsqrt, bool affine) {
    module m;
    auto x = m.add_parameter("x", float_shape({3, 5, 16}));
    auto d = add(m, "sub", {x, mean(m, x, axes)});
    auto sq = pow_square ? add(m, "pow", {d, scalar(m, 2)}) : add(m, "mul", {d, d});
    auto v = add(m, "add", {mean(m, sq, axes), scalar(m, 1e-5f)});
    auto y = rsqrt ? add(m, "mul", {add(m, "rsqrt", {v}), d}) : add(m, "div", {d, add(m, "sqrt", {v})});
    if (affine) {
        y = add(m, "mul", {y, m.add_parameter("scale", float_shape({16}))});
        y = add(m, "add", {m.add_parameter("bias", float_shape({16})), y});
    }
    m.add_return({y});
    return module(m);
}

}  // namespace

TEST(pass_fuse_layer_norm, pow_and_div_form_with_scale_and_bias) {
    module m = decomposed({-1}, true, false, true);
    module out = after_pass<fuse_layer_norm>(m);
    EXPECT_EQ(to_string(out),
              "module: \"main\"\n"
              "x = @param:x -> float_type, {3, 5, 16}, {80, 16, 1}\n"
              "scale = @param:scale -> float_type, {16}, {1}\n"
              "bias = @param:bias -> float_type, {16}, {1}\n"
              "@3 = layer_norm[axis=2,epsilon=9.99999975e-06](x,scale,bias) -> float_type, {3, 5, 16}, {80, 16, 1}\n"
              "@4 = @return(@3)\n");
    expect_same_outputs(m, out, 1e-5);
}

TEST(pass_fuse_layer_norm, product_and_rsqrt_form_over_two_axes) {
    module m = decomposed({1, 2}, false, true, false);
    module out = after_pass<fuse_layer_norm>(m);
    EXPECT_EQ(op_names(out), std::vector<std::string>{"layer_norm"}) << out;
    EXPECT_EQ(to_string(std::prev(std::prev(out.end()))->get_operator()), "layer_norm[axis=1,epsilon=9.99999975e-06]");
    expect_same_outputs(m, out, 1e-5);
}

TEST(pass_fuse_layer_norm, leading_axes_or_other_centres_are_left_alone) {
    EXPECT_EQ(count_ops(after_pass<fuse_layer_norm>(decomposed({0}, true, false, false)), "layer_norm"), 0u);
    EXPECT_EQ(count_ops(after_pass<fuse_layer_norm>(decomposed({0, 2}, true, false, false)), "layer_norm"), 0u);
    module m;
    auto x = m.add_parameter("x", float_shape({4, 8}));
    auto y = m.add_parameter("y", float_shape({4, 8}));
    auto d = add(m, "sub", {x, mean(m, y, {-1})});  // centred on another tensor's mean
    auto v = add(m, "add", {mean(m, add(m, "mul", {d, d}), {-1}), scalar(m, 1e-5f)});
    m.add_return({add(m, "div", {d, add(m, "sqrt", {v})})});
    EXPECT_EQ(count_ops(after_pass<fuse_layer_norm>(m), "layer_norm"), 0u);
}

TEST(pass_fuse_layer_norm, cpu_pipeline_matches_ref) {
    program p;
    *p.get_main_module() = decomposed({-1}, true, false, true);
    expect_cpu_matches_ref(p, 1e-5);
    program compiled = p;
    compiled.compile(get_target("cpu"));
    EXPECT_EQ(op_names(*compiled.get_main_module()), std::vector<std::string>{"layer_norm"})
        << *compiled.get_main_module();
}
