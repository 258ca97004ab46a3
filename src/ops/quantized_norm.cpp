#include "ops/quantized_norm.hpp"

#include <cmath>
#include <utility>

#include "ops/elementwise.hpp"
#include "ops/norm.hpp"
#include "ops/op_helpers.hpp"
#include "ops/quant.hpp"

namespace kiln::op {

namespace {

// The quantize parameters at inputs[first], inputs[first + 1]: one float32
// scale and one 8-bit zero point, whose type the result takes.
dtype check_quantize_parameters(const std::string& op, const std::vector<shape>& inputs, std::size_t first) {
    const shape& scale = inputs[first];
    const shape& zero_point = inputs[first + 1];
    ops::expect_type(op, scale, dtype::float_type, "scale (input " + std::to_string(first) + ")");
    if (scale.elements() != 1)
        fail(op + ": scale (input " + std::to_string(first) + ") must hold one value (per-tensor), got " +
             to_string(scale.lens()));
    if (!is_8bit_integer(zero_point.type()))
        fail(error_kind::type_error, op + ": zero_point (input " + std::to_string(first + 1) +
                                         ") must be int8 or uint8, got " + to_string(zero_point.type()));
    if (zero_point.elements() != 1)
        fail(op + ": zero_point (input " + std::to_string(first + 1) + ") must hold one value (per-tensor), got " +
             to_string(zero_point.lens()));
    return zero_point.type();
}

// quantize_linear(values, scale, zero_point) into `result`.
void quantize_into(const argument& result, const argument& values, const argument& scale, const argument& zero_point) {
    quantize_linear{}.compute(result, {values, scale, zero_point});
}

}  // namespace

shape softmax_quantize::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, has_mask ? 4 : 3);
    const shape& x = inputs[0];
    if (!reads_codes()) {
        ops::expect_type(name(), x, dtype::float_type, "x (input 0)");
    } else {
        if (!is_8bit_integer(x.type()))
            fail(error_kind::type_error, name() + ": x (input 0) must be int8 or uint8 codes with input_scale " +
                                             std::to_string(input_scale) + ", got " + to_string(x.type()));
        if (!(input_scale > 0) || !std::isfinite(input_scale))
            fail(name() + ": input_scale must be a finite positive number (or 0 for float32 x), got " +
                 std::to_string(input_scale));
        const auto [lo, hi] = x.type() == dtype::int8_type ? std::pair{-128, 127} : std::pair{0, 255};
        if (input_zero_point < lo || input_zero_point > hi)
            fail(name() + ": input_zero_point " + std::to_string(input_zero_point) + " is not a code of " +
                 to_string(x.type()));
    }
    if (x.ndim() == 0) fail(name() + ": x (input 0) must have at least one dimension");
    if (has_mask) {
        ops::expect_type(name(), inputs[1], dtype::float_type, "mask (input 1)");
        bool fits = false;
        try {
            fits = ops::broadcast_lens(name(), {x, inputs[1]}) == x.lens();
        } catch (const error&) {
        }
        if (!fits)
            fail(name() + ": the mask (input 1) " + to_string(inputs[1].lens()) + " does not broadcast to x " +
                 to_string(x.lens()));
    }
    return {check_quantize_parameters(name(), inputs, has_mask ? 2 : 1), x.lens()};
}

void softmax_quantize::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape scores_shape{dtype::float_type, inputs[0].get_shape().lens()};
    argument x = inputs[0];
    if (reads_codes()) {
        argument scale(shape{dtype::float_type, {}});
        *scale.data_as<float>() = static_cast<float>(input_scale);
        argument zero_point(shape{x.get_shape().type(), {}});
        if (x.get_shape().type() == dtype::uint8_type)
            *zero_point.data_as<std::uint8_t>() = static_cast<std::uint8_t>(input_zero_point);
        else
            *zero_point.data_as<std::int8_t>() = static_cast<std::int8_t>(input_zero_point);
        x = argument(scores_shape);
        dequantize_linear{}.compute(x, {inputs[0], scale, zero_point});
    }
    argument scores = x;
    if (has_mask) {
        scores = argument(scores_shape);
        add{}.compute(scores, {x, inputs[1]});
    }
    argument probabilities(scores_shape);
    softmax normalize;
    normalize.axis = -1;
    normalize.compute(probabilities, {scores});
    const std::size_t q = has_mask ? 2 : 1;
    quantize_into(result, probabilities, inputs[q], inputs[q + 1]);
}

shape layer_norm_quantize::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 5);
    const shape& x = inputs[0];
    ops::expect_type(name(), x, dtype::float_type, "x (input 0)");
    layer_norm normalize;
    normalize.axis = axis;
    normalize.epsilon = epsilon;
    try {
        normalize.compute_shape({x, inputs[1], inputs[2]});
    } catch (const error& e) {
        throw error(e.kind(), name() + ": " + e.what());
    }
    return {check_quantize_parameters(name(), inputs, 3), x.lens()};
}

void layer_norm_quantize::compute(const argument& result, const std::vector<argument>& inputs) const {
    layer_norm normalize;
    normalize.axis = axis;
    normalize.epsilon = epsilon;
    argument normalized(shape{dtype::float_type, inputs[0].get_shape().lens()});
    normalize.compute(normalized, {inputs[0], inputs[1], inputs[2]});
    quantize_into(result, normalized, inputs[3], inputs[4]);
}

}  // namespace kiln::op
