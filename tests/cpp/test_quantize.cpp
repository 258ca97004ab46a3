// Post-training quantization pieces: the streaming calibration histogram,
// the entropy threshold search, scale choice and QDQ insertion. Expected
// values are worked out by hand in the comments.
#include "pass_test_helpers.hpp"
#include "passes/insert_quantize_dequantize.hpp"
#include "quantize/activation_statistics.hpp"
#include "quantize/mse_clip_bins.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

argument floats(const std::vector<float>& values) {
    return make_argument(float_shape({values.size()}), values);
}

std::uint64_t total(const std::vector<std::uint64_t>& counts) {
    std::uint64_t n = 0;
    for (auto c : counts) n += c;
    return n;
}

}  // namespace

TEST(activation_statistics, bins_magnitudes_by_sign_over_the_first_bound) {
    activation_statistics s(8);
    s.add(floats({0.f, 0.5f, -0.5f, 1.f, -2.f, 1.9f}));
    // bound 2, bins of width 0.25: 0 -> 0, 0.5 -> 2, 1 -> 4, 1.9 -> 7, 2 (the edge) -> 7
    EXPECT_EQ(s.bound(), 2.0);
    EXPECT_EQ(s.min(), -2.0);
    EXPECT_FLOAT_EQ(s.max(), 1.9f);
    EXPECT_EQ(s.count(), 6u);
    EXPECT_EQ(s.positive_counts(), (std::vector<std::uint64_t>{1, 0, 1, 0, 1, 0, 0, 1}));
    EXPECT_EQ(s.negative_counts(), (std::vector<std::uint64_t>{0, 0, 1, 0, 0, 0, 0, 1}));
}

TEST(activation_statistics, doubles_the_bound_and_merges_bins_when_values_grow) {
    activation_statistics s(8);
    s.add(floats({0.1f, 0.3f, 0.6f, 1.f}));  // bound 1: bins 0, 2, 4, 7
    s.add(floats({3.5f, -0.2f}));            // bound 4 (two doublings): width 0.5
    EXPECT_EQ(s.bound(), 4.0);
    // Old bins b merge into b / 4: {0, 2} -> 0, 4 -> 1, 7 -> 1; then 3.5 -> 7, -0.2 -> negative 0.
    EXPECT_EQ(s.positive_counts(), (std::vector<std::uint64_t>{2, 2, 0, 0, 0, 0, 0, 1}));
    EXPECT_EQ(s.negative_counts(), (std::vector<std::uint64_t>{1, 0, 0, 0, 0, 0, 0, 0}));
    EXPECT_EQ(total(s.positive_counts()) + total(s.negative_counts()), s.count());
}

TEST(activation_statistics, zeros_first_then_values_keeps_the_zeros_in_bin_zero) {
    activation_statistics s(4);
    s.add(floats({0.f, 0.f}));
    EXPECT_EQ(s.bound(), 0.0);
    s.add(floats({1.f}));
    EXPECT_EQ(s.positive_counts(), (std::vector<std::uint64_t>{2, 0, 0, 1}));
}

TEST(activation_statistics, rejects_non_finite_values) {
    activation_statistics s;
    EXPECT_THROW(s.add(floats({1.f, std::nanf("")})), error);
    EXPECT_THROW(s.add(floats({INFINITY})), error);
}

TEST(activation_statistics, max_range_is_the_extremes_seen) {
    activation_statistics s;
    s.add(floats({-1.5f, 2.f}));
    s.add(floats({0.25f, 3.f}));
    auto [lo, hi] = s.range(calibration_method::max);
    EXPECT_EQ(lo, -1.5);
    EXPECT_EQ(hi, 3.0);
}

TEST(activation_statistics, percentile_cuts_each_tail_at_a_bin_edge) {
    // 1000 values 0.001 .. 1.000 and one outlier 10: bound 10 over 1024 bins.
    // percentile 99 cuts 0.5% of 1001 = 5.005 values from each tail: the
    // outlier and the 4 largest of the rest stay cut, the 5th largest (0.996)
    // is not, so the cut is the upper edge of 0.996's bin.
    activation_statistics s(1024);
    std::vector<float> v;
    for (int i = 1; i <= 1000; ++i) v.push_back(static_cast<float>(i) / 1000.f);
    v.push_back(10.f);
    s.add(floats(v));
    const double width = 10.0 / 1024;
    const double edge = (std::floor(0.996f * 1024 / 10.0) + 1) * width;
    auto [lo, hi] = s.range(calibration_method::percentile, 99.0);
    EXPECT_EQ(lo, 0.001f);  // no negative values: the minimum
    EXPECT_DOUBLE_EQ(hi, edge);
    EXPECT_THROW(s.range(calibration_method::percentile, 40.0), error);
}

TEST(entropy_clip_bins, keeps_every_bin_of_a_uniform_histogram) {
    // Unclipped, P and Q are both uniform: divergence 0; any clip piles the
    // tail into one bin that Q spreads out, so it diverges.
    std::vector<std::uint64_t> h(1024, 100);
    EXPECT_EQ(entropy_clip_bins(h, 128), 1024u);
}

TEST(entropy_clip_bins, clips_a_lone_far_outlier) {
    // 10000 values spread over the first 256 bins and one at the far end:
    // keeping the outlier's bin makes 128 levels 8 bins wide, blurring the
    // bulk; clipping near 256 keeps it at 2 bins a level.
    std::vector<std::uint64_t> h(2048, 0);
    for (std::size_t b = 0; b < 256; ++b) h[b] = 1000 - 3 * b;
    h[2047] = 1;
    const std::size_t clip = entropy_clip_bins(h, 128);
    EXPECT_GE(clip, 200u);
    EXPECT_LE(clip, 300u);
}

TEST(mse_clip_bins, keeps_nearly_all_of_a_uniform_histogram) {
    // Clipping a uniform histogram by d bins costs about d^3 / 3 per bin's
    // count and saves about 2 d b / (12 * 255^2) of rounding per value: the
    // best clip is b / 510, 2 of 1024 bins.
    std::vector<std::uint64_t> h(1024, 100);
    const auto [a, b] = mse_clip_bins({}, h, 255);
    EXPECT_EQ(a, 0u);
    EXPECT_GE(b, 1018u);
    EXPECT_LE(b, 1024u);
}

TEST(mse_clip_bins, weighs_a_far_outlier_against_the_bulk_it_coarsens) {
    // N = 1,024,000 values in the first 256 bins and one at bin 2047. With
    // the end at b >= 256 the error is N (b / 255)^2 / 12 + (2047.5 - b)^2,
    // least at b = 2047.5 / (1 + N / (12 * 255^2)) = 885.5: the outlier is
    // clipped, but not to the bulk (one value's square outweighs much rounding).
    std::vector<std::uint64_t> h(2048, 0);
    for (std::size_t b = 0; b < 256; ++b) h[b] = 4000;
    h[2047] = 1;
    const auto [a, b] = mse_clip_bins({}, h, 255);
    EXPECT_EQ(a, 0u);
    EXPECT_GE(b, 840u);
    EXPECT_LE(b, 930u);
}

TEST(mse_clip_bins, shares_the_steps_between_two_unequal_sides) {
    // 100 bins of values below 0 and 1000 above: the range covers both
    // (clipping either loses far more than the steps it saves).
    std::vector<std::uint64_t> negative(2048, 0), positive(2048, 0);
    for (std::size_t b = 0; b < 100; ++b) negative[b] = 50;
    for (std::size_t b = 0; b < 1000; ++b) positive[b] = 50;
    const auto [a, b] = mse_clip_bins(negative, positive, 255);
    EXPECT_GE(a, 97u);
    EXPECT_LE(a, 100u);
    EXPECT_GE(b, 990u);
    EXPECT_LE(b, 1000u);
}

TEST(activation_statistics, exact_zeros_move_neither_the_entropy_nor_the_mse_range) {
    // A ReLU's output: half exact zeros. Before they were left out, the
    // entropy search clipped at its smallest candidate, an eighth of the bins.
    std::vector<float> positive;
    for (int i = 0; i < 4000; ++i) positive.push_back(std::exp(static_cast<float>(i % 400 + 1) / 100.f) - 1.f);
    std::vector<float> with_zeros = positive;
    with_zeros.insert(with_zeros.end(), 4000, 0.f);
    activation_statistics plain, relu;
    plain.add(floats(positive));
    relu.add(floats(with_zeros));
    EXPECT_EQ(relu.zeros(), 4000u);
    for (auto method : {calibration_method::entropy, calibration_method::mse}) {
        EXPECT_EQ(relu.range(method).second, plain.range(method).second) << to_string(method);
        EXPECT_GT(relu.range(method).second, 0.25 * relu.max()) << to_string(method);
    }
}

TEST(activation_statistics, channel_means_average_each_index_of_the_tracked_axis) {
    activation_statistics s;
    s.track_channel_means(1);
    // [2, 3]: channel means (1 + 4) / 2, (2 + 5) / 2, (3 + 6) / 2, then a second sample.
    s.add(make_argument(float_shape({2, 3}), std::vector<float>{1, 2, 3, 4, 5, 6}));
    s.add(make_argument(float_shape({1, 3}), std::vector<float>{-2.5f, 0, 1.5f}));
    EXPECT_EQ(s.channel_means(), (std::vector<double>{2.5 / 3, 7.0 / 3, 10.5 / 3}));
    EXPECT_THROW(s.add(make_argument(float_shape({1, 2}), std::vector<float>{1, 2})), error);
}

TEST(choose_activation_quantization, maps_the_range_with_zero_onto_int8) {
    quantization_scheme int8;
    // [-1, 3]: scale 4 / 255, zero point round(-128 + 1 / (4 / 255)) = round(-64.25) = -64
    auto q = choose_activation_quantization(-1, 3, int8);
    EXPECT_FLOAT_EQ(q.scale, 4.0f / 255);
    EXPECT_EQ(q.zero_point, -64);
    // [0.5, 2] widens to [0, 2]: zero point -128
    q = choose_activation_quantization(0.5, 2, int8);
    EXPECT_FLOAT_EQ(q.scale, 2.0f / 255);
    EXPECT_EQ(q.zero_point, -128);
    // Only zeros seen: any scale is exact.
    q = choose_activation_quantization(0, 0, int8);
    EXPECT_EQ(q.scale, 1.0f);
    EXPECT_EQ(q.zero_point, 0);
}

TEST(choose_activation_quantization, maps_a_non_negative_range_onto_uint8_when_asked) {
    quantization_scheme u8;
    u8.unsigned_nonnegative_activations = true;
    // [0.5, 2] widens to [0, 2]: uint8, scale 2 / 255 (int8's levels), zero point 0
    auto q = choose_activation_quantization(0.5, 2, u8);
    EXPECT_EQ(q.type, dtype::uint8_type);
    EXPECT_FLOAT_EQ(q.scale, 2.0f / 255);
    EXPECT_EQ(q.zero_point, 0);
    // A value below 0 keeps int8: [-1, 3] as in the int8 test above.
    q = choose_activation_quantization(-1, 3, u8);
    EXPECT_EQ(q.type, dtype::int8_type);
    EXPECT_EQ(q.zero_point, -64);
    // A use that cannot take uint8: int8 with zero point -128.
    q = choose_activation_quantization(0.5, 2, u8, false);
    EXPECT_EQ(q.type, dtype::int8_type);
    EXPECT_EQ(q.zero_point, -128);
    // Only zeros seen: uint8, any scale, zero point 0.
    q = choose_activation_quantization(0, 0, u8);
    EXPECT_EQ(q.type, dtype::uint8_type);
    EXPECT_EQ(q.zero_point, 0);
    // Off by default; float8 (no zero point) is unaffected.
    EXPECT_EQ(choose_activation_quantization(0.5, 2, quantization_scheme{}).type, dtype::int8_type);
    quantization_scheme fp8 = u8;
    fp8.type = dtype::fp8e4m3fn_type;
    fp8.activation_zero_point = false;
    fp8.activation_limit = 448;
    q = choose_activation_quantization(0.5, 2, fp8);
    EXPECT_EQ(q.type, dtype::fp8e4m3fn_type);
    EXPECT_FLOAT_EQ(q.scale, 2.0f / 448);
}

TEST(choose_weight_scales, one_symmetric_scale_per_channel) {
    // [2, 3]: along axis 0 the channels are rows, along axis 1 columns.
    argument w = make_argument(float_shape({2, 3}), {1, -4, 2, 0, 0, 0});
    EXPECT_EQ(choose_weight_scales(w, 0, 127), (std::vector<float>{4.0f / 127, 1.0f}));
    EXPECT_EQ(choose_weight_scales(w, 1, 127), (std::vector<float>{1.0f / 127, 4.0f / 127, 2.0f / 127}));
    EXPECT_EQ(choose_weight_scales(w, -1, 127), (std::vector<float>{4.0f / 127}));
}

namespace {

// x [2, 4] feeds dot(x, w) and convolution-free dot(x, w2); w2 is transposed from a literal.
struct two_dot_module {
    module m;
    instruction_ref x, w, wt, dot1, dot2;
    two_dot_module() {
        x = m.add_parameter("x", float_shape({2, 4}));
        w = add_random_literal(m, {4, 3}, 1);
        auto base = add_random_literal(m, {5, 4}, 2);
        wt = m.add_instruction(make_op("transpose", value_map{{"permutation", ints({1, 0})}}), {base});
        dot1 = m.add_instruction(make_op("dot"), {x, w});
        dot2 = m.add_instruction(make_op("dot"), {x, wt});
        m.add_return({dot1, dot2});
    }
};

}  // namespace

TEST(plan_quantized_values, shares_one_activation_and_finds_constant_weights) {
    two_dot_module t;
    auto planned = plan_quantized_values(t.m, {"dot", "convolution"}, {}, {"dot", "convolution"}, "test");
    ASSERT_EQ(planned.size(), 3u);
    EXPECT_EQ(planned[0].value, t.x);
    EXPECT_FALSE(planned[0].is_weight);
    EXPECT_EQ(planned[0].uses.size(), 2u);  // both dots read x through one pair
    EXPECT_EQ(planned[1].value, t.w);
    EXPECT_TRUE(planned[1].is_weight);
    EXPECT_EQ(planned[1].channel_axis, 1);  // dot's output columns
    EXPECT_EQ(planned[2].value, t.wt);      // a constant expression is a weight too
    EXPECT_TRUE(planned[2].is_weight);
}

TEST(accepts_unsigned_codes, all_but_the_second_operand_of_an_activation_dot) {
    module m;
    auto a = m.add_parameter("a", float_shape({2, 4}));
    auto b = m.add_parameter("b", float_shape({4, 3}));
    m.add_return({m.add_instruction(make_op("dot"), {a, b})});
    auto planned = plan_quantized_values(m, {"dot"}, {}, {"dot", "convolution"}, "test");
    ASSERT_EQ(planned.size(), 2u);
    EXPECT_EQ(planned[0].value, a);
    EXPECT_TRUE(accepts_unsigned_codes(planned[0]));   // a dot's source: u8 x s8
    EXPECT_EQ(planned[1].value, b);
    EXPECT_FALSE(accepts_unsigned_codes(planned[1]));  // oneDNN wants s8 "weights"
}

TEST(plan_quantized_values, leaves_excluded_and_unchosen_instructions_alone) {
    two_dot_module t;
    auto names = t.m.instruction_names();
    auto planned = plan_quantized_values(t.m, {"all"}, {names.at(&*t.dot1)}, {"dot", "convolution"}, "test");
    ASSERT_EQ(planned.size(), 2u);
    EXPECT_EQ(planned[0].uses.size(), 1u);
    EXPECT_EQ(planned[0].uses[0].first, t.dot2);
    EXPECT_TRUE(plan_quantized_values(t.m, {"convolution"}, {}, {"dot", "convolution"}, "test").empty());
}

TEST(plan_quantized_values, rejects_unknown_op_and_exclude_names) {
    two_dot_module t;
    EXPECT_THROW(plan_quantized_values(t.m, {"relu"}, {}, {"dot", "convolution"}, "test"), error);
    EXPECT_THROW(plan_quantized_values(t.m, {"dot"}, {"@99"}, {"dot", "convolution"}, "test"), error);
}

TEST(insert_qdq, rewrites_the_chosen_inputs_into_qdq_pairs) {
    two_dot_module t;
    quantization_scheme int8;
    auto planned = plan_quantized_values(t.m, {"dot"}, {}, {"dot", "convolution"}, "test");
    for (const auto& v : planned) {
        if (v.is_weight)
            insert_weight_qdq(t.m, v, int8);
        else
            insert_activation_qdq(t.m, v, activation_quantization{0.5f, -3}, int8);
    }
    verify_module(t.m);
    EXPECT_EQ(count_ops(t.m, "quantize_linear"), 3u) << t.m;
    EXPECT_EQ(count_ops(t.m, "dequantize_linear"), 3u) << t.m;
    for (auto dot : {t.dot1, t.dot2}) {
        for (const auto& in : dot->inputs()) {
            ASSERT_EQ(in->name(), "dequantize_linear") << t.m;
            auto q = in->inputs()[0];
            EXPECT_EQ(q->name(), "quantize_linear");
            EXPECT_EQ(q->get_shape().type(), dtype::int8_type);
            EXPECT_EQ(q->inputs()[1], in->inputs()[1]);  // one scale for both
        }
    }
    // Activation: scalar scale and int8 zero point; weight: a scale per output column, no zero point.
    auto x_dq = t.dot1->inputs()[0];
    ASSERT_EQ(x_dq->inputs().size(), 3u);
    EXPECT_EQ(x_dq->inputs()[2]->get_shape().type(), dtype::int8_type);
    EXPECT_EQ(x_dq->inputs()[2]->get_literal().get_argument().value_at(0), -3);
    EXPECT_EQ(x_dq->inputs()[1]->get_literal().get_argument().value_at(0), 0.5);
    auto w_dq = t.dot1->inputs()[1];
    ASSERT_EQ(w_dq->inputs().size(), 2u);
    EXPECT_EQ(w_dq->inputs()[1]->get_shape().lens(), std::vector<std::size_t>{3});
    const value attributes = w_dq->get_operator().attributes();
    ASSERT_NE(attributes.find("axis"), nullptr);
    EXPECT_EQ(attributes.find("axis")->as_int(), 1);
}

namespace {

// y = x @ w with x [2, 3] and a constant w [3, 2].
program dot_program() {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({2, 3}));
    auto w = add_float_literal(m, {3, 2}, {1, -2, 0.5, 0, 0.25, 1});
    m.add_return({m.add_instruction(make_op("dot"), {x, w})});
    return p;
}

parameter_map x_sample(const std::vector<float>& values) {
    return {{"x", make_argument(float_shape({2, 3}), values)}};
}

// The literal feeding input `input` of the instruction feeding input `of` of the first `op`.
double literal_at(const module& m, const std::string& op, std::size_t of, std::size_t input) {
    for (const auto& ins : m)
        if (ins.name() == op) return ins.inputs()[of]->inputs()[input]->get_literal().get_argument().value_at(0);
    ADD_FAILURE() << "no " << op << " in\n" << m;
    return 0;
}

}  // namespace

TEST(quantize_int8, scales_come_from_every_calibration_sample) {
    program p = dot_program();
    std::vector<std::pair<std::size_t, std::size_t>> progress;
    quantize_int8_options options;
    options.progress = [&](std::size_t done, std::size_t total) { progress.emplace_back(done, total); };
    quantize_int8(p, get_target("ref"), {x_sample({0, 1, 2, 3, 4, 5}), x_sample({-3, 0, 0, 0, 0, 1})}, options);
    const module& m = *p.get_main_module();
    // x over both samples: [-3, 5] -> scale 8 / 255, int8 zero point round(-128 + 3 * 255 / 8) = round(-32.375)
    // = -32; x is only a dot's source, so uint8 with that zero point plus 128 (the same levels)
    EXPECT_FLOAT_EQ(literal_at(m, "dot", 0, 1), 8.0 / 255);
    EXPECT_EQ(literal_at(m, "dot", 0, 2), 96);
    // w per column: max |w| = 1 and 2 -> 1 / 127, 2 / 127
    for (const auto& ins : m)
        if (ins.name() == "dot") {
            argument scales = ins.inputs()[1]->inputs()[1]->get_literal().get_argument();
            EXPECT_FLOAT_EQ(scales.value_at(0), 1.0 / 127);
            EXPECT_FLOAT_EQ(scales.value_at(1), 2.0 / 127);
        }
    EXPECT_EQ(progress, (std::vector<std::pair<std::size_t, std::size_t>>{{1, 2}, {2, 2}}));
}

TEST(quantize_int8, a_signed_product_source_is_uint8_unless_unsigned_activations_is_off) {
    for (bool unsigned_activations : {true, false}) {
        program p = dot_program();
        quantize_int8_options options;
        options.unsigned_activations = unsigned_activations;
        quantize_int8(p, get_target("ref"), {x_sample({0, 1, 2, 3, 4, 5}), x_sample({-3, 0, 0, 0, 0, 1})}, options);
        const module& m = *p.get_main_module();
        for (const auto& ins : m)
            if (ins.name() == "dot") {
                const auto& zero_point = ins.inputs()[0]->inputs()[2]->get_shape();
                EXPECT_EQ(zero_point.type(), unsigned_activations ? dtype::uint8_type : dtype::int8_type);
            }
        EXPECT_FLOAT_EQ(literal_at(m, "dot", 0, 1), 8.0 / 255);
        EXPECT_EQ(literal_at(m, "dot", 0, 2), unsigned_activations ? 96 : -32);
    }
}

TEST(choose_activation_quantization, a_signed_range_of_a_product_source_shifts_onto_uint8) {
    quantization_scheme u8;
    u8.unsigned_nonnegative_activations = true;
    const auto s = choose_activation_quantization(-1, 3, u8, true, false);
    const auto u = choose_activation_quantization(-1, 3, u8, true, true);
    EXPECT_EQ(s.type, dtype::int8_type);
    EXPECT_EQ(u.type, dtype::uint8_type);
    EXPECT_FLOAT_EQ(u.scale, s.scale);  // the same levels
    EXPECT_EQ(u.zero_point, s.zero_point + 128);
    // a use that wants int8 (the second operand of an activation dot) keeps it
    EXPECT_EQ(choose_activation_quantization(-1, 3, u8, false, true).type, dtype::int8_type);
    // without unsigned activations (S8S8) nothing moves
    EXPECT_EQ(choose_activation_quantization(-1, 3, quantization_scheme{}, true, true).type, dtype::int8_type);
}

TEST(reads_only_as_product_source, only_first_inputs_of_dots) {
    module m;
    auto a = m.add_parameter("a", float_shape({2, 4}));
    auto b = m.add_parameter("b", float_shape({4, 3}));
    auto c = m.add_parameter("c", float_shape({3, 2}));
    auto ab = m.add_instruction(make_op("dot"), {a, b});
    m.add_return({m.add_instruction(make_op("dot"), {ab, c})});
    auto planned = plan_quantized_values(m, {"dot"}, {}, {"dot", "convolution"}, "test");
    ASSERT_EQ(planned.size(), 4u);
    EXPECT_TRUE(reads_only_as_product_source(planned[0]));   // a
    EXPECT_FALSE(reads_only_as_product_source(planned[1]));  // b: the second operand
    EXPECT_TRUE(reads_only_as_product_source(planned[2]));   // a @ b
    EXPECT_FALSE(reads_only_as_product_source(planned[3]));  // c
}

TEST(quantize_int8, refuses_an_empty_calibration_set_and_bad_samples) {
    program p = dot_program();
    const std::string before = to_string(p);
    auto message_of = [&](const std::vector<parameter_map>& calibration) {
        try {
            quantize_int8(p, get_target("ref"), calibration);
        } catch (const error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(message_of({}).find("calibration set is empty"), std::string::npos);
    const std::string wrong =
        message_of({x_sample({0, 0, 0, 0, 0, 0}), {{"x", make_argument(float_shape({3, 2}), {0, 0, 0, 0, 0, 0})}}});
    EXPECT_NE(wrong.find("calibration sample 1"), std::string::npos) << wrong;
    EXPECT_NE(wrong.find("'x'"), std::string::npos) << wrong;
    EXPECT_NE(message_of({parameter_map{}}).find("calibration sample 0"), std::string::npos);
    EXPECT_EQ(to_string(p), before);
}
