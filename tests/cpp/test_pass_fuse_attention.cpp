#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

instruction_ref add(module& m, const std::string& op, std::vector<instruction_ref> inputs, const value& attrs = {}) {
    return m.add_instruction(make_op(op, attrs), inputs);
}

instruction_ref scalar(module& m, float v) {
    return add_float_literal(m, {}, {v});
}

program as_program(const module& m) {
    program p;
    *p.get_main_module() = m;
    return p;
}

// The attention BERT's export writes: q and kt each scaled by d^-1/4, an
// additive mask, softmax, the NaN guard, then the product with v.
module bert_style(bool with_mask, bool with_guard) {
    module m;
    auto q = m.add_parameter("q", float_shape({1, 2, 7, 8}));
    auto kt = m.add_parameter("kt", float_shape({1, 2, 8, 9}));
    auto v = m.add_parameter("v", float_shape({1, 2, 9, 5}));
    auto s = scalar(m, 0.59460356f);  // 8^-1/4
    auto scores = add(m, "dot", {add(m, "mul", {q, s}), add(m, "mul", {kt, s})});
    if (with_mask) scores = add(m, "add", {scores, m.add_parameter("mask", float_shape({1, 1, 7, 9}))});
    auto p = add(m, "softmax", {scores}, value_map{{"axis", -1}});
    if (with_guard) {
        auto nan = add(m, "not", {add(m, "equal", {p, p})});
        p = add(m, "where", {nan, scalar(m, 0), p});
    }
    m.add_return({add(m, "dot", {p, v})});
    return module(m);
}

}  // namespace

TEST(pass_fuse_attention, bert_style_with_mask_and_nan_guard) {
    module m = bert_style(true, true);
    module out = after_pass<fuse_attention>(m);
    EXPECT_EQ(op_names(out), std::vector<std::string>{"fused_attention"}) << out;
    const auto& op = std::prev(std::prev(out.end()))->get_operator();
    EXPECT_EQ(to_string(op),
              "fused_attention[scale=0.353553368,has_mask=true,nan_to_zero=true,masked_rows_to_zero=false,causal=false,"
              "output_order={}]");
    expect_same_outputs(m, out, 1e-5);
    expect_cpu_matches_ref(as_program(m), 1e-5);
}

TEST(pass_fuse_attention, without_mask_or_guard) {
    for (bool mask : {false, true}) {
        module m = bert_style(mask, false);
        module out = after_pass<fuse_attention>(m);
        EXPECT_EQ(op_names(out), std::vector<std::string>{"fused_attention"}) << out;
        expect_same_outputs(m, out, 1e-5);
        expect_cpu_matches_ref(as_program(m), 1e-5);
    }
}

TEST(pass_fuse_attention, gpt2_style_division_and_constant_causal_mask_first) {
    module m;
    auto q = m.add_parameter("q", float_shape({3, 11, 16}));
    auto kt = m.add_parameter("kt", float_shape({3, 16, 11}));
    auto v = m.add_parameter("v", float_shape({3, 11, 16}));
    std::vector<float> causal(11 * 11);
    for (std::size_t i = 0; i < 11; ++i)
        for (std::size_t j = 0; j < 11; ++j) causal[i * 11 + j] = j <= i ? 0.0f : -3.4e38f;
    auto mask = add_float_literal(m, {11, 11}, causal);
    auto scores = add(m, "div", {add(m, "dot", {q, kt}), scalar(m, 4)});
    auto p = add(m, "softmax", {add(m, "add", {mask, scores})}, value_map{{"axis", 2}});
    m.add_return({add(m, "dot", {p, v})});
    module out = after_pass<fuse_attention>(m);
    EXPECT_EQ(op_names(out), std::vector<std::string>{"fused_attention"}) << out;
    EXPECT_EQ(to_string(std::prev(std::prev(out.end()))->get_operator()),
              "fused_attention[scale=0.25,has_mask=true,nan_to_zero=false,masked_rows_to_zero=false,causal=false,"
              "output_order={}]");
    expect_same_outputs(m, out, 1e-5);
    expect_cpu_matches_ref(as_program(m), 1e-5);
}

TEST(pass_fuse_attention, probabilities_read_elsewhere_or_another_axis_are_left_alone) {
    {
        module m;
        auto q = m.add_parameter("q", float_shape({4, 6}));
        auto kt = m.add_parameter("kt", float_shape({6, 5}));
        auto v = m.add_parameter("v", float_shape({5, 3}));
        auto p = add(m, "softmax", {add(m, "dot", {q, kt})}, value_map{{"axis", -1}});
        m.add_return({add(m, "dot", {p, v}), p});  // the probabilities are an output too
        EXPECT_EQ(count_ops(after_pass<fuse_attention>(m), "fused_attention"), 0u);
    }
    {
        module m;
        auto q = m.add_parameter("q", float_shape({4, 6}));
        auto kt = m.add_parameter("kt", float_shape({6, 4}));
        auto v = m.add_parameter("v", float_shape({4, 3}));
        auto p = add(m, "softmax", {add(m, "dot", {q, kt})}, value_map{{"axis", 0}});
        m.add_return({add(m, "dot", {p, v})});
        EXPECT_EQ(count_ops(after_pass<fuse_attention>(m), "fused_attention"), 0u);
    }
}

// Each module is the fusable pattern with one step changed so that the
// fused op would compute something else; the pass must leave all of them alone.
TEST(pass_fuse_attention, near_misses_are_left_alone) {
    auto near_miss = [](const std::string& variant) {
        module m;
        auto q = m.add_parameter("q", float_shape({2, 6, 8}));
        auto kt = m.add_parameter("kt", float_shape({2, 8, 6}));
        auto v = m.add_parameter("v", float_shape({2, 6, 4}));
        auto mask = m.add_parameter("mask", float_shape({2, 6, 6}));
        auto scores = add(m, "dot", {q, kt});
        if (variant == "scale_after_mask") {  // (q kt + mask) * c scales the mask too
            scores = add(m, "mul", {add(m, "add", {scores, mask}), scalar(m, 0.5f)});
        } else if (variant == "tensor_scale") {  // a per-row scale is not one number
            scores = add(m, "mul", {scores, m.add_parameter("per_row", float_shape({2, 6, 1}))});
        } else if (variant == "mask_product") {  // a mask multiplied in, not added
            scores = add(m, "mul", {scores, mask});
        } else if (variant == "exp_not_softmax") {
            scores = add(m, "exp", {scores});
        }
        const bool plain_softmax = variant != "exp_not_softmax" && variant != "no_softmax";
        auto p = plain_softmax ? add(m, "softmax", {scores}, value_map{{"axis", -1}}) : scores;
        if (variant == "other_guard") {  // where(p == p, 0, p) keeps only the NaNs
            p = add(m, "where", {add(m, "equal", {p, p}), scalar(m, 0), p});
        }
        instruction_ref out;
        if (variant == "probabilities_on_the_right") {  // v^T-like product from the left
            auto vt = m.add_parameter("vt", float_shape({2, 4, 6}));
            out = add(m, "dot", {vt, p});
        } else {
            out = add(m, "dot", {p, v});
        }
        if (variant == "scores_read_elsewhere") {
            m.add_return({out, scores});
        } else {
            m.add_return({out});
        }
        return module(m);
    };
    for (const char* variant : {"scale_after_mask", "tensor_scale", "mask_product", "exp_not_softmax", "no_softmax",
                                "other_guard", "probabilities_on_the_right", "scores_read_elsewhere"}) {
        module m = near_miss(variant);
        module out = after_pass<fuse_attention>(m);
        EXPECT_EQ(count_ops(out, "fused_attention"), 0u) << variant << "\n" << out;
        expect_cpu_matches_ref(as_program(m), 1e-5);
    }
    // The control: the same builder without a change does fuse.
    EXPECT_EQ(count_ops(after_pass<fuse_attention>(near_miss("none")), "fused_attention"), 1u);
}

TEST(pass_fuse_attention, cpu_pipeline_fuses_before_post_op_fusion) {
    program p = as_program(bert_style(true, true));
    program compiled = p;
    compiled.compile(get_target("cpu"));
    EXPECT_EQ(op_names(*compiled.get_main_module()), std::vector<std::string>{"fused_attention"})
        << *compiled.get_main_module();
}

TEST(fused_attention_op, shapes_are_checked_with_the_operand_named) {
    auto error_of = [](std::vector<shape> inputs, bool mask) {
        try {
            make_op("fused_attention", value_map{{"has_mask", mask}}).compute_shape(inputs);
        } catch (const error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(error_of({float_shape({2, 4, 8}), float_shape({2, 7, 5}), float_shape({2, 5, 3})}, false).find("q @ kt"),
              std::string::npos);
    EXPECT_NE(error_of({float_shape({2, 4, 8}), float_shape({2, 8, 5}), float_shape({2, 6, 3})}, false)
                  .find("probabilities @ v"),
              std::string::npos);
    EXPECT_NE(error_of({float_shape({4, 8}), float_shape({8, 5}), float_shape({5, 3}), float_shape({2, 4, 5})}, true)
                  .find("mask"),
              std::string::npos);
    EXPECT_NE(error_of({float_shape({4, 8}), float_shape({8, 5}), float_shape({5, 3})}, true).find("expected 4"),
              std::string::npos);
    EXPECT_EQ(error_of({float_shape({4, 8}), float_shape({8, 5}), float_shape({5, 3}), float_shape({5})}, true),
              "no error");
}

namespace {

// bert_style's attention on [2, 3, 7, 8] heads, its result read through
// `readers` (each a transpose permutation; an empty one: a relu).
module heads_merged(const std::vector<std::vector<std::int64_t>>& readers) {
    module m;
    auto q = m.add_parameter("q", float_shape({2, 3, 7, 8}));
    auto kt = m.add_parameter("kt", float_shape({2, 3, 8, 9}));
    auto v = m.add_parameter("v", float_shape({2, 3, 9, 5}));
    auto p = add(m, "softmax", {add(m, "mul", {add(m, "dot", {q, kt}), scalar(m, 0.35f)})}, value_map{{"axis", -1}});
    auto attended = add(m, "dot", {p, v});
    std::vector<instruction_ref> outputs;
    for (const auto& perm : readers) {
        if (perm.empty()) {
            outputs.push_back(add(m, "relu", {attended}));
            continue;
        }
        auto t = add(m, "transpose", {attended}, value_map{{"permutation", ints(perm)}});
        outputs.push_back(add(m, "neg", {add(m, "reshape", {t}, value_map{{"dims", ints({2, -1, 15})}})}));
    }
    m.add_return(outputs);
    return module(m);
}

}  // namespace

// The exporters' [B, H, Sq, Dv] -> [B, Sq, H, Dv] transpose before the
// heads are merged becomes the fused result's memory order: the transpose
// is then a standard view and the reshape after it a view, not a copy.
TEST(pass_fuse_attention, a_head_merging_transpose_becomes_the_output_order) {
    module m = heads_merged({{0, 2, 1, 3}});
    module out = after_pass<fuse_attention>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"fused_attention", "transpose", "reshape", "neg"})) << out;
    const std::string text = to_string(out);
    EXPECT_NE(text.find("fused_attention[scale=0.349999994,has_mask=false,nan_to_zero=false,masked_rows_to_zero=false,"
                        "causal=false,output_order={0, 2, 1, "
                        "3}](q,kt,v) -> float_type, {2, 3, 7, 5}, {105, 5, 15, 1}"),
              std::string::npos)
        << out;
    EXPECT_NE(text.find("transpose[permutation={0, 2, 1, 3}](@"), std::string::npos) << out;
    for (const auto& ins : out) {
        if (ins.name() == "transpose") {
            EXPECT_TRUE(ins.get_shape().standard()) << out;
        }
    }
    expect_same_outputs(m, out, 1e-5);
    expect_cpu_matches_ref(as_program(m), 1e-5);
}

TEST(pass_fuse_attention, the_output_order_is_left_alone_unless_every_reader_wants_it) {
    for (const auto& readers : std::vector<std::vector<std::vector<std::int64_t>>>{
             {{0, 1, 3, 2}},                // moves the rows' last dim: not a layout the kernel writes
             {{0, 2, 1, 3}, {}},            // a second reader takes the result as it is
             {{0, 2, 1, 3}, {2, 0, 1, 3}},  // two readers, two orders
         }) {
        module m = heads_merged(readers);
        module out = after_pass<fuse_attention>(m);
        EXPECT_EQ(count_ops(out, "fused_attention"), 1u) << out;
        EXPECT_NE(to_string(out).find("output_order={}"), std::string::npos) << out;
        expect_same_outputs(m, out, 1e-5);
        expect_cpu_matches_ref(as_program(m), 1e-5);
    }
}

TEST(fused_attention_op, output_order_sets_the_result_strides_and_is_checked) {
    const std::vector<shape> inputs{float_shape({2, 3, 4, 8}), float_shape({2, 3, 8, 6}), float_shape({2, 3, 6, 5})};
    auto with_order = [](std::vector<std::int64_t> order) {
        return make_op("fused_attention", value_map{{"output_order", ints(std::move(order))}});
    };
    // Memory order [B, Sq, H, Dv] = [2, 4, 3, 5]: H steps 5, Sq 15, B 60.
    EXPECT_EQ(with_order({0, 2, 1, 3}).compute_shape(inputs),
              (shape{dtype::float_type, {2, 3, 4, 5}, {60, 5, 15, 1}}));
    EXPECT_EQ(with_order({}).compute_shape(inputs), float_shape({2, 3, 4, 5}));
    for (const auto& bad : std::vector<std::vector<std::int64_t>>{{0, 2, 1}, {0, 2, 2, 3}, {0, 1, 2, 4}}) {
        try {
            with_order(bad).compute_shape(inputs);
            ADD_FAILURE() << "no error for output_order of " << bad.size() << " entries";
        } catch (const error& e) {
            EXPECT_NE(std::string(e.what()).find("output_order"), std::string::npos) << e.what();
        }
    }
}

// PyTorch's decomposition of scaled_dot_product_attention with a boolean
// mask: where(mask, s, -inf), softmax, and the guard that gives rows masked
// out entirely 0 (row 0 here), where(equal(reduce_max(s), -inf), 0, p).
TEST(pass_fuse_attention, torch_style_boolean_mask_and_masked_row_guard) {
    for (bool mask_selects_scores : {true, false}) {
        SCOPED_TRACE(mask_selects_scores ? "where(mask, s, -inf)" : "where(not_mask, -inf, s)");
        program p;
        module& m = *p.get_main_module();
        auto q = m.add_parameter("q", float_shape({1, 2, 7, 8}));
        auto kt = m.add_parameter("kt", float_shape({1, 2, 8, 9}));
        auto v = m.add_parameter("v", float_shape({1, 2, 9, 5}));
        std::vector<double> keep(7 * 9);
        for (std::size_t i = 0; i < 7; ++i)
            for (std::size_t j = 0; j < 9; ++j) keep[i * 9 + j] = (i > 0 && j <= i) == mask_selects_scores ? 1 : 0;
        auto mask = m.add_literal(literal(shape(dtype::bool_type, {1, 1, 7, 9}), keep));
        auto scores = add(m, "mul", {add(m, "dot", {q, kt}), scalar(m, 0.35f)});
        auto minus_inf = scalar(m, -std::numeric_limits<float>::infinity());
        auto masked = mask_selects_scores ? add(m, "where", {mask, scores, minus_inf})
                                          : add(m, "where", {mask, minus_inf, scores});
        auto probabilities = add(m, "softmax", {masked}, value_map{{"axis", -1}});
        auto row_max = add(m, "reduce_max", {masked}, value_map{{"axes", ints({3})}, {"keepdims", true}});
        auto guarded = add(m, "where", {add(m, "equal", {row_max, minus_inf}), scalar(m, 0), probabilities});
        m.add_return({add(m, "dot", {guarded, v})});
        module out = after_pass<fuse_attention>(m);
        EXPECT_EQ(op_names(out), (std::vector<std::string>{"where", "fused_attention"})) << out;
        EXPECT_EQ(to_string(std::prev(std::prev(out.end()))->get_operator()),
                  "fused_attention[scale=0.349999994,has_mask=true,nan_to_zero=false,masked_rows_to_zero=true,"
                  "causal=false,output_order={}]");
        expect_same_outputs(m, out, 1e-5);
        expect_cpu_matches_ref(p, 1e-5);
        // Row 0 is masked out entirely: its outputs are 0, not NaN.
        auto got = evaluate_module(out, random_inputs(m, 3));
        for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(got[0].value_at(i), 0.0);
    }
}

TEST(pass_fuse_attention, keeps_a_finite_where_mask_or_a_guard_over_other_values) {
    // where(mask, s, -1e4) is not s + where(mask, 0, -1e4); a guard on another tensor's maximum is no row guard.
    module m;
    auto q = m.add_parameter("q", float_shape({2, 4, 8}));
    auto kt = m.add_parameter("kt", float_shape({2, 8, 4}));
    auto v = m.add_parameter("v", float_shape({2, 4, 3}));
    auto mask = m.add_parameter("mask", shape(dtype::bool_type, {4, 4}));
    auto finite = add(m, "softmax", {add(m, "where", {mask, add(m, "dot", {q, kt}), scalar(m, -1e4f)})},
                      value_map{{"axis", -1}});
    auto other = m.add_parameter("other", float_shape({2, 4, 4}));
    auto minus_inf = scalar(m, -std::numeric_limits<float>::infinity());
    auto masked = add(m, "where", {mask, add(m, "dot", {q, kt}), minus_inf});
    auto row_max = add(m, "reduce_max", {other}, value_map{{"axes", ints({2})}, {"keepdims", true}});
    auto guarded = add(m, "where", {add(m, "equal", {row_max, minus_inf}), scalar(m, 0),
                                    add(m, "softmax", {masked}, value_map{{"axis", -1}})});
    m.add_return({add(m, "dot", {finite, v}), add(m, "dot", {guarded, v})});
    module out = after_pass<fuse_attention>(m);
    EXPECT_EQ(count_ops(out, "fused_attention"), 0u) << out;
}

namespace {

// Llama's grouped-query attention: 2 key/value heads [1, 2, 5, 8], each
// repeated for 2 of the 4 query heads by reshape(broadcast(unsqueeze(.)))
// (repeat_kv), a mask of `mask_heads` heads (0: none), and the result read
// through the head-merging transpose when `merged`, else by a relu.
module repeated_heads(std::size_t mask_heads, bool merged) {
    module m;
    auto q = m.add_parameter("q", float_shape({1, 4, 3, 8}));
    auto repeat = [&](instruction_ref x) {
        auto wide = add(m, "broadcast", {add(m, "unsqueeze", {x}, value_map{{"axes", ints({2})}})},
                        value_map{{"out_lens", ints({1, 2, 2, 5, 8})}});
        return add(m, "reshape", {wide}, value_map{{"dims", ints({1, 4, 5, 8})}});
    };
    auto k = repeat(m.add_parameter("k", float_shape({1, 2, 5, 8})));
    auto v = repeat(m.add_parameter("v", float_shape({1, 2, 5, 8})));
    auto kt = add(m, "transpose", {k}, value_map{{"permutation", ints({0, 1, 3, 2})}});
    auto scores = add(m, "mul", {add(m, "dot", {q, kt}), scalar(m, 0.35f)});
    if (mask_heads > 0) scores = add(m, "add", {scores, m.add_parameter("mask", float_shape({1, mask_heads, 3, 5}))});
    auto attended = add(m, "dot", {add(m, "softmax", {scores}, value_map{{"axis", -1}}), v});
    if (merged) {
        auto t = add(m, "transpose", {attended}, value_map{{"permutation", ints({0, 2, 1, 3})}});
        m.add_return({add(m, "neg", {add(m, "reshape", {t}, value_map{{"dims", ints({1, 3, 32})}})})});
    } else {
        m.add_return({add(m, "relu", {attended})});
    }
    return module(m);
}

}  // namespace

// The cpu target's fuse_attention reads the two unrepeated heads over a
// split batch dimension: no reshape copies a repeated head any more, and
// the results are the same whatever the mask and the readers.
TEST(pass_fuse_attention, repeated_key_value_heads_are_read_in_place) {
    for (std::size_t mask_heads : {0u, 1u, 4u}) {
        for (bool merged : {false, true}) {
            SCOPED_TRACE("mask heads " + std::to_string(mask_heads) + (merged ? ", merged" : ", relu"));
            module m = repeated_heads(mask_heads, merged);
            fuse_attention grouped;
            grouped.read_repeated_heads_in_place = true;
            module out = after_pass(m, grouped);
            ASSERT_EQ(count_ops(out, "fused_attention"), 1u) << out;
            EXPECT_EQ(count_ops(out, "broadcast"), 0u) << out;
            for (const auto& ins : out) {
                if (ins.name() == "fused_attention") {
                    EXPECT_EQ(ins.get_shape().lens(), (std::vector<std::size_t>{1, 2, 2, 3, 8})) << out;
                    EXPECT_EQ(ins.inputs()[1]->get_shape().lens(), (std::vector<std::size_t>{1, 2, 1, 8, 5})) << out;
                }
                // Every reshape left is a view: of a standard input.
                if (ins.name() == "reshape" && mask_heads != 4) {
                    EXPECT_TRUE(ins.inputs()[0]->get_shape().standard()) << out;
                }
            }
            expect_same_outputs(m, out, 1e-5);
            expect_cpu_matches_ref(as_program(m), 1e-5);
            // Without the option (the gpu target) the repeated copies stay.
            EXPECT_EQ(count_ops(after_pass<fuse_attention>(m), "broadcast"), 2u);
        }
    }
}

// Heads repeated other than by kv-major groups, or keys that are not
// repeated the same way as the values, are left to the copies.
TEST(pass_fuse_attention, other_repetitions_keep_their_copies) {
    module m;
    auto q = m.add_parameter("q", float_shape({1, 4, 3, 8}));
    // [1, 2, 5, 8] repeated head-minor (rep outermost): heads h and h + 2 share a key head.
    auto k = add(
        m, "reshape",
        {add(m, "broadcast",
             {add(m, "unsqueeze", {m.add_parameter("k", float_shape({1, 2, 5, 8}))}, value_map{{"axes", ints({1})}})},
             value_map{{"out_lens", ints({1, 2, 2, 5, 8})}})},
        value_map{{"dims", ints({1, 4, 5, 8})}});
    auto v = m.add_parameter("v", float_shape({1, 4, 5, 8}));
    auto kt = add(m, "transpose", {k}, value_map{{"permutation", ints({0, 1, 3, 2})}});
    auto attended = add(m, "dot", {add(m, "softmax", {add(m, "dot", {q, kt})}, value_map{{"axis", -1}}), v});
    m.add_return({attended});
    fuse_attention grouped;
    grouped.read_repeated_heads_in_place = true;
    module out = after_pass(m, grouped);
    EXPECT_EQ(count_ops(out, "fused_attention"), 1u) << out;
    EXPECT_EQ(count_ops(out, "broadcast"), 1u) << out;
    expect_same_outputs(m, out, 1e-5);
}

TEST(pass_fuse_attention, a_broadcast_mask_is_read_from_its_source) {
    // A padding mask per key [1, 1, 1, 9], broadcast to [1, 1, 7, 9] before the add.
    module m;
    auto q = m.add_parameter("q", float_shape({1, 2, 7, 8}));
    auto kt = m.add_parameter("kt", float_shape({1, 2, 8, 9}));
    auto v = m.add_parameter("v", float_shape({1, 2, 9, 5}));
    auto keys = m.add_parameter("keys", float_shape({1, 1, 1, 9}));
    auto mask = add(m, "broadcast", {keys}, value_map{{"out_lens", ints({1, 1, 7, 9})}});
    auto scores = add(m, "add", {add(m, "dot", {q, kt}), mask});
    m.add_return({add(m, "dot", {add(m, "softmax", {scores}, value_map{{"axis", -1}}), v})});
    module out = after_pass<fuse_attention>(m);
    const auto attention =
        std::find_if(out.begin(), out.end(), [](const instruction& i) { return i.name() == "fused_attention"; });
    ASSERT_NE(attention, out.end()) << out;
    EXPECT_EQ(attention->inputs().at(3)->name(), "@param") << out;
    EXPECT_EQ(attention->inputs().at(3)->get_shape().lens(), (std::vector<std::size_t>{1, 1, 1, 9})) << out;
    expect_same_outputs(m, out, 1e-5);
    expect_cpu_matches_ref(as_program(m), 1e-5);
}
