#include <gtest/gtest.h>

#include "test_helpers.hpp"

using namespace kiln;

namespace {
program add_relu_program() {
    program p;
    module* m = p.get_main_module();
    shape s{dtype::float_type, {2, 3}};
    auto x = m->add_parameter("x", s);
    auto c = m->add_literal(literal(shape{dtype::float_type, {3}}, std::vector<float>{1.0f, -2.0f, 0.5f}));
    auto sum = m->add_instruction(make_op("add"), {x, c});
    auto r = m->add_instruction(make_op("relu"), {sum});
    m->add_return({r});
    return p;
}
}  // namespace

TEST(program, add_relu_matches_hand_computed_on_every_target) {
    program p = add_relu_program();
    auto x = test::make_argument(shape{dtype::float_type, {2, 3}}, {0, 1, 2, -3, 4, -5});
    // relu(x + {1, -2, 0.5}) computed by hand
    std::vector<float> expected = {1, 0, 2.5, 0, 2, 0};
    for (const auto* t : {"ref", "cpu"}) {
        auto out = test::run_on(p, t, {{"x", x}});
        ASSERT_EQ(out.size(), 1u) << t;
        EXPECT_EQ(out[0].to_vector<float>(), expected) << t;
    }
}

TEST(program, prints_text_form) {
    program p = add_relu_program();
    std::string text = to_string(p);
    EXPECT_NE(text.find("module: \"main\""), std::string::npos);
    EXPECT_NE(text.find("x = @param:x -> float_type, {2, 3}, {3, 1}"), std::string::npos) << text;
    EXPECT_NE(text.find("@2 = add(x,@1) -> float_type, {2, 3}, {3, 1}"), std::string::npos) << text;
    EXPECT_NE(text.find("@3 = relu(@2) -> float_type, {2, 3}, {3, 1}"), std::string::npos) << text;
    EXPECT_NE(text.find("@4 = @return(@3)"), std::string::npos) << text;
}

TEST(program, run_rejects_wrong_inputs_naming_the_parameter) {
    program p = add_relu_program();
    p.compile(get_target("cpu"));
    auto bad_shape = argument(shape{dtype::float_type, {3, 2}});
    try {
        p.eval({{"x", bad_shape}});
        FAIL() << "expected an error";
    } catch (const error& e) {
        EXPECT_EQ(e.kind(), error_kind::invalid_argument);
        EXPECT_NE(std::string(e.what()).find("'x'"), std::string::npos) << e.what();
    }
    EXPECT_THROW(p.eval({{"x", argument(shape{dtype::int32_type, {2, 3}})}}), error);
    EXPECT_THROW(p.eval({{"y", argument(shape{dtype::float_type, {2, 3}})}}), error);
    EXPECT_THROW(p.eval({}), error);
}
