#pragma once
// Normalizations that write 8-bit codes: what fuse_quantized_norm makes of a
// softmax or a layer_norm whose only reader is a per-tensor quantize_linear
// (the probabilities of int8 attention, the input of int8 projections), so
// that one pass over the rows reads the floats and writes the codes instead
// of writing the floats out and reading them back.
//
// softmax_quantize(x [, mask], scale, zero_point):
//   quantize_linear(softmax(x + mask, last axis), scale, zero_point)
// with has_mask; the mask broadcasts to x (attention's [B, 1, 1, S] or
// [B, 1, S, S] additive mask) and leaves x's shape as it is. With an
// input_scale above 0, x is int8 or uint8 codes read as
// dequantize_linear(x, input_scale, input_zero_point): ONNX Runtime's QDQ
// files round the attention scores to codes (the q @ kt product's own
// quantize -> dequantize), which the product then writes as they are.
//
// layer_norm_quantize(x, gamma, beta, scale, zero_point):
//   quantize_linear(layer_norm(x, gamma, beta), scale, zero_point)
// with layer_norm's axis and epsilon.
//
// scale is one float32 value, zero_point one int8 or uint8 value, whose type
// the codes have. The reference compute is the unfused ops' one after
// another, so that ref gives exactly what the unfused graph gives.
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

struct softmax_quantize : op_base {
    bool has_mask = false;
    double input_scale = 0;  // 0: x is float32
    std::int64_t input_zero_point = 0;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.has_mask, "has_mask");
        f(self.input_scale, "input_scale");
        f(self.input_zero_point, "input_zero_point");
    }
    bool reads_codes() const { return input_scale != 0; }
    std::string name() const { return "softmax_quantize"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

struct layer_norm_quantize : op_base {
    std::int64_t axis = -1;
    double epsilon = 1e-5;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
        f(self.epsilon, "epsilon");
    }
    std::string name() const { return "layer_norm_quantize"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
