// The cpu target runs 3 x 3 stride-1 convolutions with 16 tiles of 2 x 2
// and up over the batch by Winograd's F(2 x 2, 3 x 3)
// (winograd_convolution.cpp). Whole programs through the cpu pipeline
// (blocked layout, fused bias, relu and residual adds) against ref.
#include "pass_test_helpers.hpp"

using namespace kiln;
using namespace kiln::test;

namespace {

instruction_ref conv3x3(module& m, instruction_ref x, std::size_t channels, std::size_t filters, unsigned long seed,
                        std::int64_t pad = 1) {
    auto w = add_random_literal(m, {filters, channels, 3, 3}, seed);
    return m.add_instruction(make_op("convolution", value_map{{"padding", ints({pad, pad})}}), {x, w});
}

instruction_ref bias_relu(module& m, instruction_ref y, std::size_t channels, unsigned long seed) {
    auto biased = m.add_instruction(make_op("add"), {y, add_random_literal(m, {channels, 1, 1}, seed)});
    return m.add_instruction(make_op("relu"), {biased});
}

// A ResNet basic block: conv + bias + relu, conv + residual add + relu.
void residual_block(std::size_t batch, std::size_t channels, std::size_t size) {
    program p;
    module& m = *p.get_main_module();
    auto x = m.add_parameter("x", float_shape({batch, channels, size, size}));
    auto a = bias_relu(m, conv3x3(m, x, channels, channels, 1), channels, 2);
    auto b = m.add_instruction(make_op("add"), {conv3x3(m, a, channels, channels, 3), x});
    m.add_return({m.add_instruction(make_op("relu"), {b})});
    expect_cpu_matches_ref(p, 1e-4);
}

}  // namespace

// Few channels: each thread takes its own tiles; 128 channels (U of 1 MB):
// the threads share each group's tiles and split the output blocks.
TEST(cpu_winograd_convolution, residual_block_14x14) {
    residual_block(1, 16, 14);
}

TEST(cpu_winograd_convolution, residual_block_14x14_shared_tiles) {
    residual_block(1, 128, 14);
}

// Odd extents cut the last tile row and column; a batch of 2 puts tiles of
// both images in one group.
TEST(cpu_winograd_convolution, residual_block_odd_extent_batch) {
    residual_block(2, 24, 15);
}

// ResNet-50's first stage: 56 x 56 planes sum 16 channels at a time.
TEST(cpu_winograd_convolution, residual_block_56x56) {
    residual_block(1, 64, 56);
}

// A DenseNet-like layer: many input channels (several tile groups), few
// outputs (one pair of output blocks), no padding then wide padding. A 1 x 1
// convolution first gives it blocked input.
TEST(cpu_winograd_convolution, narrow_output_and_unusual_padding) {
    for (std::int64_t pad : {0, 2}) {
        program p;
        module& m = *p.get_main_module();
        auto x = m.add_parameter("x", float_shape({1, 8, 20, 21}));
        auto w = add_random_literal(m, {136, 8, 1, 1}, 4);
        auto wide = m.add_instruction(make_op("relu"), {m.add_instruction(make_op("convolution"), {x, w})});
        m.add_return({bias_relu(m, conv3x3(m, wide, 136, 32, 5, pad), 32, 6)});
        expect_cpu_matches_ref(p, 1e-4);
    }
}
