#include "ops/fused_dot.hpp"

#include "ops/linalg.hpp"
#include "ops/narrow_weights.hpp"
#include "ops/op_helpers.hpp"

namespace kiln::op {

shape fused_dot::compute_shape(const std::vector<shape>& inputs) const {
    const std::size_t first = first_post_operand();
    if (inputs.size() < first)
        fail(name() + ": expected a, b" + std::string(has_bias ? ", bias" : "") + " and post-op operands, got " +
             std::to_string(inputs.size()) + " inputs");
    if (!ops::is_16bit_float(inputs[0].type())) ops::expect_type(name(), inputs[0], dtype::float_type, "a");
    shape out = dot{}.compute_shape({inputs[0], ops::product_weights_shape(name(), inputs[0], inputs[1], true)});
    if (has_bias) {
        ops::expect_type(name(), inputs[2], out.type(), "bias");
        if (out.ndim() == 0 || inputs[2].lens() != std::vector<std::size_t>{out.lens().back()})
            fail(name() + ": bias must be one value per output column of " + to_string(out.lens()) + ", got " +
                 to_string(inputs[2]));
    }
    ops::check_post_ops(name(), post, out, {inputs.begin() + static_cast<std::ptrdiff_t>(first), inputs.end()});
    return out;
}

void fused_dot::compute(const argument& result, const std::vector<argument>& inputs) const {
    ops::compute_in_float32(result, inputs, [this](const argument& r, const std::vector<argument>& in) {
        compute_float32(r, in);
    });
}

void fused_dot::compute_float32(const argument& result, const std::vector<argument>& inputs) const {
    dot{}.compute(result, {inputs[0], ops::float32_weights(inputs[1])});
    if (has_bias) {
        const float* b = inputs[2].data_as<float>();
        float* p = result.data_as<float>();
        const std::size_t cols = result.get_shape().lens().back();
        const std::size_t n = result.get_shape().elements();
        for (std::size_t i = 0; i < n; ++i) p[i] += b[i % cols];
    }
    std::vector<argument> operands(inputs.begin() + static_cast<std::ptrdiff_t>(first_post_operand()), inputs.end());
    ops::apply_post_ops(post, result, operands);
}

}  // namespace kiln::op
