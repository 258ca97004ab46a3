#include "ops/blocked_layout.hpp"

#include "ops/op_helpers.hpp"

namespace kiln::ops {

bool can_block(const shape& plain) {
    return plain.type() == dtype::float_type && plain.ndim() == 4 && plain.lens()[1] % channel_block == 0 &&
           plain.lens()[1] > 0;
}

shape blocked_shape(const std::string& op, const shape& plain) {
    if (!can_block(plain))
        fail(op + ": only a float32 [N, C, H, W] tensor with C a multiple of 8 has a blocked layout, got " +
             to_string(plain));
    const auto& l = plain.lens();
    return {plain.type(), {l[0], l[1] / channel_block, l[2], l[3], channel_block}};
}

shape unblocked_shape(const std::string& op, const shape& blocked) {
    const auto& l = blocked.lens();
    if (blocked.type() != dtype::float_type || blocked.ndim() != 5 || l[4] != channel_block)
        fail(op + ": a blocked tensor is float32 [N, C/8, H, W, 8], got " + to_string(blocked));
    return {blocked.type(), {l[0], l[1] * channel_block, l[2], l[3]}};
}

namespace {

// Calls f(plain element offset, blocked element index) for every element.
template <class F>
void for_each_blocked(const shape& plain, F&& f) {
    const auto& l = plain.lens();
    const auto& s = plain.strides();
    std::size_t b = 0;
    for (std::size_t n = 0; n < l[0]; ++n)
        for (std::size_t cb = 0; cb < l[1] / channel_block; ++cb)
            for (std::size_t h = 0; h < l[2]; ++h)
                for (std::size_t w = 0; w < l[3]; ++w)
                    for (std::size_t c = 0; c < channel_block; ++c)
                        f(n * s[0] + (cb * channel_block + c) * s[1] + h * s[2] + w * s[3], b++);
}

}  // namespace

void block_values(const argument& plain, const argument& blocked) {
    const float* p = plain.data_as<float>();
    float* q = blocked.data_as<float>();
    for_each_blocked(plain.get_shape(), [&](std::size_t pi, std::size_t bi) { q[bi] = p[pi]; });
}

void unblock_values(const argument& blocked, const argument& plain) {
    const float* q = blocked.data_as<float>();
    float* p = plain.data_as<float>();
    for_each_blocked(plain.get_shape(), [&](std::size_t pi, std::size_t bi) { p[pi] = q[bi]; });
}

}  // namespace kiln::ops

namespace kiln::op {

shape to_blocked::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 1);
    return ops::blocked_shape(name(), inputs[0]);
}

void to_blocked::compute(const argument& result, const std::vector<argument>& inputs) const {
    ops::block_values(inputs[0], result);
}

shape from_blocked::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 1);
    if (!inputs[0].standard()) fail(name() + ": the blocked input must be standard-strided, got " + to_string(inputs[0]));
    return ops::unblocked_shape(name(), inputs[0]);
}

void from_blocked::compute(const argument& result, const std::vector<argument>& inputs) const {
    ops::unblock_values(inputs[0], result);
}

}  // namespace kiln::op
