#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

std::size_t largest_literal_bytes(const module& m) {
    std::size_t most = 0;
    for (const auto& ins : m)
        if (ins.is_literal()) most = std::max(most, ins.get_shape().bytes());
    return most;
}

}  // namespace

TEST(pass_constant_propagation, folds_a_constant_subgraph_into_one_literal) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3}));
    auto a = add_float_literal(m, {3}, {1, 2, 3});
    auto b = add_float_literal(m, {3}, {4, 5, 6});
    auto sum = m.add_instruction(make_op("add"), {a, b});  // a diamond: sum feeds both sides
    auto sq = m.add_instruction(make_op("mul"), {sum, sum});
    auto diff = m.add_instruction(make_op("sub"), {sq, sum});
    auto y = m.add_instruction(make_op("mul"), {x, diff});
    m.add_return({y});

    module out = after_pass<constant_propagation>(m);
    EXPECT_EQ(op_names(out), std::vector<std::string>{"mul"}) << out;
    // (a+b)^2 - (a+b) = {20, 42, 72}
    EXPECT_NE(to_string(out).find("@1 = @literal{20, 42, 72} -> float_type, {3}, {1}"), std::string::npos) << out;
    expect_same_outputs(m, out);
}

TEST(pass_constant_propagation, leaves_parameter_dependent_instructions_alone) {
    module m;
    auto x = m.add_parameter("x", float_shape({3}));
    auto c = add_float_literal(m, {3}, {1, 2, 3});
    auto y = m.add_instruction(make_op("add"), {x, c});
    m.add_return({m.add_instruction(make_op("exp"), {y})});
    module out = after_pass<constant_propagation>(m);
    EXPECT_EQ(to_string(out), to_string(m));
}

TEST(pass_constant_propagation, folds_a_returned_constant) {
    module m;
    m.add_parameter("x", float_shape({3}));
    auto c = add_float_literal(m, {3}, {0, 1, 2});
    m.add_return({m.add_instruction(make_op("exp"), {c})});
    module out = after_pass<constant_propagation>(m);
    EXPECT_TRUE(op_names(out).empty()) << out;
    expect_same_outputs(m, out);
}

TEST(pass_constant_propagation, does_not_store_a_broadcast_of_a_small_constant) {
    module m;
    auto x = m.add_parameter("x", float_shape({512, 512}));
    auto one = add_float_literal(m, {1}, {1});
    auto two = add_float_literal(m, {1}, {2});
    auto small = m.add_instruction(make_op("add"), {one, two});  // folded: tiny
    auto big = m.add_instruction(make_op("broadcast", value_map{{"out_lens", ints({512, 512})}}), {small});
    auto scaled = m.add_instruction(make_op("mul"), {big, big});  // 1 MiB computed from 8 bytes
    m.add_return({m.add_instruction(make_op("add"), {x, scaled})});

    module out = after_pass<constant_propagation>(m);
    // The product repeats along both dims, which the add broadcasts: it is
    // stored once, as [1, 1] (passes/repeated_constants.hpp), not as 1 MiB.
    EXPECT_EQ(op_names(out), std::vector<std::string>{"add"}) << out;
    EXPECT_LE(largest_literal_bytes(out), 4u) << out;
    expect_same_outputs(m, out);
}

TEST(pass_constant_propagation, respects_the_size_limit) {
    module m;
    auto x = m.add_parameter("x", float_shape({64, 64}));
    auto a = add_random_literal(m, {64, 64}, 1);
    auto e = m.add_instruction(make_op("exp"), {a});  // 16 KiB, no bigger than its source
    m.add_return({m.add_instruction(make_op("add"), {x, e})});

    constant_propagation limited;
    limited.max_bytes = 1024;
    EXPECT_EQ(count_ops(after_pass(m, limited), "exp"), 1u);
    module folded = after_pass<constant_propagation>(m);
    EXPECT_EQ(count_ops(folded, "exp"), 0u);
    expect_same_outputs(m, folded);
}

TEST(pass_constant_propagation, keeps_a_view_of_a_literal_that_others_also_use) {
    module m;
    auto x = m.add_parameter("x", float_shape({3, 4}));
    auto w = add_random_literal(m, {4, 3}, 2);
    auto wt = m.add_instruction(make_op("transpose", value_map{{"permutation", ints({1, 0})}}), {w});
    auto y1 = m.add_instruction(make_op("add"), {x, wt});
    auto y2 = m.add_instruction(make_op("dot"), {x, w});
    m.add_return({y1, y2});

    module out = after_pass<constant_propagation>(m);
    EXPECT_EQ(count_ops(out, "transpose"), 1u) << out;  // folding would store w twice
    EXPECT_EQ(count_ops(out, "@literal"), 1u) << out;
    expect_same_outputs(m, out);
}

TEST(pass_constant_propagation, folds_a_reshape_of_a_literal_used_once) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 6}));
    auto w = add_random_literal(m, {3, 4}, 2);
    auto r = m.add_instruction(make_op("reshape", value_map{{"dims", ints({2, 6})}}), {w});
    m.add_return({m.add_instruction(make_op("add"), {x, r})});
    module out = after_pass<constant_propagation>(m);
    EXPECT_EQ(op_names(out), std::vector<std::string>{"add"}) << out;
    EXPECT_EQ(count_ops(out, "@literal"), 1u) << out;
    expect_same_outputs(m, out);
}

TEST(pass_constant_propagation, cpu_pipeline_matches_ref) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", float_shape({4, 6}));
    auto w = add_random_literal(*m, {6, 6}, 9);
    auto wt = m->add_instruction(make_op("transpose", value_map{{"permutation", ints({1, 0})}}), {w});
    auto ws = m->add_instruction(make_op("tanh"), {wt});
    auto d = m->add_instruction(make_op("dot"), {x, ws});
    m->add_return({d});
    expect_cpu_matches_ref(p);
}

namespace {

// x [n, 64] times (W * 0.5): W a [64, 64] literal shared by every copy made
// with the same `weights` (as the imports of one model at several extents
// share them), 0.5 a scalar literal made anew for each.
module scaled_product(std::size_t n, const literal& weights) {
    module m;
    auto x = m.add_parameter("x", float_shape({n, 64}));
    auto w = m.add_literal(weights);
    auto half = add_float_literal(m, {}, {0.5f});
    auto scaled = m.add_instruction(make_op("mul"), {w, half});
    m.add_return({m.add_instruction(make_op("dot"), {x, scaled})});
    return module(m);
}

const std::byte* folded_weights(const module& m) {
    for (const auto& ins : m)
        if (ins.is_literal() && ins.get_shape().elements() == 64 * 64) return ins.get_literal().get_argument().data();
    return nullptr;
}

}  // namespace

TEST(pass_constant_propagation, shared_weights_fold_once_in_a_process) {
    const literal weights(generate_argument(float_shape({64, 64}), 3));
    const constant_propagation pass;
    module at_2 = scaled_product(2, weights);
    module at_64 = scaled_product(64, weights);
    const module before = at_64;
    pass.apply(at_2);
    pass.apply(at_64);
    ASSERT_NE(folded_weights(at_2), nullptr);
    EXPECT_EQ(folded_weights(at_2), folded_weights(at_64));  // computed once, held once
    expect_same_outputs(before, at_64);
    // Another pass object (a dynamic compile's next attempt) takes the same
    // folded value; other weights fold again.
    module again = scaled_product(2, weights);
    constant_propagation().apply(again);
    EXPECT_EQ(folded_weights(again), folded_weights(at_2));
    module other = scaled_product(2, literal(generate_argument(float_shape({64, 64}), 4)));
    pass.apply(other);
    EXPECT_NE(folded_weights(other), folded_weights(at_2));
    expect_same_outputs(scaled_product(2, literal(generate_argument(float_shape({64, 64}), 4))), other);
}

// The table is the process's: a value folded from weights that were freed
// since (the folded module still alive) is never served for other weights,
// even where those take the freed weights' address.
TEST(pass_constant_propagation, a_fold_of_freed_weights_is_not_served_again) {
    std::vector<std::unique_ptr<module>> kept;
    for (unsigned seed = 10; seed < 14; ++seed) {
        const module before = scaled_product(2, literal(generate_argument(float_shape({64, 64}), seed)));
        auto m = std::make_unique<module>(before);
        constant_propagation().apply(*m);
        expect_same_outputs(before, *m);
        kept.push_back(std::move(m));  // its folded value stays alive; the weights of `before` are freed
    }
}

TEST(pass_constant_propagation, a_folded_value_no_program_holds_is_computed_again) {
    const literal weights(generate_argument(float_shape({64, 64}), 3));
    const constant_propagation pass;
    {
        module gone = scaled_product(2, weights);
        pass.apply(gone);
    }
    module at_8 = scaled_product(8, weights);
    const module before = at_8;
    pass.apply(at_8);
    EXPECT_NE(folded_weights(at_8), nullptr);
    expect_same_outputs(before, at_8);
}
