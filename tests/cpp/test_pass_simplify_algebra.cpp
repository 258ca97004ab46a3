#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

module unary_chain(const std::function<instruction_ref(module&, instruction_ref)>& body,
                   shape s = float_shape({2, 3})) {
    module m;
    auto x = m.add_parameter("x", s);
    m.add_return({m.add_instruction(make_op("relu"), {body(m, x)})});
    return module(m);
}

}  // namespace

TEST(pass_simplify_algebra, removes_exact_identities) {
    module m = unary_chain([](module& mm, instruction_ref x) {
        auto zero = add_float_literal(mm, {3}, {0, 0, 0});
        auto one = add_float_literal(mm, {1}, {1});
        auto a = mm.add_instruction(make_op("add"), {zero, x});
        auto b = mm.add_instruction(make_op("mul"), {a, one});
        auto c = mm.add_instruction(make_op("div"), {b, one});
        auto d = mm.add_instruction(make_op("sub"), {c, zero});
        auto n1 = mm.add_instruction(make_op("neg"), {d});
        return mm.add_instruction(make_op("neg"), {n1});
    });
    module out = after_pass<simplify_algebra>(m);
    EXPECT_EQ(to_string(out),
              "module: \"main\"\n"
              "x = @param:x -> float_type, {2, 3}, {3, 1}\n"
              "@1 = relu(x) -> float_type, {2, 3}, {3, 1}\n"
              "@2 = @return(@1)\n");
    expect_same_outputs(m, out);
}

TEST(pass_simplify_algebra, keeps_identities_that_would_change_the_shape_or_are_not_identities) {
    module m = unary_chain([](module& mm, instruction_ref x) {
        auto zeros = add_float_literal(mm, {4, 2, 3}, std::vector<float>(24, 0));  // broadcasts x up
        auto ones = add_float_literal(mm, {3}, {1, 1, 2});
        auto a = mm.add_instruction(make_op("add"), {x, zeros});
        return mm.add_instruction(make_op("mul"), {a, ones});
    });
    module out = after_pass<simplify_algebra>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"add", "mul", "relu"})) << out;
}

TEST(pass_simplify_algebra, float_times_zero_is_kept_integer_times_zero_folds) {
    module mf = unary_chain([](module& mm, instruction_ref x) {
        return mm.add_instruction(make_op("mul"), {x, add_float_literal(mm, {1}, {0})});
    });
    EXPECT_EQ(count_ops(after_pass<simplify_algebra>(mf), "mul"), 1u);  // NaN*0 is NaN, -1*0 is -0

    shape si{dtype::int32_type, {2, 3}};
    module mi = unary_chain(
        [](module& mm, instruction_ref x) {
            auto zero = mm.add_literal(literal(shape{dtype::int32_type, {1}}, std::vector<int>{0}));
            return mm.add_instruction(make_op("mul"), {zero, x});
        },
        si);
    module out = after_pass<simplify_algebra>(mi);
    EXPECT_EQ(op_names(out), std::vector<std::string>{"relu"}) << out;
    expect_same_outputs(mi, out);
}

TEST(pass_simplify_algebra, reassociates_constant_chains_for_constant_propagation) {
    module m = unary_chain([](module& mm, instruction_ref x) {
        auto c1 = add_float_literal(mm, {3}, {1, 2, 3});
        auto c2 = add_float_literal(mm, {1}, {0.5});
        auto c3 = add_float_literal(mm, {2, 3}, {1, 1, 1, 2, 2, 2});
        auto a = mm.add_instruction(make_op("add"), {c1, x});
        auto b = mm.add_instruction(make_op("sub"), {a, c2});
        auto c = mm.add_instruction(make_op("add"), {c3, b});
        auto d = mm.add_instruction(make_op("mul"), {c, c2});
        auto e = mm.add_instruction(make_op("mul"), {c1, d});
        return e;
    });
    module out = after_passes(m, {std::make_shared<simplify_algebra>(), std::make_shared<constant_propagation>()});
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"add", "mul", "relu"})) << out;
    expect_same_outputs(m, out, 1e-6);
}

TEST(pass_simplify_algebra, reassociates_every_sign_combination) {
    for (const char* inner : {"add", "sub"})
        for (const char* outer : {"add", "sub"}) {
            module m = unary_chain([&](module& mm, instruction_ref x) {
                auto c1 = add_float_literal(mm, {3}, {1, 2, 3});
                auto c2 = add_float_literal(mm, {3}, {0.5, -4, 8});
                auto a = mm.add_instruction(make_op(inner), {x, c1});
                return mm.add_instruction(make_op(outer), {a, c2});
            });
            module out =
                after_passes(m, {std::make_shared<simplify_algebra>(), std::make_shared<constant_propagation>()});
            EXPECT_EQ(op_names(out).size(), 2u) << inner << "/" << outer << "\n" << out;
            expect_same_outputs(m, out, 1e-6);
        }
}

TEST(pass_simplify_algebra, recognises_constants_computed_from_literals) {
    module m = unary_chain([](module& mm, instruction_ref x) {
        auto zero = add_float_literal(mm, {1}, {0});
        auto zeros = mm.add_instruction(make_op("broadcast", value_map{{"out_lens", ints({2, 3})}}), {zero});
        return mm.add_instruction(make_op("add"), {x, zeros});
    });
    module out = after_pass<simplify_algebra>(m);
    EXPECT_EQ(op_names(out), std::vector<std::string>{"relu"}) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_algebra, does_not_reassociate_through_a_shared_intermediate) {
    module m;
    auto x = m.add_parameter("x", float_shape({3}));
    auto c1 = add_float_literal(m, {3}, {1, 2, 3});
    auto a = m.add_instruction(make_op("add"), {x, c1});
    auto b = m.add_instruction(make_op("add"), {a, c1});
    m.add_return({a, b});
    module out = after_pass<simplify_algebra>(m);
    EXPECT_EQ(to_string(out), to_string(m));
}

TEST(pass_simplify_algebra, folds_power_of_two_scales_into_dot_weights_exactly) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", float_shape({2, 4, 8}));
    auto w1 = add_random_literal(*m, {8, 6}, 3);
    auto w2 = add_random_literal(*m, {6, 5}, 4);
    auto quarter = add_float_literal(*m, {1}, {0.25});
    auto cols = add_float_literal(*m, {1, 1, 6}, {1, 2, 4, 0.5, -8, 0.125});
    auto scaled_in = m->add_instruction(make_op("mul"), {x, quarter});
    auto d1 = m->add_instruction(make_op("dot"), {scaled_in, w1});
    auto s1 = m->add_instruction(make_op("mul"), {cols, d1});
    auto d2 = m->add_instruction(make_op("dot"), {s1, w2});
    auto eight = add_float_literal(*m, {1}, {8});
    m->add_return({m->add_instruction(make_op("div"), {d2, eight})});

    module out = after_passes(*m, {std::make_shared<simplify_algebra>(), std::make_shared<constant_propagation>()});
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"dot", "dot"})) << out;
    expect_same_outputs(*m, out, 0);  // powers of two: bitwise equal
    expect_cpu_matches_ref(p);
}

TEST(pass_simplify_algebra, keeps_inexact_or_shared_weight_scales) {
    module m;
    auto x = m.add_parameter("x", float_shape({4, 8}));
    auto w = add_random_literal(m, {8, 8}, 3);
    auto d1 = m.add_instruction(make_op("dot"), {x, w});
    auto s1 = m.add_instruction(make_op("mul"), {d1, add_float_literal(m, {1}, {0.3f})});  // not a power of two
    auto v = add_random_literal(m, {8, 8}, 5);
    auto d2 = m.add_instruction(make_op("dot"), {s1, v});
    auto d3 = m.add_instruction(make_op("dot"), {x, v});  // v is shared
    auto s2 = m.add_instruction(make_op("mul"), {d2, add_float_literal(m, {1}, {2})});
    m.add_return({s2, d3});
    module out = after_pass<simplify_algebra>(m);
    EXPECT_EQ(count_ops(out, "mul"), 2u) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_algebra, cpu_pipeline_matches_ref_on_a_mixed_graph) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", float_shape({3, 4}));
    auto zero = add_float_literal(*m, {4}, {0, 0, 0, 0});
    auto c = add_float_literal(*m, {4}, {1, -1, 2, -2});
    auto a = m->add_instruction(make_op("add"), {x, zero});
    auto b = m->add_instruction(make_op("add"), {a, c});
    auto d = m->add_instruction(make_op("add"), {b, c});
    auto t = m->add_instruction(make_op("transpose", value_map{{"permutation", ints({1, 0})}}), {d});
    auto tt = m->add_instruction(make_op("transpose", value_map{{"permutation", ints({1, 0})}}), {t});
    m->add_return({m->add_instruction(make_op("tanh"), {tt})});
    expect_cpu_matches_ref(p);
}

TEST(pass_simplify_algebra, folds_batch_norm_into_convolution_weights_and_a_bias) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3, 6, 6}));
    auto w = add_random_literal(m, {4, 3, 3, 3}, 1);
    auto conv = m.add_instruction(make_op("convolution", value_map{{"padding", ints({1, 1})}}), {x, w});
    auto scale = add_random_literal(m, {4}, 2);
    auto bias = add_random_literal(m, {4}, 3);
    auto mean = add_random_literal(m, {4}, 4);
    auto var = add_float_literal(m, {4}, {0.5f, 1.0f, 2.0f, 0.25f});
    auto bn = m.add_instruction(make_op("batch_norm_inference", value_map{{"epsilon", 1e-3}}),
                                {conv, scale, bias, mean, var});
    m.add_return({m.add_instruction(make_op("relu"), {bn})});
    module out = after_passes(m, {std::make_shared<simplify_algebra>(), std::make_shared<constant_propagation>()});
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"convolution", "add", "relu"})) << out;
    expect_same_outputs(m, out, 1e-5);
}

TEST(pass_simplify_algebra, decomposes_batch_norm_when_the_convolution_has_other_users) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 2, 4, 4}));
    auto w = add_random_literal(m, {2, 2, 1, 1}, 1);
    auto conv = m.add_instruction(make_op("convolution"), {x, w});
    std::vector<instruction_ref> params{conv};
    for (unsigned long s = 2; s < 6; ++s) params.push_back(add_float_literal(m, {2}, {1.0f + s, 0.5f}));
    auto bn = m.add_instruction(make_op("batch_norm_inference"), params);
    m.add_return({bn, conv});
    // The weights stay as they are (the other user reads the convolution); the batch norm becomes x * s + t.
    module out = after_passes(m, {std::make_shared<simplify_algebra>(), std::make_shared<constant_propagation>()});
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"convolution", "mul", "add"})) << out;
    for (const auto& ins : out) {
        if (ins.name() == "convolution") {
            EXPECT_EQ(ins.inputs()[1]->get_literal().to_vector<float>(), w->get_literal().to_vector<float>());
        }
    }
    expect_same_outputs(m, out, 1e-5);
}

TEST(pass_simplify_algebra, decomposes_batch_norm_before_a_convolution_into_a_per_channel_scale_and_shift) {
    // DenseNet's layer: concat -> batch norm -> relu -> convolution.
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3, 5, 5}));
    auto y = m.add_parameter("y", float_shape({2, 2, 5, 5}));
    auto both = m.add_instruction(make_op("concat", value_map{{"axis", std::int64_t{1}}}), {x, y});
    auto bn = m.add_instruction(make_op("batch_norm_inference", value_map{{"epsilon", 1e-3}}),
                                {both, add_random_literal(m, {5}, 2), add_random_literal(m, {5}, 3),
                                 add_random_literal(m, {5}, 4), add_float_literal(m, {5}, {0.5f, 1, 2, 0.25f, 3})});
    auto relu = m.add_instruction(make_op("relu"), {bn});
    m.add_return({m.add_instruction(make_op("convolution"), {relu, add_random_literal(m, {4, 5, 1, 1}, 5)})});
    module out = after_passes(m, {std::make_shared<simplify_algebra>(), std::make_shared<constant_propagation>()});
    EXPECT_EQ(count_ops(out, "batch_norm_inference"), 0u) << out;
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"concat", "mul", "add", "relu", "convolution"})) << out;
    expect_same_outputs(m, out, 1e-5);
}

TEST(pass_simplify_algebra, folds_a_per_channel_scale_into_convolution_weights) {
    // conv * c and (conv + b) * c, c as [C, 1, 1] and as [1, C, 1, 1]: a batch norm already decomposed.
    for (bool biased : {false, true}) {
        for (std::vector<std::size_t> c_lens : {std::vector<std::size_t>{4, 1, 1}, std::vector<std::size_t>{1, 4, 1, 1}}) {
            SCOPED_TRACE(std::string(biased ? "biased, " : "") + std::to_string(c_lens.size()) + "-d scale");
            module m;
            auto x = m.add_parameter("x", float_shape({2, 3, 6, 6}));
            auto w = add_random_literal(m, {4, 3, 3, 3}, 1);
            instruction_ref y = m.add_instruction(make_op("convolution", value_map{{"padding", ints({1, 1})}}), {x, w});
            if (biased) y = m.add_instruction(make_op("add"), {y, add_random_literal(m, {1, 4, 1, 1}, 2)});
            auto scaled = m.add_instruction(make_op("mul"), {add_random_literal(m, c_lens, 3), y});
            m.add_return({m.add_instruction(make_op("relu"), {scaled})});
            module out = after_passes(m, {std::make_shared<simplify_algebra>(), std::make_shared<constant_propagation>()});
            const std::vector<std::string> expected =
                biased ? std::vector<std::string>{"convolution", "add", "relu"} : std::vector<std::string>{"convolution", "relu"};
            EXPECT_EQ(op_names(out), expected) << out;
            expect_same_outputs(m, out, 1e-5);
        }
    }
}

TEST(pass_simplify_algebra, keeps_a_convolution_scale_that_varies_along_space_or_a_shared_convolution) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 2, 4, 4}));
    auto conv = m.add_instruction(make_op("convolution"), {x, add_random_literal(m, {2, 2, 1, 1}, 1)});
    auto along_width = m.add_instruction(make_op("mul"), {conv, add_random_literal(m, {1, 1, 1, 4}, 2)});
    auto conv2 = m.add_instruction(make_op("convolution"), {x, add_random_literal(m, {2, 2, 1, 1}, 3)});
    auto shared = m.add_instruction(make_op("mul"), {conv2, add_random_literal(m, {2, 1, 1}, 4)});
    m.add_return({along_width, shared, conv2});
    module out = after_passes(m, {std::make_shared<simplify_algebra>(), std::make_shared<constant_propagation>()});
    EXPECT_EQ(count_ops(out, "mul"), 2u) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_algebra, turns_max_then_min_with_scalar_bounds_into_clip) {
    // PyTorch's hardtanh / ReLU6 arrive as max(x, 0) then min(., 6), the bounds on either side.
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3, 4, 4}));
    auto lo = add_float_literal(m, {}, {0});
    auto hi = add_float_literal(m, {1}, {6});
    auto lower = m.add_instruction(make_op("max"), {lo, x});
    m.add_return({m.add_instruction(make_op("min"), {lower, hi})});
    module out = after_pass<simplify_algebra>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"clip"})) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_algebra, keeps_max_min_with_tensor_bounds_or_a_shared_max) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3}));
    auto per_column = m.add_instruction(
        make_op("min"), {m.add_instruction(make_op("max"), {x, add_float_literal(m, {}, {0})}), add_random_literal(m, {3}, 1)});
    auto shared = m.add_instruction(make_op("max"), {x, add_float_literal(m, {}, {-1})});
    auto clamped = m.add_instruction(make_op("min"), {shared, add_float_literal(m, {}, {1})});
    m.add_return({per_column, clamped, shared});
    module out = after_pass<simplify_algebra>(m);
    EXPECT_EQ(count_ops(out, "clip"), 0u) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_algebra, folds_a_zero_spatial_pad_into_the_convolution_padding) {
    // TensorFlow "same" padding as Hugging Face's MobileNetV2 writes it: pad the end of H and W by one,
    // then a stride-2 convolution that already pads (1, 1) on its own.
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({1, 3, 9, 9}));
    auto padded = m.add_instruction(
        make_op("pad", value_map{{"pads", ints({0, 0, 0, 2, 0, 0, 1, 1})}}), {x});
    auto conv = m.add_instruction(
        make_op("convolution", value_map{{"padding", ints({1, 1})}, {"stride", ints({2, 2})}}),
        {padded, add_random_literal(m, {4, 3, 3, 3}, 1)});
    m.add_return({conv});
    module out = after_pass<simplify_algebra>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"convolution"})) << out;
    expect_same_outputs(m, out, 1e-6);
    expect_cpu_matches_ref(p);
}

TEST(pass_simplify_algebra, keeps_pads_that_are_not_zero_or_touch_batch_and_channels) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 2, 5, 5}));
    auto w = add_random_literal(m, {2, 2, 3, 3}, 1);
    auto ones = m.add_instruction(make_op("pad", value_map{{"pads", ints({0, 0, 1, 1, 0, 0, 1, 1})}, {"value", 1.0}}), {x});
    auto channels = m.add_instruction(make_op("pad", value_map{{"pads", ints({0, 1, 0, 0, 0, 1, 0, 0})}}), {x});
    auto edge = m.add_instruction(make_op("pad", value_map{{"pads", ints({0, 0, 1, 1, 0, 0, 1, 1})}, {"mode", "edge"}}), {x});
    m.add_return({m.add_instruction(make_op("convolution"), {ones, w}),
                  m.add_instruction(make_op("convolution"), {channels, add_random_literal(m, {2, 4, 3, 3}, 2)}),
                  m.add_instruction(make_op("convolution"), {edge, w})});
    module out = after_pass<simplify_algebra>(m);
    EXPECT_EQ(count_ops(out, "pad"), 3u) << out;
    expect_same_outputs(m, out);
}

namespace {

instruction_ref max_pool_of_padded(module& m, instruction_ref x, std::vector<std::int64_t> pads, const char* mode = "max") {
    auto padded = m.add_instruction(make_op("pad", value_map{{"pads", ints(pads)}}), {x});
    return m.add_instruction(make_op("pooling", value_map{{"mode", mode}, {"lengths", ints({3, 3})}, {"stride", ints({2, 2})}}),
                             {padded});
}

}  // namespace

TEST(pass_simplify_algebra, folds_a_zero_pad_of_relu_outputs_into_max_pooling) {
    // Keras ResNet-50's pool1_pad: ZeroPadding2D(1) then a 3x3 stride-2 max pool of ReLU outputs.
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({1, 4, 9, 8}));
    auto relu = m.add_instruction(make_op("relu"), {x});
    m.add_return({max_pool_of_padded(m, relu, {0, 0, 1, 1, 0, 0, 2, 1})});
    module out = after_pass<simplify_algebra>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"relu", "pooling"})) << out;
    expect_same_outputs(m, out);
    expect_cpu_matches_ref(p, 0);
}

TEST(pass_simplify_algebra, keeps_a_pad_before_pooling_of_signed_values_or_an_average_or_a_window_of_padding) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 2, 8, 8}));
    auto relu = m.add_instruction(make_op("relu"), {x});
    m.add_return({max_pool_of_padded(m, x, {0, 0, 1, 1, 0, 0, 1, 1}),
                  max_pool_of_padded(m, relu, {0, 0, 1, 1, 0, 0, 1, 1}, "average"),
                  max_pool_of_padded(m, relu, {0, 0, 3, 0, 0, 0, 0, 0})});
    module out = after_pass<simplify_algebra>(m);
    EXPECT_EQ(count_ops(out, "pad"), 3u) << out;
    expect_same_outputs(m, out);
}

namespace {

// softmax(x + where(c, a, b)) over the last axis: an attention's additive mask, as PyTorch exports an
// unmasked one (c an expanded all-true constant, a 0, b the lowest float).
module additive_mask_softmax(const std::vector<int>& condition, float a, float b) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3, 4, 4}));
    auto c = m.add_literal(literal(shape{dtype::bool_type, {2, 1, 4, 4}}, condition));
    auto mask = m.add_instruction(make_op("where"), {c, add_float_literal(m, {1}, {a}), add_float_literal(m, {1}, {b})});
    auto scores = m.add_instruction(make_op("add"), {x, mask});
    m.add_return({m.add_instruction(make_op("softmax", value_map{{"axis", -1}}), {scores})});
    return module(m);
}

}  // namespace

TEST(pass_simplify_algebra, an_all_true_constant_condition_leaves_no_where_and_no_zero_mask) {
    module m = additive_mask_softmax(std::vector<int>(32, 1), 0.0f, -3.4e38f);
    module out = after_pass<simplify_algebra>(m);
    EXPECT_EQ(op_names(out), std::vector<std::string>{"softmax"}) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_algebra, an_all_false_constant_condition_keeps_the_other_branch_broadcast) {
    module m = additive_mask_softmax(std::vector<int>(32, 0), 0.0f, -2.5f);
    module out = after_pass<simplify_algebra>(m);
    EXPECT_EQ(count_ops(out, "where"), 0u) << out;
    EXPECT_EQ(count_ops(out, "add"), 1u) << out;  // x + broadcast(-2.5) stays: it is no identity
    expect_same_outputs(m, out);
}

TEST(pass_simplify_algebra, keeps_a_where_whose_constant_condition_varies) {
    std::vector<int> condition(32, 1);
    condition[5] = 0;
    module m = additive_mask_softmax(condition, 0.0f, -3.4e38f);
    module out = after_pass<simplify_algebra>(m);
    EXPECT_EQ(count_ops(out, "where"), 1u) << out;
    EXPECT_EQ(count_ops(out, "add"), 1u) << out;
    expect_same_outputs(m, out);
}

namespace {

// transformers' encoder mask: and(padding [2, 1, 1, 4] of a parameter,
// a constant [1, 1, 4, 1] of `causal`) -> where(., 0, lowest), added to the
// scores [2, 3, 4, 4] before their softmax.
module padding_and_constant_mask(const std::vector<int>& causal) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3, 4, 4}));
    auto padding = m.add_parameter("padding", shape{dtype::bool_type, {2, 1, 1, 4}});
    auto c = m.add_literal(literal(shape{dtype::bool_type, {1, 1, 4, 1}}, causal));
    auto both = m.add_instruction(make_op("and"), {padding, c});
    auto mask = m.add_instruction(make_op("where"),
                                  {both, add_float_literal(m, {1}, {0.0f}), add_float_literal(m, {1}, {-3.4e38f})});
    auto scores = m.add_instruction(make_op("add"), {x, mask});
    m.add_return({m.add_instruction(make_op("softmax", value_map{{"axis", -1}}), {scores})});
    return module(m);
}

}  // namespace

TEST(pass_simplify_algebra, an_and_with_true_keeps_the_padding_mask_per_key) {
    module m = padding_and_constant_mask({1, 1, 1, 1});
    module out = after_pass<simplify_algebra>(m);
    EXPECT_EQ(count_ops(out, "and"), 0u) << out;
    // The where is computed per key ([2, 1, 1, 4]) and broadcast, not per (query, key).
    bool per_key = false;
    for (const auto& ins : out)
        if (ins.name() == "where") per_key = ins.get_shape().lens() == std::vector<std::size_t>{2, 1, 1, 4};
    EXPECT_TRUE(per_key) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_algebra, an_and_with_a_constant_that_is_not_all_true_stays) {
    module m = padding_and_constant_mask({1, 1, 0, 1});
    module out = after_pass<simplify_algebra>(m);
    EXPECT_EQ(count_ops(out, "and"), 1u) << out;
    expect_same_outputs(m, out);
}

TEST(pass_simplify_algebra, an_or_with_false_is_its_other_operand) {
    module m;
    auto a = m.add_parameter("a", shape{dtype::bool_type, {3, 4}});
    auto f = m.add_literal(literal(shape{dtype::bool_type, {4}}, std::vector<int>{0, 0, 0, 0}));
    auto either = m.add_instruction(make_op("or"), {f, a});
    m.add_return({m.add_instruction(make_op("not"), {either})});
    module out = after_pass<simplify_algebra>(m);
    EXPECT_EQ(count_ops(out, "or"), 0u) << out;
    expect_same_outputs(m, out);
}
