// fuse_concat_pointwise (src/targets/cpu/passes): a concat read once by one
// elementwise op or fused_pointwise, and by nothing else, becomes part of a
// fused_concat_pointwise when the cpu kernel for it can run it.
#include "pass_test_helpers.hpp"
#include "targets/cpu/passes/cpu_passes.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

instruction_ref concat(module& m, std::vector<instruction_ref> pieces, std::int64_t axis = 1) {
    return m.add_instruction(make_op("concat", value_map{{"axis", axis}}), std::move(pieces));
}

const instruction& only(const module& m, const std::string& op) {
    const instruction* found = nullptr;
    for (const auto& ins : m)
        if (ins.name() == op) {
            if (found != nullptr) throw std::runtime_error("more than one " + op);
            found = &ins;
        }
    if (found == nullptr) throw std::runtime_error("no " + op + " in the module");
    return *found;
}

std::string attribute(const instruction& ins, const std::string& name) {
    return to_string(*ins.get_operator().attributes().find(name));
}

}  // namespace

TEST(pass_fuse_concat_pointwise, relu_of_a_concat_becomes_one_op) {
    module m;
    auto a = m.add_parameter("a", float_shape({2, 3, 4, 4}));
    auto b = m.add_parameter("b", float_shape({2, 5, 4, 4}));
    m.add_return({m.add_instruction(make_op("relu"), {concat(m, {a, b})})});

    module out = after_pass<fuse_concat_pointwise>(m);
    EXPECT_EQ(to_string(out),
              "module: \"main\"\n"
              "a = @param:a -> float_type, {2, 3, 4, 4}, {48, 16, 4, 1}\n"
              "b = @param:b -> float_type, {2, 5, 4, 4}, {80, 16, 4, 1}\n"
              "@2 = fused_concat_pointwise[axis=1,pieces=2,steps={{\"relu\", {0}}},output_type=\"float_type\","
              "output_scale=1,output_zero_point=0,channels_last=false,piece_scales={},piece_zero_points={}](a,b) -> float_type, "
              "{2, 8, 4, 4}, {128, 16, 4, 1}\n"
              "@3 = @return(@2)\n");
    expect_same_outputs(m, out);
}

// A program reading an operand before the concat (the scale, input 0) and
// one after it (the shift, input 2): the concat becomes value 0, the scale
// value 1 and the shift value 2, after the concat's three pieces.
TEST(pass_fuse_concat_pointwise, operands_around_the_concat_keep_their_values) {
    module m;
    auto scale = m.add_parameter("scale", float_shape({1, 9, 1, 1}));
    auto a = m.add_parameter("a", float_shape({1, 2, 3, 3}));
    auto b = m.add_parameter("b", float_shape({1, 3, 3, 3}));
    auto c = m.add_parameter("c", float_shape({1, 4, 3, 3}));
    auto shift = add_random_literal(m, {9, 1, 1}, 5);
    auto joined = concat(m, {a, b, c});
    auto scaled = m.add_instruction(make_op("mul"), {scale, joined});
    auto shifted = m.add_instruction(make_op("sub"), {scaled, shift});
    m.add_return({m.add_instruction(make_op("relu"), {shifted})});

    module out = after_passes(m, {std::make_shared<fuse_pointwise>(), std::make_shared<fuse_concat_pointwise>()});
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"fused_concat_pointwise"})) << out;
    const auto& fused = only(out, "fused_concat_pointwise");
    EXPECT_EQ(attribute(fused, "pieces"), "3");
    ASSERT_EQ(fused.inputs().size(), 5u);
    EXPECT_EQ(fused.inputs()[0]->get_shape().lens()[1], 2u);
    EXPECT_EQ(fused.inputs()[3]->get_shape().lens()[1], 9u);  // scale
    EXPECT_TRUE(fused.inputs()[4]->is_literal());              // shift
    expect_same_outputs(m, out, 1e-6);
}

// A concat another instruction also reads is stored anyway: nothing to fuse.
TEST(pass_fuse_concat_pointwise, leaves_a_concat_with_other_users) {
    module m;
    auto a = m.add_parameter("a", float_shape({1, 4, 3, 3}));
    auto b = m.add_parameter("b", float_shape({1, 4, 3, 3}));
    auto joined = concat(m, {a, b});
    m.add_return({m.add_instruction(make_op("relu"), {joined}), joined});

    module out = after_pass<fuse_concat_pointwise>(m);
    EXPECT_EQ(to_string(out), to_string(m));
}

// The concat read twice by the same add.
TEST(pass_fuse_concat_pointwise, leaves_a_concat_read_twice_by_one_op) {
    module m;
    auto a = m.add_parameter("a", float_shape({1, 4, 3, 3}));
    auto b = m.add_parameter("b", float_shape({1, 4, 3, 3}));
    auto joined = concat(m, {a, b});
    m.add_return({m.add_instruction(make_op("add"), {joined, joined})});

    module out = after_pass<fuse_concat_pointwise>(m);
    EXPECT_EQ(to_string(out), to_string(m));
}

// A concat smaller than the result (it broadcasts into it) is no part of it.
TEST(pass_fuse_concat_pointwise, leaves_a_concat_that_broadcasts) {
    module m;
    auto x = m.add_parameter("x", float_shape({1, 8, 3, 3}));
    auto a = m.add_parameter("a", float_shape({1, 3, 1, 1}));
    auto b = m.add_parameter("b", float_shape({1, 5, 1, 1}));
    m.add_return({m.add_instruction(make_op("add"), {x, concat(m, {a, b})})});

    module out = after_pass<fuse_concat_pointwise>(m);
    EXPECT_EQ(to_string(out), to_string(m));
}

// The cpu kernel runs float32 only: an int32 concat + add stays.
TEST(pass_fuse_concat_pointwise, leaves_what_the_kernel_cannot_run) {
    module m;
    const shape piece{dtype::int32_type, {2, 3}};
    auto a = m.add_parameter("a", piece);
    auto b = m.add_parameter("b", piece);
    auto joined = concat(m, {a, b}, 0);
    m.add_return({m.add_instruction(make_op("add"), {joined, m.add_parameter("c", shape{dtype::int32_type, {4, 3}})})});

    module out = after_pass<fuse_concat_pointwise>(m);
    EXPECT_EQ(to_string(out), to_string(m));
}

// Parameters and literals only, no concat.
TEST(pass_fuse_concat_pointwise, leaves_a_module_of_a_parameter_and_a_literal_alone) {
    module m;
    auto x = m.add_parameter("x", float_shape({2, 3}));
    auto c = add_float_literal(m, {2, 3}, {1, 2, 3, 4, 5, 6});
    m.add_return({m.add_instruction(make_op("mul"), {x, c}), c});

    module out = after_pass<fuse_concat_pointwise>(m);
    EXPECT_EQ(to_string(out), to_string(m));
}

// A concat along the last axis, and one along the first.
TEST(pass_fuse_concat_pointwise, other_axes) {
    for (std::int64_t axis : {0, -1}) {
        module m;
        auto a = m.add_parameter("a", float_shape({3, 5}));
        auto b = m.add_parameter("b", float_shape({3, 5}));
        m.add_return({m.add_instruction(make_op("sigmoid"), {concat(m, {a, b}, axis)})});
        module out = after_pass<fuse_concat_pointwise>(m);
        EXPECT_EQ(op_names(out), (std::vector<std::string>{"fused_concat_pointwise"})) << out;
        EXPECT_EQ(only(out, "fused_concat_pointwise").get_shape().lens(),
                  (axis == 0 ? std::vector<std::size_t>{6, 5} : std::vector<std::size_t>{3, 10}));
        expect_same_outputs(m, out, 1e-6);
    }
}

// DenseNet's pattern through the whole cpu pipeline: each layer's batch norm
// (scale and shift) + relu over the concatenated features.
TEST(pass_fuse_concat_pointwise, cpu_pipeline_matches_ref_on_a_dense_block) {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({1, 8, 6, 6}));
    std::vector<instruction_ref> features{x};
    std::size_t channels = 8;
    for (unsigned long layer = 0; layer < 3; ++layer) {
        auto joined = features.size() == 1 ? x : concat(m, features);
        auto scaled = m.add_instruction(make_op("mul"), {joined, add_random_literal(m, {channels, 1, 1}, 10 + layer)});
        auto shifted = m.add_instruction(make_op("add"), {scaled, add_random_literal(m, {channels, 1, 1}, 20 + layer)});
        auto act = m.add_instruction(make_op("relu"), {shifted});
        auto w = add_random_literal(m, {8, channels, 3, 3}, 30 + layer);
        features.push_back(m.add_instruction(make_op("convolution", value_map{{"padding", ints({1, 1})}}), {act, w}));
        channels += 8;
    }
    m.add_return({concat(m, features)});
    expect_cpu_matches_ref(p, 1e-4);
}

namespace {

// quantize_linear(x, scale, zero point) with scalar constant parameters.
instruction_ref quantize(module& m, instruction_ref x, float scale, std::int8_t zero_point) {
    auto s = m.add_literal(literal(shape{dtype::float_type, {}}, std::vector<float>{scale}));
    auto z = m.add_literal(literal(shape{dtype::int8_type, {}}, std::vector<std::int8_t>{zero_point}));
    return m.add_instruction(make_op("quantize_linear"), {x, s, z});
}

}  // namespace

// int8 DenseNet: the batch norm + ReLU over the concatenation is quantized
// for the next convolution; the quantize joins the fused op, whose int8
// result equals quantize_linear's codes bit for bit (ref evaluates both).
TEST(pass_fuse_concat_pointwise, a_lone_quantize_joins_as_the_quantized_result) {
    module m;
    auto a = m.add_parameter("a", float_shape({1, 3, 5, 5}));
    auto b = m.add_parameter("b", float_shape({1, 5, 5, 5}));
    auto scaled = m.add_instruction(make_op("mul"), {concat(m, {a, b}), add_random_literal(m, {8, 1, 1}, 3)});
    auto act = m.add_instruction(make_op("relu"), {scaled});
    m.add_return({quantize(m, act, 0.0125f, -7)});

    module out = after_passes(m, {std::make_shared<fuse_pointwise>(), std::make_shared<fuse_concat_pointwise>()});
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"fused_concat_pointwise"})) << out;
    const auto& fused = only(out, "fused_concat_pointwise");
    EXPECT_EQ(attribute(fused, "output_type"), "\"int8_type\"");
    EXPECT_EQ(attribute(fused, "output_zero_point"), "-7");
    // The program returns it: standard layout.
    EXPECT_EQ(fused.get_shape(), (shape{dtype::int8_type, {1, 8, 5, 5}}));
    expect_same_outputs(m, out);
}

// Read by another op (a transpose here, as an int8 convolution would read
// it), the codes are written channels-last.
TEST(pass_fuse_concat_pointwise, quantized_codes_read_by_an_op_are_channels_last) {
    module m;
    auto a = m.add_parameter("a", float_shape({2, 3, 4, 6}));
    auto b = m.add_parameter("b", float_shape({2, 5, 4, 6}));
    auto act = m.add_instruction(make_op("relu"), {concat(m, {a, b})});
    auto codes = quantize(m, act, 0.02f, 4);
    m.add_return({m.add_instruction(make_op("convert", value_map{{"target_type", "int32_type"}}), {codes})});

    module out = after_pass<fuse_concat_pointwise>(m);
    const auto& fused = only(out, "fused_concat_pointwise");
    EXPECT_EQ(attribute(fused, "channels_last"), "true") << out;
    EXPECT_EQ(fused.get_shape().strides(), (std::vector<std::size_t>{192, 1, 48, 8}));
    expect_same_outputs(m, out);
}

// A per-channel quantize, or a fused op something else reads too, stays apart.
TEST(pass_fuse_concat_pointwise, leaves_a_per_channel_quantize_and_a_shared_result) {
    for (bool per_channel : {true, false}) {
        module m;
        auto a = m.add_parameter("a", float_shape({1, 2, 3, 3}));
        auto b = m.add_parameter("b", float_shape({1, 2, 3, 3}));
        auto act = m.add_instruction(make_op("relu"), {concat(m, {a, b})});
        if (per_channel) {
            auto s = add_float_literal(m, {4}, {0.1f, 0.2f, 0.3f, 0.4f});
            auto z = m.add_literal(literal(shape{dtype::int8_type, {4}}, std::vector<std::int8_t>{0, 1, 2, 3}));
            m.add_return({m.add_instruction(make_op("quantize_linear", value_map{{"axis", 1}}), {act, s, z})});
        } else {
            m.add_return({quantize(m, act, 0.05f, 0), act});
        }
        module out = after_pass<fuse_concat_pointwise>(m);
        EXPECT_EQ(count_ops(out, "quantize_linear"), 1u) << out;
        EXPECT_EQ(count_ops(out, "fused_concat_pointwise"), 1u) << out;
        expect_same_outputs(m, out);
    }
}

// The quantized form on the cpu kernel against ref on the unfused graph,
// with values that round halfway and saturate at both ends.
TEST(pass_fuse_concat_pointwise, cpu_quantized_result_matches_ref) {
    program p;
    module& m = *p.get_main_module();
    auto a = m.add_parameter("a", float_shape({2, 16, 7, 9}));
    auto b = m.add_parameter("b", float_shape({2, 40, 7, 9}));
    auto scaled = m.add_instruction(make_op("mul"), {concat(m, {a, b}), add_random_literal(m, {56, 1, 1}, 5)});
    auto shifted = m.add_instruction(make_op("add"), {scaled, add_random_literal(m, {56, 1, 1}, 6)});
    m.add_return({quantize(m, shifted, 0.004f, 3)});
    expect_cpu_matches_ref(p, 0);
}

namespace {

// Batch norm + ReLU of a feature map x (per-channel scale and shift
// literals), quantized per tensor, read by a convert as an int8 convolution
// would read the codes.
void quantized_batch_norm(module& m, const shape& x_shape, bool second_feature_map, bool per_channel,
                          bool float_reader) {
    const std::size_t channels = x_shape.lens()[1];
    auto x = m.add_parameter("x", x_shape);
    auto scaled = m.add_instruction(make_op("mul"), {x, add_random_literal(m, {channels, 1, 1}, 7)});
    if (second_feature_map) scaled = m.add_instruction(make_op("add"), {scaled, m.add_parameter("y", x_shape)});
    auto act = m.add_instruction(
        make_op("relu"), {m.add_instruction(make_op("add"), {scaled, add_random_literal(m, {channels, 1, 1}, 8)})});
    instruction_ref codes;
    if (per_channel) {
        auto s = add_float_literal(m, {channels}, std::vector<float>(channels, 0.02f));
        auto z = m.add_literal(literal(shape{dtype::int8_type, {channels}}, std::vector<std::int8_t>(channels, 3)));
        codes = m.add_instruction(make_op("quantize_linear", value_map{{"axis", 1}}), {act, s, z});
    } else {
        codes = quantize(m, act, 0.02f, 3);
    }
    std::vector<instruction_ref> results{
        m.add_instruction(make_op("convert", value_map{{"target_type", "int32_type"}}), {codes})};
    if (float_reader) results.push_back(act);
    m.add_return(results);
}

}  // namespace

// DenseNet's transitions: the batch norm + ReLU of one feature map (no
// concat) quantized for the next convolution becomes a one-piece fused op
// that writes the codes channels-last in one pass.
TEST(pass_fuse_concat_pointwise, a_quantized_program_over_one_feature_map_writes_channels_last_codes) {
    module m;
    quantized_batch_norm(m, float_shape({2, 24, 5, 6}), false, false, false);
    module out = after_passes(m, {std::make_shared<fuse_pointwise>(), std::make_shared<fuse_concat_pointwise>()});
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"fused_concat_pointwise", "convert"})) << out;
    const auto& fused = only(out, "fused_concat_pointwise");
    EXPECT_EQ(attribute(fused, "pieces"), "1");
    EXPECT_EQ(attribute(fused, "channels_last"), "true");
    EXPECT_EQ(attribute(fused, "output_type"), "\"int8_type\"");
    EXPECT_EQ(fused.get_shape().strides(), (std::vector<std::size_t>{720, 1, 144, 24}));
    EXPECT_EQ(fused.inputs().front()->name(), "@param");
    expect_same_outputs(m, out);
}

// Two feature maps in the program, a float reader besides the quantize, or
// a per-channel quantize: the program and the quantize stay as they were.
TEST(pass_fuse_concat_pointwise, leaves_other_quantized_programs) {
    for (const auto& [second_map, per_channel, float_reader] :
         {std::tuple{true, false, false}, std::tuple{false, true, false}, std::tuple{false, false, true}}) {
        module m;
        quantized_batch_norm(m, float_shape({1, 16, 3, 4}), second_map, per_channel, float_reader);
        module fused_only = after_pass<fuse_pointwise>(m);
        module out = after_passes(m, {std::make_shared<fuse_pointwise>(), std::make_shared<fuse_concat_pointwise>()});
        EXPECT_EQ(op_names(out), op_names(fused_only)) << out;
        EXPECT_EQ(count_ops(out, "fused_concat_pointwise"), 0u) << out;
        expect_same_outputs(m, out);
    }
}

// The cpu pipeline on such a program against ref, bit for bit.
TEST(pass_fuse_concat_pointwise, cpu_quantized_feature_map_program_matches_ref) {
    program p;
    quantized_batch_norm(*p.get_main_module(), float_shape({2, 40, 7, 9}), false, false, false);
    expect_cpu_matches_ref(p, 0);
    program compiled = p;
    compiled.compile(get_target("cpu"));
    EXPECT_EQ(count_ops(*compiled.get_main_module(), "quantize_linear"), 0u) << *compiled.get_main_module();
}
