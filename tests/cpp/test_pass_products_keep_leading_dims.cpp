// products_keep_leading_dims: a product over rows a reshape merged from
// leading dims ([b, s, K] -> [b * s, K], as torch's linear is exported)
// takes the leading dims themselves; outputs stay those of the unoptimised
// module (ref), and the cpu target runs the result.
#include <gtest/gtest.h>

#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

instruction_ref reshape_to(module& m, instruction_ref x, std::vector<std::int64_t> dims) {
    return m.add_instruction(make_op("reshape", value_map{{"dims", ints(std::move(dims))}}), {x});
}

// x [2, 3, 4] -> [6, 4], times w [4, 5] plus a bias, gelu, plus the
// residual r [2, 3, 5] viewed as [6, 5] (the post-op fusion's inputs), viewed
// back as [2, 3, 5] and as [2, 3, 5, 1] by two readers, and returned as rows.
program linear_layer() {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({2, 3, 4}));
    auto r = m.add_parameter("r", float_shape({2, 3, 5}));
    auto rows = reshape_to(m, x, {6, 4});
    auto w = add_random_literal(m, {4, 5}, 1);
    auto bias = add_random_literal(m, {5}, 2);
    auto product = m.add_instruction(make_op("dot"), {rows, w});
    auto biased = m.add_instruction(
        make_op("add"),
        {product, m.add_instruction(make_op("broadcast", value_map{{"out_lens", ints({6, 5})}}), {bias})});
    auto sum = m.add_instruction(make_op("add"), {biased, reshape_to(m, r, {6, 5})});
    auto back = reshape_to(m, sum, {2, 3, 5});
    auto column = reshape_to(m, sum, {2, 3, 5, 1});
    m.add_return({m.add_instruction(make_op("neg"), {back}), column, sum});
    return p;
}

}  // namespace

TEST(pass_products_keep_leading_dims, a_product_over_merged_rows_takes_the_leading_dims) {
    program p = linear_layer();
    const module& m = *p.get_main_module();
    module fused = after_passes(m, {std::make_shared<fuse_post_ops>()});
    ASSERT_EQ(count_ops(fused, "fused_dot"), 1u) << fused;
    module out = after_pass<products_keep_leading_dims>(fused);
    for (const auto& ins : out) {
        if (ins.name() != "fused_dot") continue;
        EXPECT_EQ(ins.get_shape().lens(), (std::vector<std::size_t>{2, 3, 5})) << out;
        EXPECT_EQ(ins.inputs()[0]->name(), "@param") << out;  // x itself, not its rows
    }
    EXPECT_EQ(count_ops(out, "fused_dot"), 1u) << out;
    expect_same_outputs(m, out);
    expect_cpu_matches_ref(p);
}

TEST(pass_products_keep_leading_dims, rows_merged_with_the_columns_stay) {
    // x [2, 3, 4] -> [3, 8]: the rows are not x's leading dims.
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3, 4}));
    auto rows = reshape_to(m, x, {3, 8});
    m.add_return({m.add_instruction(make_op("dot"), {rows, add_random_literal(m, {8, 5}, 1)})});
    module out = after_pass<products_keep_leading_dims>(m);
    EXPECT_EQ(count_ops(out, "reshape"), 1u) << out;
    expect_same_outputs(m, out);
}

TEST(pass_products_keep_leading_dims, heads_merged_into_the_columns_are_viewed_at_the_leading_dims) {
    // Attention's heads x [2, 3, 4, 2] merged into rows [6, 8] before the
    // output projection (ONNX exports of GPT-2): x viewed as [2, 3, 8].
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({2, 3, 4, 2}));
    auto product = m.add_instruction(make_op("dot"), {reshape_to(m, x, {-1, 8}), add_random_literal(m, {8, 5}, 1)});
    m.add_return({m.add_instruction(make_op("neg"), {reshape_to(m, product, {2, 3, 5})})});
    module out = after_pass<products_keep_leading_dims>(*p.get_main_module());
    std::size_t products = 0;
    for (const auto& ins : out) {
        if (ins.name() != "dot") continue;
        ++products;
        EXPECT_EQ(ins.get_shape().lens(), (std::vector<std::size_t>{2, 3, 5})) << out;
        EXPECT_EQ(ins.inputs()[0]->get_shape().lens(), (std::vector<std::size_t>{2, 3, 8})) << out;
        EXPECT_EQ(ins.inputs()[0]->inputs()[0]->name(), "@param") << out;
    }
    EXPECT_EQ(products, 1u) << out;
    expect_same_outputs(*p.get_main_module(), out);
    expect_cpu_matches_ref(p);
}

TEST(pass_products_keep_leading_dims, a_weight_of_the_products_lengths_is_not_a_post_operand) {
    // Rows [2, 4] merged to 8 times a weight [8, 8], plus a residual [8, 8]:
    // the weight has the product's lengths and stays as it is.
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({2, 4, 8}));
    auto r = m.add_parameter("r", float_shape({2, 4, 8}));
    auto product = m.add_instruction(make_op("dot"), {reshape_to(m, x, {8, 8}), add_random_literal(m, {8, 8}, 1)});
    auto sum = m.add_instruction(make_op("add"), {product, reshape_to(m, r, {8, 8})});
    m.add_return({reshape_to(m, sum, {2, 4, 8})});
    module fused = after_passes(*p.get_main_module(), {std::make_shared<fuse_post_ops>()});
    module out = after_pass<products_keep_leading_dims>(fused);
    std::size_t products = 0;
    for (const auto& ins : out) {
        if (ins.name() != "fused_dot") continue;
        ++products;
        EXPECT_EQ(ins.get_shape().lens(), (std::vector<std::size_t>{2, 4, 8})) << out;
        EXPECT_EQ(ins.inputs()[1]->get_shape().lens(), (std::vector<std::size_t>{8, 8})) << out;
    }
    EXPECT_EQ(products, 1u) << out;
    expect_same_outputs(*p.get_main_module(), out);
    expect_cpu_matches_ref(p);
}
