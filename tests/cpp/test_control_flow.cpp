// Control flow in the IR: tuple shapes, if and loop with module arguments,
// get_tuple_elem; printing, the verifier, passes on submodules, save/load
// and both targets. Expected values are computed here with plain loops.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "shared_test_programs.hpp"
#include "test_helpers.hpp"

using namespace kiln;

namespace {

const shape vec3{dtype::float_type, {3}};

void expect_error_containing(const std::function<void()>& f, const std::string& needle) {
    try {
        f();
        FAIL() << "expected an error containing '" << needle << "'";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

operation elem(std::int64_t i) {
    return make_op("get_tuple_elem", value_map{{"index", i}});
}

using test::if_program;  // main(c, x) = if c then (-x, x * x) else (|x|, x + 1.5)

parameter_map if_inputs(bool c, const std::vector<float>& x) {
    literal cond(shape{dtype::bool_type}, std::vector<int>{c ? 1 : 0});
    return {{"c", cond.get_argument()}, {"x", test::make_argument(vec3, x)}};
}

// main(n, x0, step): carried acc starts at x0 and adds step * (i + 1) each
// iteration i; the scan output records acc after each iteration.
program loop_program(std::int64_t iterations) {
    program p;
    module* body = p.create_module("body");
    {
        auto i = body->add_parameter("i", shape{dtype::int64_type});
        auto cond = body->add_parameter("cond", shape{dtype::bool_type});
        auto acc = body->add_parameter("acc", vec3);
        auto step = body->add_parameter("step", vec3);
        auto one = body->add_literal(literal(shape{dtype::int64_type}, std::vector<int>{1}));
        auto k = body->add_instruction(make_op("convert", value_map{{"target_type", value("float")}}),
                                       {body->add_instruction(make_op("add"), {i, one})});
        auto scaled = body->add_instruction(make_op("mul"), {step, k});
        auto next = body->add_instruction(make_op("add"), {acc, scaled});
        body->add_return({cond, next, next});
    }
    module* m = p.get_main_module();
    auto n = m->add_parameter("n", shape{dtype::int64_type});
    auto x0 = m->add_parameter("x0", vec3);
    auto step = m->add_parameter("step", vec3);
    auto yes = m->add_literal(literal(shape{dtype::bool_type}, std::vector<int>{1}));
    auto l = m->add_instruction(make_op("loop", value_map{{"carried", 1}, {"iterations", iterations}}),
                                {n, yes, x0, step}, {body});
    m->add_return({m->add_instruction(elem(0), {l}), m->add_instruction(elem(1), {l})});
    return p;
}

parameter_map loop_inputs(std::int64_t n) {
    literal count(shape{dtype::int64_type}, std::vector<std::int64_t>{n});
    return {{"n", count.get_argument()},
            {"x0", test::make_argument(vec3, {1, 2, 3})},
            {"step", test::make_argument(vec3, {0.5f, -1, 2})}};
}

void expect_values(const argument& a, const std::vector<float>& expected) {
    auto got = a.to_vector<float>();
    ASSERT_EQ(got.size(), expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], expected[i]) << "element " << i;
}

}  // namespace

TEST(tuple_shape, packs_elements_at_aligned_offsets) {
    shape t = shape::tuple(
        {shape{dtype::float_type, {3}}, shape{dtype::int64_type, {2, 2}, {1, 2}}, shape{dtype::bool_type}});
    EXPECT_TRUE(t.is_tuple());
    EXPECT_EQ(t.type(), dtype::uint8_type);
    ASSERT_EQ(t.sub_shapes().size(), 3u);
    EXPECT_TRUE(t.sub_shapes()[1].standard());  // elements are stored standard
    EXPECT_EQ(t.tuple_offset(0), 0u);
    EXPECT_EQ(t.tuple_offset(1), 64u);
    EXPECT_EQ(t.tuple_offset(2), 128u);
    EXPECT_EQ(t.bytes(), 129u);
    EXPECT_EQ(to_string(t), "tuple{float_type, {3}, {1}; int64_type, {2, 2}, {2, 1}; bool_type, {}, {}}");
    EXPECT_NE(t, shape(dtype::uint8_type, {129}));
    EXPECT_EQ(t, shape::tuple(t.sub_shapes()));
    EXPECT_THROW(shape::tuple({}), error);
    EXPECT_THROW(shape::tuple({t}), error);
}

TEST(control_flow, if_prints_its_branches_and_verifies) {
    program p = if_program();
    EXPECT_NO_THROW(verify_program(p));
    std::string text = to_string(p);
    EXPECT_NE(text.find("if(c,x), [then], [else] -> tuple{float_type, {3}, {1}; float_type, {3}, {1}}"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("get_tuple_elem[index=1]"), std::string::npos) << text;
    EXPECT_NE(text.find("module: \"then\""), std::string::npos) << text;
}

TEST(control_flow, if_runs_the_chosen_branch_on_both_targets) {
    program p = if_program();
    const std::vector<float> x{-1.0f, 2.0f, -3.5f};
    for (const char* t : {"ref", "cpu"}) {
        auto yes = test::run_on(p, t, if_inputs(true, x));
        ASSERT_EQ(yes.size(), 2u);
        expect_values(yes[0], {1.0f, -2.0f, 3.5f});
        expect_values(yes[1], {1.0f, 4.0f, 12.25f});
        auto no = test::run_on(p, t, if_inputs(false, x));
        expect_values(no[0], {1.0f, 2.0f, 3.5f});
        expect_values(no[1], {0.5f, 3.5f, -2.0f});
    }
}

TEST(control_flow, if_branches_with_different_shapes_are_rejected) {
    program p;
    module* a = p.create_module("a");
    module* b = p.create_module("b");
    a->add_return({a->add_literal(literal(vec3, std::vector<float>{1, 2, 3}))});
    b->add_return({b->add_literal(literal(shape{dtype::float_type, {2}}, std::vector<float>{1, 2}))});
    module* m = p.get_main_module();
    auto c = m->add_parameter("c", shape{dtype::bool_type});
    expect_error_containing(
        [&] {
            m->add_instruction(make_op("if"), {c}, {a, b});
        },
        "output 0 is float_type {3} in the then branch (module 'a') but float_type {2} in the else "
        "branch (module 'b')");
    expect_error_containing([&] { m->add_instruction(make_op("if"), {c}, {a}); }, "takes two module arguments");
    expect_error_containing([&] { m->add_instruction(make_op("if"), {c}); }, "takes two module arguments");
    // A non-bool condition, and a branch whose parameters do not take the captured values.
    auto x = m->add_parameter("x", vec3);
    expect_error_containing(
        [&] {
            m->add_instruction(make_op("if"), {x}, {a, a});
        },
        "the condition must be one bool_type");
    expect_error_containing(
        [&] {
            m->add_instruction(make_op("if"), {c, x}, {a, a});
        },
        "module 'a' has 0 parameters, expected 1");
    // Ops without modules refuse them.
    expect_error_containing([&] { m->add_instruction(make_op("neg"), {x}, {a}); }, "takes no module arguments");
}

TEST(control_flow, verifier_rejects_tuples_outside_get_tuple_elem_and_recursion) {
    {
        program p = if_program();
        module* m = p.get_main_module();
        auto ret = m->get_return();
        auto t = ret->inputs()[0]->inputs()[0];
        m->replace_instruction(ret, ret->get_operator(), {t});
        expect_error_containing([&] { verify_program(p); }, "is a tuple read by");
    }
    {
        program p = if_program();
        module* then_branch = p.get_module("then");
        auto ret = then_branch->get_return();
        auto x = then_branch->get_parameter("x");
        auto flag = then_branch->insert_literal(ret, literal(shape{dtype::bool_type}, std::vector<int>{1}));
        // then runs if, which runs then again.
        then_branch->insert_instruction(ret, make_op("if"), {flag, x}, {then_branch, p.get_module("else")});
        expect_error_containing([&] { verify_program(p); }, "takes itself as an argument");
        std::string bytes = save_buffer(p);
        expect_error_containing([&] { load_buffer(bytes.data(), bytes.size()); }, "takes itself as an argument");
    }
}

TEST(control_flow, loop_carries_values_and_stacks_scan_outputs_on_both_targets) {
    program p = loop_program(4);
    EXPECT_NO_THROW(verify_program(p));
    // Expected: acc_k = acc_{k-1} + step * k for k = 1..4.
    std::vector<float> acc{1, 2, 3};
    const std::vector<float> step{0.5f, -1, 2};
    std::vector<float> rows;
    for (int k = 1; k <= 4; ++k) {
        for (std::size_t j = 0; j < 3; ++j) acc[j] += step[j] * static_cast<float>(k);
        rows.insert(rows.end(), acc.begin(), acc.end());
    }
    for (const char* t : {"ref", "cpu"}) {
        auto out = test::run_on(p, t, loop_inputs(4));
        ASSERT_EQ(out.size(), 2u);
        EXPECT_EQ(out[1].get_shape().lens(), (std::vector<std::size_t>{4, 3}));
        expect_values(out[0], acc);
        expect_values(out[1], rows);
        // Fewer iterations than the scan outputs were compiled for is a clear run-time error.
        expect_error_containing([&] { test::run_on(p, t, loop_inputs(2)); },
                                "ran 2 times but the scan outputs were compiled for 4 iterations");
        expect_error_containing([&] { test::run_on(p, t, loop_inputs(9)); }, "more than the 4 times");
    }
}

TEST(control_flow, loop_without_scan_outputs_may_stop_on_its_condition) {
    // while (acc < 10) acc = acc * 2, with no trip count limit to speak of.
    program p;
    module* body = p.create_module("body");
    shape scalar{dtype::float_type};
    {
        body->add_parameter("i", shape{dtype::int64_type});
        body->add_parameter("cond", shape{dtype::bool_type});
        auto acc = body->add_parameter("acc", scalar);
        auto two = body->add_literal(literal(scalar, std::vector<float>{2}));
        auto ten = body->add_literal(literal(scalar, std::vector<float>{10}));
        auto next = body->add_instruction(make_op("mul"), {acc, two});
        body->add_return({body->add_instruction(make_op("less"), {next, ten}), next});
    }
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", scalar);
    auto many = m->add_literal(literal(shape{dtype::int64_type}, std::vector<std::int64_t>{1000}));
    auto yes = m->add_literal(literal(shape{dtype::bool_type}, std::vector<int>{1}));
    auto l = m->add_instruction(make_op("loop", value_map{{"carried", 1}}), {many, yes, x}, {body});
    m->add_return({m->add_instruction(elem(0), {l})});
    for (const char* t : {"ref", "cpu"}) {
        auto out = test::run_on(p, t, {{"x", test::make_argument(scalar, {0.7f})}});
        expect_values(out[0], {11.2f});  // 0.7 -> 1.4 -> 2.8 -> 5.6 -> 11.2
    }
}

TEST(control_flow, loop_signature_errors_name_the_problem) {
    program p = loop_program(4);
    module* m = p.get_main_module();
    module* body = p.get_module("body");
    auto n = m->get_parameter("n");
    auto x0 = m->get_parameter("x0");
    auto yes = m->add_literal(literal(shape{dtype::bool_type}, std::vector<int>{1}));
    auto loop_op = make_op("loop", value_map{{"carried", 1}, {"iterations", 4}});
    expect_error_containing(
        [&] {
            m->add_instruction(loop_op, {n, yes, x0}, {body});
        },
        "module 'body' has 4 parameters, expected 3");
    expect_error_containing(
        [&] {
            m->add_instruction(loop_op, {x0, yes, x0, x0}, {body});
        },
        "the trip count must be one int64_type");
    auto wide = m->add_parameter("wide", shape{dtype::float_type, {4}});
    expect_error_containing(
        [&] {
            m->add_instruction(loop_op, {n, yes, wide, x0}, {body});
        },
        "parameter 2 of module 'body' is float_type {3} but receives float_type {4}");
}

TEST(control_flow, passes_run_on_submodules_and_keep_results) {
    program p = loop_program(3);
    // A constant expression inside the body that constant propagation folds.
    module* body = p.get_module("body");
    auto ret = body->get_return();
    auto a = body->insert_literal(ret, literal(vec3, std::vector<float>{1, 1, 1}));
    auto sum = body->insert_instruction(ret, make_op("add"), {a, a});
    auto dead = body->insert_instruction(ret, make_op("neg"), {sum});
    (void)dead;
    auto expected = test::run_on(p, "ref", loop_inputs(3));
    program compiled = p;
    compiled.compile(get_target("cpu"));
    std::string text = to_string(*compiled.get_module("body"));
    EXPECT_EQ(text.find("neg"), std::string::npos) << text;  // dead code removed inside the body
    auto got = compiled.eval(loop_inputs(3));
    ASSERT_EQ(got.size(), expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(values_equal(got[i], expected[i]));
}

TEST(control_flow, save_and_load_keep_programs_and_compiled_plans) {
    for (const char* t : {"ref", "cpu"}) {
        program p = loop_program(3);
        auto expected = test::run_on(p, "ref", loop_inputs(3));
        std::string plain = save_buffer(p);
        program q = load_buffer(plain.data(), plain.size());
        EXPECT_EQ(to_string(q), to_string(p));
        p.compile(get_target(t));
        std::string compiled = save_buffer(p);
        program r = load_buffer(compiled.data(), compiled.size());
        ASSERT_TRUE(r.is_compiled());
        auto got = r.eval(loop_inputs(3));
        for (std::size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(values_equal(got[i], expected[i])) << t;
    }
}

TEST(control_flow, copies_of_programs_own_their_modules) {
    auto expected = test::run_on(if_program(), "ref", if_inputs(false, {1, -2, 3}));
    program copy;
    {
        program p = if_program();
        p.compile(get_target("ref"));
        copy = p;
        for (const auto& ins : *copy.get_main_module())
            for (const module* sub : ins.module_inputs()) EXPECT_EQ(sub, copy.get_module(sub->name()));
    }  // p and its modules are gone; the executable owns its own copies
    auto got = copy.eval(if_inputs(false, {1, -2, 3}));
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(values_equal(got[i], expected[i]));
}

TEST(control_flow, remove_modules_refuses_main_and_modules_in_use) {
    program p = if_program();
    expect_error_containing([&] { p.remove_modules({p.get_module("then")}); }, "still used by module 'main'");
    expect_error_containing([&] { p.remove_modules({p.get_main_module()}); }, "main module cannot be removed");
    module* spare = p.create_module("spare");
    spare->add_return({spare->add_literal(literal(vec3, std::vector<float>{1, 2, 3}))});
    p.remove_modules({spare});
    EXPECT_EQ(p.get_module("spare"), nullptr);
    EXPECT_EQ(p.get_modules().size(), 3u);
    EXPECT_NO_THROW(verify_program(p));
}
