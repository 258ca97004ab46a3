#include "ops/fused_convolution.hpp"

#include <algorithm>

#include "ops/conv.hpp"
#include "ops/narrow_weights.hpp"
#include "ops/op_helpers.hpp"

namespace kiln::op {

shape fused_convolution::plain_input_shape(const std::vector<shape>& inputs) const {
    const shape& x = inputs[0];
    if (!ops::is_blocked(input_layout)) return x;
    const shape& w = inputs[1];
    if (w.ndim() < 2) fail(name() + ": weights must be [M, C/group, ...], got " + to_string(w));
    const auto group = static_cast<std::size_t>(std::max<std::int64_t>(conv.group, 1));
    return ops::unblocked_shape(name(), x, w.lens()[1] * group);
}

shape fused_convolution::plain_output_shape(const std::vector<shape>& inputs) const {
    return conv.compute_shape({plain_input_shape(inputs), ops::product_weights_shape(name(), inputs[0], inputs[1])});
}

shape fused_convolution::compute_shape(const std::vector<shape>& inputs) const {
    const std::size_t first = first_post_operand();
    if (inputs.size() < first)
        fail(name() + ": expected x, w" + std::string(has_bias ? ", bias" : "") + " and post-op operands, got " +
             std::to_string(inputs.size()) + " inputs");
    if (!ops::is_16bit_float(inputs[0].type())) ops::expect_type(name(), inputs[0], dtype::float_type, "x");
    if (ops::is_blocked(input_layout) && !inputs[0].standard())
        fail(name() + ": a blocked input must be standard-strided, got " + to_string(inputs[0]));
    if (ops::is_blocked(input_layout) && inputs[0].lens().back() != ops::channel_block(input_layout))
        fail(name() + ": input_layout " + std::string(enum_names(input_layout)[static_cast<int>(input_layout)]) +
             " needs a blocked input of " + std::to_string(ops::channel_block(input_layout)) + " channels per block, got " +
             to_string(inputs[0]));
    shape plain = plain_output_shape(inputs);
    if (has_bias && inputs[2].lens() != std::vector<std::size_t>{plain.lens()[1]})
        fail(name() + ": bias must be [" + std::to_string(plain.lens()[1]) + "], got " + to_string(inputs[2]));
    if (has_bias) ops::expect_type(name(), inputs[2], plain.type(), "bias");
    shape out = ops::is_blocked(output_layout) ? ops::blocked_shape(name(), plain, ops::channel_block(output_layout))
                                               : plain;
    ops::check_post_ops(name(), post, out, {inputs.begin() + static_cast<std::ptrdiff_t>(first), inputs.end()});
    return out;
}

void fused_convolution::compute(const argument& result, const std::vector<argument>& inputs) const {
    ops::compute_in_float32(result, inputs, [this](const argument& r, const std::vector<argument>& in) {
        compute_float32(r, in);
    });
}

void fused_convolution::compute_float32(const argument& result, const std::vector<argument>& inputs) const {
    argument x = inputs[0];
    if (ops::is_blocked(input_layout)) {
        x = argument(plain_input_shape({inputs[0].get_shape(), inputs[1].get_shape()}));
        ops::unblock_values(inputs[0], x);
    }
    const argument w = ops::float32_weights(inputs[1]);
    shape plain = conv.compute_shape({x.get_shape(), w.get_shape()});
    argument y = operation(conv).evaluate(plain, {x, w});
    if (has_bias) {
        const float* b = inputs[2].data_as<float>();
        float* p = y.data_as<float>();
        const auto& l = plain.lens();
        std::size_t inner = plain.elements() / (l[0] * l[1]);
        for (std::size_t n = 0, i = 0; n < l[0]; ++n)
            for (std::size_t m = 0; m < l[1]; ++m)
                for (std::size_t k = 0; k < inner; ++k) p[i++] += b[m];
    }
    if (ops::is_blocked(output_layout)) {
        ops::block_values(y, result);
    } else {
        copy_values(y, result);
    }
    std::vector<argument> operands(inputs.begin() + static_cast<std::ptrdiff_t>(first_post_operand()), inputs.end());
    ops::apply_post_ops(post, result, operands);
    // Post-ops may map the padding's zeros to other values (sigmoid: 0.5).
    if (ops::is_blocked(output_layout)) ops::zero_channel_padding(result, plain.lens()[1]);
}

}  // namespace kiln::op
