// channels_last_concat_pieces (src/targets/cpu/passes): a float32 NCHW value
// that several channels-last fused_concat_pointwise ops read as a piece is
// copied once into channels-last order, and they read the copy; a single
// reader, or a value read as a program operand, is left alone.
#include "ops/fused_concat_pointwise.hpp"
#include "pass_test_helpers.hpp"
#include "targets/cpu/passes/cpu_passes.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

// relu over [x, codes] (x float NCHW, 3 channels; codes int8 NHWC, 5
// channels), written channels-last as uint8 codes.
instruction_ref relu_codes(module& m, instruction_ref x, instruction_ref codes) {
    op::fused_concat_pointwise f;
    f.axis = 1;
    f.pieces = 2;
    f.steps = {op::pointwise_step{make_op("relu"), {0}}};
    f.output_type = dtype::uint8_type;
    f.output_scale = 0.05;
    f.channels_last = true;
    f.piece_scales = {1, 0.1};
    f.piece_zero_points = {0, 3};
    auto nchw = m.add_instruction(make_op("transpose", value_map{{"permutation", ints({0, 3, 1, 2})}}), {codes});
    return m.add_instruction(operation(f), {x, nchw});
}

void add_readers(module& m, int readers) {
    auto x = m.add_parameter("x", float_shape({1, 3, 4, 5}));
    auto doubled = m.add_instruction(make_op("add"), {x, x});
    std::vector<instruction_ref> outputs;
    for (int k = 0; k < readers; ++k)
        outputs.push_back(relu_codes(m, doubled, m.add_parameter("c" + std::to_string(k), shape{dtype::int8_type, {1, 4, 5, 5}})));
    m.add_return(outputs);
}

}  // namespace

TEST(pass_channels_last_concat_pieces, a_piece_two_programs_read_is_copied_once) {
    module m;
    add_readers(m, 2);
    module out = after_pass<channels_last_concat_pieces>(m);
    EXPECT_EQ(op_names(out), (std::vector<std::string>{"add", "transpose", "contiguous", "transpose", "transpose",
                                                       "fused_concat_pointwise", "transpose", "fused_concat_pointwise"}))
        << out;
    for (const auto& ins : out) {
        if (ins.name() != "fused_concat_pointwise") continue;
        const shape& piece = ins.inputs()[0]->get_shape();
        EXPECT_EQ(piece.lens(), (std::vector<std::size_t>{1, 3, 4, 5})) << out;
        // Channels-last (the batch of one has any stride).
        EXPECT_EQ(std::vector<std::size_t>(piece.strides().begin() + 1, piece.strides().end()),
                  (std::vector<std::size_t>{1, 15, 3}))
            << out;
        EXPECT_EQ(ins.inputs()[0]->name(), "transpose") << out;
    }
    expect_same_outputs(m, out);
}

TEST(pass_channels_last_concat_pieces, one_reader_gathers_in_place) {
    module m;
    add_readers(m, 1);
    module out = after_pass<channels_last_concat_pieces>(m);
    EXPECT_EQ(count_ops(out, "contiguous"), 0u) << out;
    EXPECT_EQ(to_string(out), to_string(m));
}
