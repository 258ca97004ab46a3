// quantize_fp16 / quantize_bf16 through the C++ API: the rewritten program's
// types, the cpu target running it in float32 with 16-bit weights (verifier
// on after every pass), agreement with ref, and errors.
#include <gtest/gtest.h>

#include "pass_test_helpers.hpp"
#include "test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

// x [4, 16] -> dot -> add bias -> relu -> dot -> softmax, and reduce_sum of the hidden layer.
program small_mlp() {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({4, 16}));
    auto h = m.add_instruction(make_op("dot"), {x, add_random_literal(m, {16, 32}, 1)});
    h = m.add_instruction(make_op("relu"), {m.add_instruction(make_op("add"), {h, add_random_literal(m, {32}, 2)})});
    auto y = m.add_instruction(make_op("softmax", value_map{{"axis", -1}}),
                               {m.add_instruction(make_op("dot"), {h, add_random_literal(m, {32, 8}, 3)})});
    auto sum = m.add_instruction(make_op("reduce_sum", value_map{{"axes", ints({1})}}), {h});
    m.add_return({y, sum});
    return p;
}

std::vector<std::string> result_types(const program& p, const std::string& op) {
    std::vector<std::string> types;
    for (const auto& ins : *p.get_main_module())
        if (ins.name() == op) types.push_back(to_string(ins.get_shape().type()));
    return types;
}

}  // namespace

TEST(quantize_16bit, fp16_weights_and_activations_float32_reductions_and_interface) {
    program p = small_mlp();
    quantize_fp16(p);
    for (const auto& ins : *p.get_main_module())
        if (ins.is_literal()) {
            EXPECT_EQ(ins.get_shape().type(), dtype::half_type);
        }
    EXPECT_EQ(result_types(p, "dot"), (std::vector<std::string>{"half_type", "half_type"}));
    EXPECT_EQ(result_types(p, "relu"), (std::vector<std::string>{"half_type"}));
    EXPECT_EQ(result_types(p, "softmax"), (std::vector<std::string>{"float_type"}));
    EXPECT_EQ(result_types(p, "reduce_sum"), (std::vector<std::string>{"float_type"}));
    EXPECT_EQ(p.get_parameter_shapes().at("x").type(), dtype::float_type);
    for (const auto& s : p.get_output_shapes()) EXPECT_EQ(s.type(), dtype::float_type);
}

TEST(quantize_16bit, cpu_computes_in_float32_with_16bit_weights_and_matches_ref) {
    for (auto quantize : {&quantize_fp16, &quantize_bf16}) {
        program p = small_mlp();
        quantize(p, {"all"});
        program compiled = p;
        compile_options options;
        options.verify_passes = true;
        compiled.compile(get_target("cpu"), options);
        // Only the weights stay 16-bit: every instruction computes in float32.
        for (const auto& ins : *compiled.get_main_module())
            if (!ins.is_literal() && !ins.is_return()) {
                EXPECT_EQ(ins.get_shape().type(), dtype::float_type) << ins.name();
            }
        const double tol = quantize == &quantize_fp16 ? 1e-2 : 6e-2;
        auto inputs = random_inputs(*p.get_main_module(), 5);
        auto want = run_on(p, "ref", inputs);
        auto got = compiled.eval(inputs);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t o = 0; o < want.size(); ++o)
            for (std::size_t i = 0; i < want[o].get_shape().elements(); ++i)
                EXPECT_NEAR(got[o].value_at(i), want[o].value_at(i), tol * (1 + std::fabs(want[o].value_at(i))));
    }
}

TEST(quantize_16bit, ins_names_choose_ops) {
    program p = small_mlp();
    quantize_bf16(p, {"dot"});
    EXPECT_EQ(result_types(p, "dot"), (std::vector<std::string>{"bf16_type", "bf16_type"}));
    EXPECT_EQ(result_types(p, "relu"), (std::vector<std::string>{"float_type"}));
    EXPECT_EQ(result_types(p, "add"), (std::vector<std::string>{"float_type"}));
}

TEST(quantize_16bit, errors_name_the_problem_and_leave_the_program) {
    program p = small_mlp();
    const std::string before = to_string(p);
    try {
        quantize_fp16(p, {"dot", "dott"});
        FAIL() << "expected an error";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("'dott'"), std::string::npos) << e.what();
        EXPECT_EQ(e.kind(), error_kind::invalid_argument);
    }
    EXPECT_THROW(quantize_bf16(p, {}), error);
    EXPECT_EQ(to_string(p), before);
    p.compile(get_target("ref"));
    EXPECT_THROW(quantize_fp16(p), error);
}
