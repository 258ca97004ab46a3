// The matcher DSL and the worklist rewrite driver.
#include "pass_test_helpers.hpp"
#include "passes/rewriter.hpp"

using namespace kiln;
using namespace kiln::test;
namespace km = kiln::match;

namespace {

struct small_graph {
    module m;
    instruction_ref x, c, k, sum, twice, relu;
    small_graph() {
        x = m.add_parameter("x", float_shape({2, 3}));
        c = add_float_literal(m, {3}, {1, 2, 3});
        k = m.add_instruction(make_op("exp"), {c});  // computed from a literal only
        sum = m.add_instruction(make_op("add"), {x, k});
        twice = m.add_instruction(make_op("add"), {sum, sum});
        relu = m.add_instruction(make_op("relu"), {twice});
        m.add_return({relu});
    }
};

}  // namespace

TEST(pass_matcher, matches_names_arguments_and_binds) {
    small_graph g;
    auto r = km::find_match(g.sum, km::name("add").args(km::any().bind("lhs"), km::is_constant().bind("rhs")));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->root, g.sum);
    EXPECT_EQ(r->at("lhs"), g.x);
    EXPECT_EQ(r->at("rhs"), g.k);
    EXPECT_THROW(r->at("nothing"), error);
    EXPECT_FALSE(km::find_match(g.sum, km::name("mul")));
    EXPECT_FALSE(km::find_match(g.sum, km::name("add").args(km::any())));  // wrong count
    EXPECT_TRUE(km::find_match(g.relu, km::any_of_names({"tanh", "relu"})));
}

TEST(pass_matcher, a_name_bound_twice_must_be_the_same_instruction) {
    small_graph g;
    auto same_twice = km::name("add").args(km::any().bind("a"), km::any().bind("a"));
    EXPECT_TRUE(km::find_match(g.twice, same_twice));
    EXPECT_FALSE(km::find_match(g.sum, same_twice));
}

TEST(pass_matcher, used_once_counts_every_use) {
    small_graph g;
    EXPECT_TRUE(km::find_match(g.twice, km::used_once()));
    EXPECT_FALSE(km::find_match(g.sum, km::used_once()));  // add(sum, sum) uses it twice
}

TEST(pass_matcher, is_constant_follows_inputs_back_to_literals) {
    small_graph g;
    EXPECT_TRUE(km::find_match(g.c, km::is_constant()));
    EXPECT_TRUE(km::find_match(g.k, km::is_constant()));
    EXPECT_FALSE(km::find_match(g.sum, km::is_constant()));
    EXPECT_FALSE(km::find_match(g.x, km::is_constant()));
    EXPECT_TRUE(km::find_match(g.c, km::is_literal()));
    EXPECT_FALSE(km::find_match(g.k, km::is_literal()));
}

TEST(pass_matcher, shape_predicates) {
    small_graph g;
    EXPECT_TRUE(km::find_match(g.sum, km::shape_is([](const shape& s) {
                                   return s.lens() == std::vector<std::size_t>{2, 3};
                               })));
    EXPECT_TRUE(km::find_match(g.sum, km::standard_shape()));
    EXPECT_FALSE(km::find_match(g.c, km::name("@literal").shape_is([](const shape& s) { return s.ndim() == 2; })));
}

TEST(pass_matcher, a_failed_alternative_leaves_no_bindings) {
    small_graph g;
    // The first alternative binds "x" to sum's first input, then fails on the second.
    auto first = km::name("add").args(km::any().bind("x"), km::name("mul"));
    auto second = km::name("add").args(km::any(), km::any().bind("y"));
    auto r = km::find_match(g.sum, km::any_of({first, second}));
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->has("x"));
    EXPECT_EQ(r->at("y"), g.k);
    auto commuted = km::name("add").args_any_order(km::is_constant().bind("c"), km::any().bind("v"));
    auto rc = km::find_match(g.sum, commuted);
    ASSERT_TRUE(rc);
    EXPECT_EQ(rc->at("c"), g.k);
    EXPECT_EQ(rc->at("v"), g.x);
    EXPECT_FALSE(km::find_match(g.sum, km::none_of({km::name("add")})));
}

namespace {

// relu(relu(v)) -> relu(v)
rewrite_rule collapse_relus() {
    return {"collapse_relus", km::name("relu").args(km::name("relu").bind("inner")),
            [](module& m, const km::match_result& r) { return replace_value(m, r.root, r.at("inner")); }};
}

module relu_chain(int n) {
    module m;
    auto v = m.add_parameter("x", float_shape({4}));
    for (int i = 0; i < n; ++i) v = m.add_instruction(make_op("relu"), {v});
    m.add_return({v});
    return module(m);
}

}  // namespace

TEST(pass_rewriter, reaches_a_fixed_point_and_removes_dead_code) {
    module m = relu_chain(10);
    module original = m;
    rewrite_stats stats = rewrite_to_fixed_point(m, {collapse_relus()});
    EXPECT_EQ(op_names(m), std::vector<std::string>{"relu"}) << m;
    EXPECT_EQ(stats.applied, 9u);
    EXPECT_EQ(stats.applied_by_rule["collapse_relus"], 9u);
    EXPECT_EQ(stats.removed, 9u);
    EXPECT_GE(stats.rounds, 2u);  // the last round confirms nothing applies
    verify_module(m, "after the rewrite test");
    expect_same_outputs(original, m);

    rewrite_stats again = rewrite_to_fixed_point(m, {collapse_relus()});
    EXPECT_EQ(again.applied, 0u);
    EXPECT_EQ(again.rounds, 1u);
}

TEST(pass_rewriter, visits_instructions_a_rule_creates_in_the_same_round) {
    // expand (once) turns exp(x) into exp(neg(neg(x))); cancel must then find
    // the new pair in the same round, so a second round only confirms.
    module m;
    auto x = m.add_parameter("x", float_shape({3}));
    m.add_return({m.add_instruction(make_op("exp"), {x})});
    auto budget = std::make_shared<int>(1);
    rewrite_rule expand{"expand_exp", km::name("exp").args(km::any().bind("x")),
                        [budget](module& mm, const km::match_result& r) {
                            if (*budget == 0) return false;
                            --*budget;
                            auto n1 = mm.insert_instruction(r.root, make_op("neg"), {r.at("x")});
                            auto n2 = mm.insert_instruction(r.root, make_op("neg"), {n1});
                            return replace_with_new(mm, r.root, make_op("exp"), {n2});
                        }};
    rewrite_rule cancel{"cancel_negs", km::name("neg").args(km::name("neg").args(km::any().bind("v"))),
                        [](module& mm, const km::match_result& r) { return replace_value(mm, r.root, r.at("v")); }};
    module original = m;
    rewrite_stats stats = rewrite_to_fixed_point(m, {cancel, expand});
    EXPECT_EQ(stats.applied_by_rule["expand_exp"], 1u);
    EXPECT_EQ(stats.applied_by_rule["cancel_negs"], 1u);
    EXPECT_EQ(stats.rounds, 2u);
    EXPECT_EQ(stats.removed, 3u);  // the old exp and both negs
    EXPECT_EQ(op_names(m), std::vector<std::string>{"exp"}) << m;
    expect_same_outputs(original, m);
}

TEST(pass_rewriter, rules_that_never_settle_raise_an_error_naming_the_rule) {
    module m = relu_chain(1);
    rewrite_rule forever{"rebuild_relu", km::name("relu").args(km::any().bind("v")),
                         [](module& mm, const km::match_result& r) {
                             return replace_with_new(mm, r.root, make_op("relu"), {r.at("v")});
                         }};
    try {
        rewrite_to_fixed_point(m, {forever});
        FAIL() << "expected an error";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("rebuild_relu"), std::string::npos) << e.what();
    }
}
