// propagate_blocked_layout (src/targets/cpu/passes): convolutions, and the
// elementwise ops, pooling and reductions between them, move to the nChw8c or nChw16c
// blocked layout; values leave it through from_blocked. Outputs must stay
// what the plain module computes on ref.
#include "ops/fused_convolution.hpp"
#include "ops/pool.hpp"
#include "pass_test_helpers.hpp"
#include "targets/cpu/passes/cpu_passes.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

// A plain-layout fused_convolution with no bias or post-ops, as fuse_post_ops makes.
instruction_ref fused_conv(module& m, instruction_ref x, std::size_t channels, std::size_t filters, std::size_t k,
                           unsigned long seed) {
    auto w = add_random_literal(m, {filters, channels, k, k}, seed);
    op::fused_convolution conv;
    const auto pad = static_cast<std::int64_t>(k / 2);
    conv.conv.padding = {pad, pad};
    return m.add_instruction(operation(conv), {x, w});
}

instruction_ref pooling(module& m, instruction_ref x, op::pooling_mode mode, std::vector<std::int64_t> lengths,
                        std::vector<std::int64_t> stride, bool global = false) {
    op::pooling p;
    p.mode = mode;
    p.lengths = std::move(lengths);
    p.stride = std::move(stride);
    p.global = global;
    return m.add_instruction(operation(p), {x});
}

std::vector<const instruction*> all_of(const module& m, const std::string& op) {
    std::vector<const instruction*> found;
    for (const auto& ins : m)
        if (ins.name() == op) found.push_back(&ins);
    return found;
}

std::string attribute(const instruction& ins, const std::string& name) {
    return to_string(*ins.get_operator().attributes().find(name));
}

std::string layouts(const instruction& conv) {
    return attribute(conv, "input_layout") + " -> " + attribute(conv, "output_layout");
}

}  // namespace

TEST(pass_propagate_blocked_layout, a_convolution_chain_stays_blocked_with_one_reorder_each_way) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 8, 6, 6}));
    auto a = m.add_instruction(make_op("relu"), {fused_conv(m, x, 8, 16, 3, 1)});
    m.add_return({fused_conv(m, a, 16, 16, 1, 2)});

    module out = after_pass<propagate_blocked_layout>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"to_blocked", "fused_convolution", "relu",
                                                       "fused_convolution", "from_blocked"}))
        << out;
    for (const auto* conv : all_of(out, "fused_convolution")) EXPECT_EQ(layouts(*conv), "\"nchw8c\" -> \"nchw8c\"");
    // The relu between them reads the blocked [1, 2, 6, 6, 8] value.
    EXPECT_EQ(all_of(out, "relu").at(0)->get_shape().lens(), (std::vector<std::size_t>{1, 2, 6, 6, 8}));
    EXPECT_EQ(all_of(out, "to_blocked").at(0)->inputs().at(0)->name(), "@param");
    expect_same_outputs(m, out, 1e-5);
}

// Three channels (an image) cannot be blocked: the first convolution reads
// them plain and writes blocked, with no to_blocked at all.
TEST(pass_propagate_blocked_layout, an_image_is_read_plain_and_written_blocked) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3, 7, 7}));
    m.add_return({fused_conv(m, x, 3, 8, 3, 1)});

    module out = after_pass<propagate_blocked_layout>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"fused_convolution", "from_blocked"})) << out;
    EXPECT_EQ(layouts(*all_of(out, "fused_convolution").at(0)), "\"nchw\" -> \"nchw8c\"");
    expect_same_outputs(m, out, 1e-5);
}

// Max pooling of a blocked value becomes 3-D pooling of [N, C/8, H, W, 8]
// with a one-element window along the block; a global average pooling
// becomes a whole-plane window.
TEST(pass_propagate_blocked_layout, pooling_of_a_blocked_value_pools_the_blocked_tensor) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 8, 8, 8}));
    auto y = fused_conv(m, x, 8, 16, 3, 1);
    auto pooled = pooling(m, y, op::pooling_mode::max, {2, 2}, {2, 2});
    auto global = pooling(m, fused_conv(m, pooled, 16, 8, 1, 2), op::pooling_mode::average, {}, {}, true);
    m.add_return({global});

    module out = after_pass<propagate_blocked_layout>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"to_blocked", "fused_convolution", "pooling",
                                                       "fused_convolution", "pooling", "from_blocked"}))
        << out;
    const auto pools = all_of(out, "pooling");
    ASSERT_EQ(pools.size(), 2u);
    EXPECT_EQ(pools[0]->inputs().at(0)->get_shape().lens(), (std::vector<std::size_t>{1, 2, 8, 8, 8}));
    EXPECT_EQ(attribute(*pools[0], "lengths"), "{2, 2, 1}");
    EXPECT_EQ(attribute(*pools[0], "stride"), "{2, 2, 1}");
    EXPECT_EQ(attribute(*pools[1], "global"), "false");
    EXPECT_EQ(attribute(*pools[1], "lengths"), "{4, 4, 1}");
    EXPECT_EQ(pools[1]->get_shape().lens(), (std::vector<std::size_t>{1, 1, 1, 1, 8}));
    expect_same_outputs(m, out, 1e-5);
}

// No convolution: nothing is blocked. The pooling's input is a parameter
// (not blocked), and the module holds instructions with no inputs at all.
TEST(pass_propagate_blocked_layout, leaves_a_module_without_convolutions_alone) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 8, 6, 6}));
    auto c = add_random_literal(m, {8, 1, 1}, 3);
    auto sum = m.add_instruction(make_op("add"), {x, c});
    auto pooled = pooling(m, sum, op::pooling_mode::max, {2, 2}, {2, 2});
    m.add_return({m.add_instruction(make_op("relu"), {pooled})});

    module out = after_pass<propagate_blocked_layout>(m);
    EXPECT_EQ(to_string(out), to_string(m));
}

// A module of a parameter and a literal only, no pooling.
TEST(pass_propagate_blocked_layout, leaves_a_module_of_a_parameter_and_a_literal_alone) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3}));
    auto c = add_float_literal(m, {2, 3}, {1, 2, 3, 4, 5, 6});
    m.add_return({x, c});

    module out = after_pass<propagate_blocked_layout>(m);
    EXPECT_EQ(to_string(out), to_string(m));
    expect_same_outputs(m, out);
}

// A pooling beside a blocked convolution that reads a parameter (a value
// that is not blocked) stays plain.
TEST(pass_propagate_blocked_layout, pooling_of_a_plain_value_stays_plain) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 8, 6, 6}));
    auto side = m.add_parameter("side", float_shape({1, 8, 6, 6}));
    auto y = fused_conv(m, x, 8, 8, 3, 1);
    auto side_pooled = pooling(m, side, op::pooling_mode::max, {2, 2}, {2, 2});
    m.add_return({y, side_pooled});

    module out = after_pass<propagate_blocked_layout>(m);
    const auto pools = all_of(out, "pooling");
    ASSERT_EQ(pools.size(), 1u) << out;
    EXPECT_EQ(pools[0]->inputs().at(0)->name(), "@param");
    EXPECT_EQ(attribute(*pools[0], "lengths"), "{2, 2}");
    EXPECT_EQ(pools[0]->get_shape().lens(), (std::vector<std::size_t>{1, 8, 3, 3}));
    expect_same_outputs(m, out, 1e-5);
}

// The old blocked_pooling read inputs()[0] of every instruction that reached
// it, literals and parameters included: here literals and a parameter come
// after a blocked convolution in the sweep (the weights of the next
// convolution, a per-channel scale, a late parameter), and a reduction over H
// and W ends the chain.
TEST(pass_propagate_blocked_layout, instructions_without_inputs_between_blocked_convolutions) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 8, 5, 5}));
    auto a = fused_conv(m, x, 8, 8, 3, 1);
    auto late = m.add_parameter("late", float_shape({1, 8, 5, 5}));
    auto scale = add_random_literal(m, {8, 1, 1}, 2);
    auto scaled = m.add_instruction(make_op("mul"), {a, scale});
    auto b = fused_conv(m, scaled, 8, 8, 3, 3);
    auto sum = m.add_instruction(make_op("add"), {b, late});
    auto mean = m.add_instruction(make_op("reduce_mean", value_map{{"axes", ints({2, 3})}}), {sum});
    m.add_return({mean});

    module out = after_pass<propagate_blocked_layout>(m);
    EXPECT_EQ(count_ops(out, "from_blocked"), 1u) << out;
    EXPECT_EQ(count_ops(out, "to_blocked"), 2u) << out;  // x, and the late parameter
    // The per-channel scale is read as [1, 1, 1, 1, 8].
    EXPECT_EQ(count_ops(out, "reshape"), 1u) << out;
    for (const auto* conv : all_of(out, "fused_convolution")) EXPECT_EQ(layouts(*conv), "\"nchw8c\" -> \"nchw8c\"");
    EXPECT_EQ(all_of(out, "reduce_mean").at(0)->get_shape().lens(), (std::vector<std::size_t>{1, 1, 1, 1, 8}));
    expect_same_outputs(m, out, 1e-5);
}

// The whole cpu pipeline (fuse_post_ops, this pass, the blocked kernels) on
// a conv + bias + relu, max pooling, conv, global average pooling network.
TEST(pass_propagate_blocked_layout, cpu_pipeline_matches_ref) {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({2, 3, 12, 12}));
    auto w1 = add_random_literal(m, {16, 3, 3, 3}, 1);
    auto y = m.add_instruction(make_op("convolution", value_map{{"padding", ints({1, 1})}}), {x, w1});
    y = m.add_instruction(make_op("relu"), {m.add_instruction(make_op("add"), {y, add_random_literal(m, {16, 1, 1}, 2)})});
    y = pooling(m, y, op::pooling_mode::max, {2, 2}, {2, 2});
    auto w2 = add_random_literal(m, {16, 16, 3, 3}, 3);
    y = m.add_instruction(make_op("convolution", value_map{{"padding", ints({1, 1})}}), {y, w2});
    m.add_return({pooling(m, y, op::pooling_mode::average, {}, {}, true)});
    expect_cpu_matches_ref(p, 1e-4);
}

// The 16-channel block (AVX-512): the chain runs nchw16c, per-channel
// operands become [1, C/16, 1, 1, 16] and the outputs stay ref's.
TEST(pass_propagate_blocked_layout, sixteen_channel_blocks_where_preferred) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 16, 6, 6}));
    auto a = fused_conv(m, x, 16, 32, 3, 1);
    a = m.add_instruction(make_op("mul"), {a, add_random_literal(m, {1, 32, 1, 1}, 5)});
    a = m.add_instruction(make_op("relu"), {a});
    a = pooling(m, a, op::pooling_mode::max, {2, 2}, {2, 2});
    m.add_return({fused_conv(m, a, 32, 16, 1, 2)});

    module out = after_pass(m, propagate_blocked_layout(16));
    for (const auto* conv : all_of(out, "fused_convolution")) EXPECT_EQ(layouts(*conv), "\"nchw16c\" -> \"nchw16c\"");
    EXPECT_EQ(all_of(out, "relu").at(0)->get_shape().lens(), (std::vector<std::size_t>{1, 2, 6, 6, 16}));
    EXPECT_EQ(all_of(out, "to_blocked").size(), 1U) << out;
    EXPECT_EQ(attribute(*all_of(out, "to_blocked").at(0), "block"), "16");
    EXPECT_EQ(all_of(out, "from_blocked").size(), 1U) << out;
    expect_same_outputs(m, out, 1e-5);
}

// An image is read plain and written in 16-channel blocks.
TEST(pass_propagate_blocked_layout, an_image_is_written_in_sixteen_channel_blocks) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3, 7, 7}));
    m.add_return({fused_conv(m, x, 3, 16, 3, 1)});

    module out = after_pass(m, propagate_blocked_layout(16));
    EXPECT_EQ(layouts(*all_of(out, "fused_convolution").at(0)), "\"nchw\" -> \"nchw16c\"");
    EXPECT_EQ(all_of(out, "from_blocked").at(0)->inputs().at(0)->get_shape().lens().back(), 16U);
    expect_same_outputs(m, out, 1e-5);
}

// 24 channels (a multiple of 8, not of 16) are padded to two blocks of 16:
// the module stays in one block with no reorder between the convolutions.
TEST(pass_propagate_blocked_layout, channels_not_a_multiple_of_sixteen_are_padded_to_whole_blocks) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 16, 5, 5}));
    auto a = fused_conv(m, x, 16, 24, 3, 1);
    a = m.add_instruction(make_op("mul"), {a, add_random_literal(m, {1, 24, 1, 1}, 7)});
    a = m.add_instruction(make_op("relu"), {a});
    m.add_return({fused_conv(m, a, 24, 32, 1, 2)});

    module out = after_pass(m, propagate_blocked_layout(16));
    for (const auto* conv : all_of(out, "fused_convolution")) EXPECT_EQ(layouts(*conv), "\"nchw16c\" -> \"nchw16c\"");
    EXPECT_EQ(all_of(out, "relu").at(0)->get_shape().lens(), (std::vector<std::size_t>{1, 2, 5, 5, 16}));
    EXPECT_EQ(all_of(out, "to_blocked").size(), 1U) << out;
    EXPECT_EQ(all_of(out, "from_blocked").size(), 1U) << out;
    EXPECT_EQ(all_of(out, "pad").size(), 1U) << out;  // the per-channel operand, zero-padded to 32
    expect_same_outputs(m, out, 1e-5);
}

// On a padded value only ops that keep zeros zero run blocked: a sigmoid
// (0.5 from a zero) or an added single value would fill the padding, so
// they read the plain value and the next convolution blocks it again.
TEST(pass_propagate_blocked_layout, ops_that_fill_the_padding_run_plain) {
    for (const std::string op : {"sigmoid", "add_one"}) {
        module m;
        auto x = m.add_parameter("x", float_shape({1, 16, 5, 5}));
        auto a = fused_conv(m, x, 16, 24, 3, 1);
        if (op == "sigmoid")
            a = m.add_instruction(make_op("sigmoid"), {a});
        else
            a = m.add_instruction(make_op("add"), {a, m.add_literal(literal(float_shape({1}), std::vector<float>{1.0f}))});
        m.add_return({fused_conv(m, a, 24, 32, 1, 2)});

        module out = after_pass(m, propagate_blocked_layout(16));
        const std::string name = op == "sigmoid" ? "sigmoid" : "add";
        EXPECT_EQ(all_of(out, name).at(0)->get_shape().ndim(), 4U) << op << "\n" << out;
        ASSERT_EQ(all_of(out, "from_blocked").size(), 2U) << out;
        EXPECT_EQ(attribute(*all_of(out, "from_blocked").at(0), "channels"), "24");
        EXPECT_EQ(all_of(out, name).at(0)->get_shape().lens(), (std::vector<std::size_t>{1, 24, 5, 5}));
        expect_same_outputs(m, out, 1e-5);
    }
}

// Padded blocks do not concatenate (the padding would land between the
// inputs' channels): the concat runs plain.
TEST(pass_propagate_blocked_layout, padded_values_concatenate_plain) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 16, 4, 4}));
    auto a = fused_conv(m, x, 16, 24, 3, 1);
    auto b = fused_conv(m, x, 16, 8, 1, 2);
    auto c = m.add_instruction(make_op("concat", value_map{{"axis", std::int64_t{1}}}), {a, b});
    m.add_return({fused_conv(m, c, 32, 16, 1, 3)});

    module out = after_pass(m, propagate_blocked_layout(16));
    EXPECT_EQ(all_of(out, "concat").at(0)->get_shape().lens(), (std::vector<std::size_t>{1, 32, 4, 4})) << out;
    expect_same_outputs(m, out, 1e-5);
}

TEST(pass_propagate_blocked_layout, to_blocked_refuses_a_block_other_than_8_or_16) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 24, 2, 2}));
    EXPECT_THROW(
        {
            try {
                m.add_instruction(make_op("to_blocked", value_map{{"block", std::int64_t{12}}}), {x});
            } catch (const std::exception& e) {
                EXPECT_NE(std::string(e.what()).find("8 or 16"), std::string::npos) << e.what();
                throw;
            }
        },
        std::exception);
}

// A convolution told its input is in 16-channel blocks refuses an 8-channel one.
TEST(pass_propagate_blocked_layout, a_convolution_refuses_an_input_in_the_other_block) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 2, 4, 4, 8}));
    auto w = add_random_literal(m, {16, 16, 1, 1}, 1);
    op::fused_convolution conv;
    conv.input_layout = op::tensor_layout::nchw16c;
    conv.output_layout = op::tensor_layout::nchw16c;
    EXPECT_THROW(
        {
            try {
                m.add_instruction(operation(conv), {x, w});
            } catch (const std::exception& e) {
                EXPECT_NE(std::string(e.what()).find("nchw16c"), std::string::npos) << e.what();
                throw;
            }
        },
        std::exception);
}
