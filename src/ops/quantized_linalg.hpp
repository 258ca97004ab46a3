#pragma once
// Integer convolution and matrix product: the int8 arithmetic that quantized
// models run. Both take 8-bit operands and give the exact int32 sums of
// products, the form fuse_quantized_ops rewrites dequantize -> convolution /
// dot chains into (the scales are applied by a dequantize_linear after them).
#include <string>
#include <vector>

#include "kiln/operation.hpp"
#include "ops/conv.hpp"

namespace kiln::op {

// quant_convolution(x, w[, x_zero_point]): x int8 or uint8 [N, C, spatial...],
// w int8 [M, C / group, kernel...], x_zero_point one value of x's dtype.
// The result, int32 [N, M, out...], is the sum over each window of
// (x - x_zero_point) * w, where padding contributes 0 (it stands for the
// real value 0, whose quantized code is the zero point).
struct quant_convolution : op_base {
    std::vector<std::int64_t> padding;
    std::vector<std::int64_t> stride;
    std::vector<std::int64_t> dilation;
    std::int64_t group = 1;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.padding, "padding");
        f(self.stride, "stride");
        f(self.dilation, "dilation");
        f(self.group, "group");
    }
    std::string name() const { return "quant_convolution"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;

    // The float convolution with the same attributes.
    convolution as_convolution() const;
};

// quant_dot(a, b[, a_zero_point[, b_zero_point]]): a int8 or uint8, b int8,
// batch dimensions broadcast as in dot; the result is int32
// (a - a_zero_point) @ (b - b_zero_point). A b zero point comes with a
// product of two activations (attention's q @ kt and p @ v), whose b is
// computed at run time and quantized with a zero point like any activation.
struct quant_dot : op_base {
    std::string name() const { return "quant_dot"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
