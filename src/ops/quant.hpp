#pragma once
// Linear quantization: quantize_linear and dequantize_linear, per tensor
// (scalar or one-element scale), per axis (a 1-D scale along `axis`) or
// blocked (with `block_size`: a scale of x's rank holding one value per
// `block_size` consecutive elements along `axis`, the last block possibly short).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

// quantize_linear(x, scale[, zero_point]) = saturate(round_half_to_even(x /
// scale) + zero_point), the quotient computed in x's precision (as ONNX's
// reference: a float16 x gives a float16 quotient). The result has
// zero_point's dtype, or `output_type` without one: int8, uint8, int16,
// uint16, int32, int4, uint4, int2, uint2 (saturated to the type's range; NaN
// gives the zero point), or float8 e4m3fn / e4m3fnuz / e5m2 / e5m2fnuz and
// float4 e2m1 (x / scale rounded to nearest even, out-of-range values as
// convert with `saturate` treats them; a float8 zero point must be 0 and is
// not added, a float4 one is added before rounding, both as ONNX's reference).
struct quantize_linear : op_base {
    std::int64_t axis = 1;
    dtype output_type = dtype::uint8_type;
    bool saturate = true;
    std::int64_t block_size = 0;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
        f(self.output_type, "output_type");
        f(self.saturate, "saturate");
        f(self.block_size, "block_size");
    }
    std::string name() const { return "quantize_linear"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// dequantize_linear(x, scale[, zero_point]) = (x - zero_point) * scale, with
// scale's dtype (computed in float for 16-bit scales). x is one of
// quantize_linear's result types; zero_point has x's dtype.
struct dequantize_linear : op_base {
    std::int64_t axis = 1;
    std::int64_t block_size = 0;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
        f(self.block_size, "block_size");
    }
    std::string name() const { return "dequantize_linear"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// Whether `t` is int8 or uint8, the 8-bit integer codes of quantized kernels.
inline bool is_8bit_integer(dtype t) { return t == dtype::int8_type || t == dtype::uint8_type; }

// quantize_linear's integer code: saturate(round_half_to_even(quotient) +
// zero_point) in [lo, hi], the zero point for a NaN (no NaN code).
inline double saturated_code(double quotient, double zero_point, double lo, double hi) {
    // rint rounds half to even in the default rounding mode.
    double v = std::rint(quotient) + zero_point;
    if (std::isnan(v)) v = zero_point;
    return std::min(hi, std::max(lo, v));
}

}  // namespace kiln::op
