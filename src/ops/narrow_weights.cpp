#include "ops/narrow_weights.hpp"

#include "kiln/errors.hpp"
#include "kiln/operation.hpp"
#include "ops/elementwise.hpp"

namespace kiln::ops {

bool is_16bit_float(dtype t) {
    return t == dtype::half_type || t == dtype::bf16_type;
}

shape product_weights_shape(const std::string& op, const shape& activations, const shape& weights, bool int8_codes) {
    if (weights.type() == activations.type()) return weights;
    const bool narrow = is_16bit_float(weights.type()) || (int8_codes && weights.type() == dtype::int8_type);
    if (activations.type() == dtype::float_type && narrow) return shape{dtype::float_type, weights.lens()};
    fail(error_kind::type_error, op + ": weights must be " + to_string(activations.type()) + " (or float16 / bfloat16" +
                                     (int8_codes ? " / int8" : "") + " beside float32 activations), got " +
                                     to_string(weights.type()));
}

argument float32_weights(const argument& weights) {
    const dtype t = weights.get_shape().type();
    if (!is_16bit_float(t) && t != dtype::int8_type) return weights;
    return op::convert_to(dtype::float_type).evaluate(shape{dtype::float_type, weights.get_shape().lens()}, {weights});
}

}  // namespace kiln::ops
