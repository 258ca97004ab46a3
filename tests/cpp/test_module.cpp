#include <gtest/gtest.h>

#include "kiln/kiln.hpp"

using namespace kiln;

namespace {
shape f32(std::vector<std::size_t> lens) { return {dtype::float_type, std::move(lens)}; }

void expect_error_containing(const std::function<void()>& f, const std::string& text) {
    try {
        f();
        FAIL() << "expected an error containing: " << text;
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
}
}  // namespace

TEST(module, user_lists_follow_edits) {
    module m;
    auto x = m.add_parameter("x", f32({4}));
    auto y = m.add_parameter("y", f32({4}));
    auto a = m.add_instruction(make_op("add"), {x, y});
    auto r = m.add_return({a});
    EXPECT_EQ(x->outputs().size(), 1u);
    auto b = m.insert_instruction(r, make_op("mul"), {x, x});
    EXPECT_EQ(x->outputs().size(), 3u);  // add once, mul twice
    m.replace_all_uses(a, b);
    EXPECT_TRUE(a->outputs().empty());
    EXPECT_EQ(r->inputs().at(0), b);
    m.remove_instruction(a);
    EXPECT_EQ(y->outputs().size(), 0u);
    verify_module(m);
    EXPECT_THROW(m.remove_instruction(b), error);  // still used by the return
}

TEST(module, insert_parameter_places_it_before_an_instruction) {
    module m;
    auto y = m.add_parameter("y", f32({2}));
    auto n = m.add_instruction(make_op("neg"), {y});
    auto x = m.insert_parameter(y, "x", f32({2}));
    m.add_return({m.add_instruction(make_op("add"), {x, n})});
    EXPECT_EQ(m.get_parameter_names(), (std::vector<std::string>{"x", "y"}));
    verify_module(m);
    expect_error_containing([&] { m.insert_parameter(n, "y", f32({1})); }, "already has a parameter named 'y'");
}

TEST(module, copy_is_deep_and_independent) {
    module m;
    auto x = m.add_parameter("x", f32({2}));
    m.add_return({m.add_instruction(make_op("neg"), {x})});
    module c = m;
    EXPECT_EQ(to_string(c), to_string(m));
    verify_module(c);
    auto cx = c.get_parameter("x");
    EXPECT_EQ(cx->outputs().size(), 1u);
    EXPECT_NE(&*cx, &*x);
    c.add_parameter("z", f32({1}));
    EXPECT_FALSE(m.has_parameter("z"));
}

TEST(module, builder_rejects_bad_input_with_the_op_named) {
    module m;
    auto x = m.add_parameter("x", f32({2, 3}));
    auto y = m.add_parameter("y", f32({4}));
    expect_error_containing([&] { m.add_instruction(make_op("add"), {x, y}); }, "add");
    expect_error_containing([&] { m.add_instruction(make_op("add"), {x, y}); }, "cannot be broadcast");
    expect_error_containing([&] { m.add_parameter("x", f32({1})); }, "already has a parameter named 'x'");
    expect_error_containing([&] { m.add_return({}); }, "at least one");
    m.add_return({x});
    expect_error_containing([&] { m.add_return({x}); }, "already has a return");
}

TEST(verifier, accepts_well_formed_module) {
    module m;
    auto x = m.add_parameter("x", f32({3}));
    auto c = m.add_literal(literal(f32({3}), std::vector<float>{1, 2, 3}));
    m.add_return({m.add_instruction(make_op("add"), {x, c})});
    EXPECT_NO_THROW(verify_module(m));
}

TEST(verifier, names_instruction_used_before_definition) {
    module m;
    auto x = m.add_parameter("x", f32({3}));
    auto r = m.add_return({x});
    (void)r;
    // Inserted at the front, so its input x is defined after it.
    m.insert_instruction(m.begin(), make_op("relu"), {x});
    expect_error_containing([&] { verify_module(m, "after pass 'test'"); }, "@0 (relu)");
    expect_error_containing([&] { verify_module(m, "after pass 'test'"); }, "not defined before");
    expect_error_containing([&] { verify_module(m, "after pass 'test'"); }, "after pass 'test'");
}

TEST(verifier, names_instruction_with_stale_shape) {
    module m;
    auto x = m.add_parameter("x", f32({3}));
    auto y = m.add_parameter("y", f32({2, 3}));
    auto a = m.add_instruction(make_op("neg"), {x});
    m.add_return({a});
    m.replace_input(a, x, y);  // neg's recorded shape is still {3}
    expect_error_containing([&] { verify_module(m); }, "@2 (neg)");
    expect_error_containing([&] { verify_module(m); }, "differs from compute_shape");
}

TEST(verifier, requires_exactly_one_return) {
    module m;
    m.add_parameter("x", f32({3}));
    expect_error_containing([&] { verify_module(m); }, "0 returns");
}
