#include "ops/half_weights.hpp"

#include "kiln/errors.hpp"
#include "kiln/operation.hpp"
#include "ops/elementwise.hpp"

namespace kiln::ops {

bool is_16bit_float(dtype t) {
    return t == dtype::half_type || t == dtype::bf16_type;
}

shape product_weights_shape(const std::string& op, const shape& activations, const shape& weights) {
    if (weights.type() == activations.type()) return weights;
    if (activations.type() == dtype::float_type && is_16bit_float(weights.type()))
        return shape{dtype::float_type, weights.lens()};
    fail(error_kind::type_error, op + ": weights must be " + to_string(activations.type()) +
                                     " (or float16 / bfloat16 beside float32 activations), got " +
                                     to_string(weights.type()));
}

argument float32_weights(const argument& weights) {
    if (!is_16bit_float(weights.get_shape().type())) return weights;
    return op::convert_to(dtype::float_type).evaluate(shape{dtype::float_type, weights.get_shape().lens()}, {weights});
}

}  // namespace kiln::ops
