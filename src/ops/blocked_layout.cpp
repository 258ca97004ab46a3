#include "ops/blocked_layout.hpp"

#include <algorithm>

#include "ops/op_helpers.hpp"

namespace kiln::ops {

std::size_t channel_block(op::tensor_layout layout) {
    switch (layout) {
    case op::tensor_layout::nchw8c: return avx2_channel_block;
    case op::tensor_layout::nchw16c: return avx512_channel_block;
    default: return 0;
    }
}

bool is_blocked(op::tensor_layout layout) { return channel_block(layout) != 0; }

op::tensor_layout blocked_layout(const std::string& op, std::size_t block) {
    if (block == avx2_channel_block) return op::tensor_layout::nchw8c;
    if (block == avx512_channel_block) return op::tensor_layout::nchw16c;
    fail(op + ": a channel block is 8 or 16 channels, got " + std::to_string(block));
}

bool can_block(const shape& plain, std::size_t block) {
    return plain.type() == dtype::float_type && plain.ndim() == 4 && block > 0 && plain.lens()[1] % block == 0 &&
           plain.lens()[1] > 0;
}

std::size_t padded_blocks(std::size_t channels, std::size_t block) { return (channels + block - 1) / block; }

shape blocked_shape(const std::string& op, const shape& plain, std::size_t block) {
    blocked_layout(op, block);
    if (plain.type() != dtype::float_type || plain.ndim() != 4 || plain.lens()[1] == 0)
        fail(op + ": only a float32 [N, C, H, W] tensor with C > 0 has a blocked layout, got " + to_string(plain));
    const auto& l = plain.lens();
    return {plain.type(), {l[0], padded_blocks(l[1], block), l[2], l[3], block}};
}

shape unblocked_shape(const std::string& op, const shape& blocked, std::size_t channels) {
    const auto& l = blocked.lens();
    if (blocked.type() != dtype::float_type || blocked.ndim() != 5 ||
        (l[4] != avx2_channel_block && l[4] != avx512_channel_block))
        fail(op + ": a blocked tensor is float32 [N, C/b, H, W, b] with b 8 or 16, got " + to_string(blocked));
    if (channels == 0) channels = l[1] * l[4];
    if (padded_blocks(channels, l[4]) != l[1])
        fail(op + ": " + std::to_string(channels) + " channels take " + std::to_string(padded_blocks(channels, l[4])) +
             " blocks of " + std::to_string(l[4]) + ", but the blocked tensor has " + std::to_string(l[1]) + ": " +
             to_string(blocked));
    return {blocked.type(), {l[0], channels, l[2], l[3]}};
}

namespace {

// Calls f(plain element offset, blocked element index) for every element of
// the plain tensor (padding channels are skipped).
template <class F>
void for_each_blocked(const shape& plain, std::size_t block, F&& f) {
    const auto& l = plain.lens();
    const auto& s = plain.strides();
    std::size_t b = 0;
    for (std::size_t n = 0; n < l[0]; ++n)
        for (std::size_t cb = 0; cb < padded_blocks(l[1], block); ++cb)
            for (std::size_t h = 0; h < l[2]; ++h)
                for (std::size_t w = 0; w < l[3]; ++w)
                    for (std::size_t c = 0; c < block; ++c, ++b)
                        if (cb * block + c < l[1]) f(n * s[0] + (cb * block + c) * s[1] + h * s[2] + w * s[3], b);
}

}  // namespace

void block_values(const argument& plain, const argument& blocked) {
    const float* p = plain.data_as<float>();
    float* q = blocked.data_as<float>();
    std::fill_n(q, blocked.get_shape().elements(), 0.0f);
    for_each_blocked(plain.get_shape(), blocked.get_shape().lens()[4],
                     [&](std::size_t pi, std::size_t bi) { q[bi] = p[pi]; });
}

void unblock_values(const argument& blocked, const argument& plain) {
    const float* q = blocked.data_as<float>();
    float* p = plain.data_as<float>();
    for_each_blocked(plain.get_shape(), blocked.get_shape().lens()[4],
                     [&](std::size_t pi, std::size_t bi) { p[pi] = q[bi]; });
}

void zero_channel_padding(const argument& blocked, std::size_t channels) {
    const auto& l = blocked.get_shape().lens();
    const std::size_t block = l[4];
    const std::size_t pixels = l[2] * l[3];
    if (channels >= l[1] * block) return;
    float* q = blocked.data_as<float>();
    for (std::size_t n = 0; n < l[0]; ++n) {
        float* last = q + ((n * l[1] + l[1] - 1) * pixels) * block;  // only the last block holds padding
        for (std::size_t p = 0; p < pixels; ++p)
            std::fill(last + p * block + channels % block, last + (p + 1) * block, 0.0f);
    }
}

}  // namespace kiln::ops

namespace kiln::op {

shape to_blocked::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 1);
    if (block < 0) fail(name() + ": block must be 8 or 16, got " + std::to_string(block));
    return ops::blocked_shape(name(), inputs[0], static_cast<std::size_t>(block));
}

void to_blocked::compute(const argument& result, const std::vector<argument>& inputs) const {
    ops::block_values(inputs[0], result);
}

shape from_blocked::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 1);
    if (!inputs[0].standard()) fail(name() + ": the blocked input must be standard-strided, got " + to_string(inputs[0]));
    if (channels < 0) fail(name() + ": channels must be 0 (all) or positive, got " + std::to_string(channels));
    return ops::unblocked_shape(name(), inputs[0], static_cast<std::size_t>(channels));
}

void from_blocked::compute(const argument& result, const std::vector<argument>& inputs) const {
    ops::unblock_values(inputs[0], result);
}

}  // namespace kiln::op
