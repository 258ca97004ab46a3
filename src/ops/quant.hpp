#pragma once
// Linear quantization: quantize_linear and dequantize_linear, per tensor
// (scalar or one-element scale) or per axis (a 1-D scale along `axis`).
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

// quantize_linear(x, scale[, zero_point]) = saturate(round_half_to_even(x /
// scale) + zero_point), computed in x's precision (float for 16-bit floats).
// The result has zero_point's dtype, or `output_type` without one; it may be
// int8, uint8, int16, uint16 or int32.
struct quantize_linear : op_base {
    std::int64_t axis = 1;
    dtype output_type = dtype::uint8_type;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
        f(self.output_type, "output_type");
    }
    std::string name() const { return "quantize_linear"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// dequantize_linear(x, scale[, zero_point]) = (x - zero_point) * scale, with
// scale's dtype. x is an integer type; zero_point has x's dtype.
struct dequantize_linear : op_base {
    std::int64_t axis = 1;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
    }
    std::string name() const { return "dequantize_linear"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
