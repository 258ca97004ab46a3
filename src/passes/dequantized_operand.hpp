#pragma once
// An operand read through dequantize_linear, and the test for the weights
// the cpu target's int8 kernels take as they are: shared by the quantized-op
// fusion (int8 products of int8 activations) and the cpu target's products
// of float activations by int8 weights (int8_weight_products).
#include <cstdint>
#include <optional>

#include "kiln/module.hpp"

namespace kiln {

// The parts of a dequantize_linear instruction.
struct dequantized {
    instruction_ref q;
    instruction_ref scale;
    std::optional<instruction_ref> zero_point;
    std::int64_t axis = 1;

    bool per_tensor() const { return scale->get_shape().elements() == 1; }
};

dequantized read_dequantize(instruction_ref d);

// Whether every value of a constant integer zero point is 0 (an absent one is).
bool is_zero(const std::optional<instruction_ref>& zero_point);

// A weight's dequantize: constant int8 codes, symmetric, constant float32
// scales per tensor or along `axis` (`channels` values).
bool is_quantized_weight(const dequantized& d, std::size_t axis, std::size_t channels);

}  // namespace kiln
