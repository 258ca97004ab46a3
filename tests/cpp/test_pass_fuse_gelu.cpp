#include <cmath>

#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

instruction_ref add(module& m, const std::string& op, std::vector<instruction_ref> inputs) {
    return m.add_instruction(make_op(op), inputs);
}

instruction_ref scalar(module& m, float v) {
    return add_float_literal(m, {}, {v});
}

// Builds a module whose output is body(m, x) for x [4, 33] and relu after
// it (so that the gelu is not the return's only input).
module with_body(const std::function<instruction_ref(module&, instruction_ref)>& body) {
    module m;
    auto x = m.add_parameter("x", float_shape({4, 33}));
    m.add_return({add(m, "relu", {body(m, x)})});
    return module(m);
}

const float sqrt2 = 1.41421356f;
const float sqrt_2_over_pi = 0.797884560f;

}  // namespace

TEST(pass_fuse_gelu, torch_export_erf_form) {
    // x * (0.5 * (erf(x / sqrt2) + 1)), as torch.onnx.export writes BERT's
    module m = with_body([](module& mm, instruction_ref x) {
        auto e = add(mm, "erf", {add(mm, "div", {x, scalar(mm, sqrt2)})});
        auto half = add(mm, "mul", {scalar(mm, 0.5f), add(mm, "add", {e, scalar(mm, 1)})});
        return add(mm, "mul", {x, half});
    });
    module out = after_pass<fuse_gelu>(m);
    EXPECT_EQ(to_string(out),
              "module: \"main\"\n"
              "x = @param:x -> float_type, {4, 33}, {33, 1}\n"
              "@1 = gelu[approximate=\"none\"](x) -> float_type, {4, 33}, {33, 1}\n"
              "@2 = relu(@1) -> float_type, {4, 33}, {33, 1}\n"
              "@3 = @return(@2)\n");
    expect_same_outputs(m, out, 1e-6);
}

TEST(pass_fuse_gelu, onnx_gelu_erf_form_with_the_half_last) {
    // (x * (1 + erf(x * (1/sqrt2)))) * 0.5, as Kiln's ONNX importer expands Gelu
    module m = with_body([](module& mm, instruction_ref x) {
        auto e = add(mm, "erf", {add(mm, "mul", {x, scalar(mm, 0.70710678f)})});
        auto prod = add(mm, "mul", {x, add(mm, "add", {scalar(mm, 1), e})});
        return add(mm, "mul", {prod, scalar(mm, 0.5f)});
    });
    module out = after_pass<fuse_gelu>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"gelu", "relu"})) << out;
    expect_same_outputs(m, out, 1e-6);
}

TEST(pass_fuse_gelu, gpt2_tanh_form_with_pow) {
    // (x * 0.5) * (1 + tanh((x + pow(x, 3) * 0.044715) * sqrt(2/pi)))
    module m = with_body([](module& mm, instruction_ref x) {
        auto cube = add(mm, "pow", {x, scalar(mm, 3)});
        auto inner = add(mm, "add", {x, add(mm, "mul", {cube, scalar(mm, 0.044715f)})});
        auto t = add(mm, "tanh", {add(mm, "mul", {inner, scalar(mm, sqrt_2_over_pi)})});
        return add(mm, "mul", {add(mm, "mul", {x, scalar(mm, 0.5f)}), add(mm, "add", {t, scalar(mm, 1)})});
    });
    module out = after_pass<fuse_gelu>(m);
    ASSERT_EQ(op_names(out), (std::vector<std::string>{"gelu", "relu"})) << out;
    EXPECT_EQ(to_string(std::next(out.begin())->get_operator()), "gelu[approximate=\"tanh\"]");
    expect_same_outputs(m, out, 1e-6);
}

TEST(pass_fuse_gelu, tanh_form_with_a_product_cube_and_a_division_by_two) {
    // (x * (1 + tanh(sqrt(2/pi) * (0.044715 * (x * x * x) + x)))) / 2
    module m = with_body([](module& mm, instruction_ref x) {
        auto cube = add(mm, "mul", {add(mm, "mul", {x, x}), x});
        auto inner = add(mm, "add", {add(mm, "mul", {scalar(mm, 0.044715f), cube}), x});
        auto t = add(mm, "tanh", {add(mm, "mul", {scalar(mm, sqrt_2_over_pi), inner})});
        return add(mm, "div", {add(mm, "mul", {x, add(mm, "add", {scalar(mm, 1), t})}), scalar(mm, 2)});
    });
    module out = after_pass<fuse_gelu>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"gelu", "relu"})) << out;
    expect_same_outputs(m, out, 1e-6);
}

TEST(pass_fuse_gelu, near_misses_are_left_alone) {
    auto erf_form = [](float half, float divisor, bool other_x) {
        return with_body([=](module& mm, instruction_ref x) {
            auto y = other_x ? add(mm, "neg", {x}) : x;
            auto e = add(mm, "erf", {add(mm, "div", {y, scalar(mm, divisor)})});
            return add(mm, "mul", {x, add(mm, "mul", {scalar(mm, half), add(mm, "add", {e, scalar(mm, 1)})})});
        });
    };
    EXPECT_EQ(count_ops(after_pass<fuse_gelu>(erf_form(0.6f, sqrt2, false)), "gelu"), 0u);
    EXPECT_EQ(count_ops(after_pass<fuse_gelu>(erf_form(0.5f, 1.5f, false)), "gelu"), 0u);
    EXPECT_EQ(count_ops(after_pass<fuse_gelu>(erf_form(0.5f, sqrt2, true)), "gelu"), 0u);
    EXPECT_EQ(count_ops(after_pass<fuse_gelu>(erf_form(0.5f, sqrt2, false)), "gelu"), 1u);
}

TEST(pass_fuse_gelu, cpu_pipeline_recognizes_and_matches_ref) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", float_shape({3, 65}));
    auto e = add(*m, "erf", {add(*m, "div", {x, scalar(*m, sqrt2)})});
    auto g = add(*m, "mul", {x, add(*m, "mul", {scalar(*m, 0.5f), add(*m, "add", {e, scalar(*m, 1)})})});
    m->add_return({g});
    expect_cpu_matches_ref(p, 2e-6);
    program compiled = p;
    compiled.compile(get_target("cpu"));
    EXPECT_EQ(op_names(*compiled.get_main_module()), std::vector<std::string>{"gelu"}) << *compiled.get_main_module();
}
