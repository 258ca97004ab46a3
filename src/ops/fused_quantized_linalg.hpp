#pragma once
// An int8 convolution or matrix product with its whole requantizing
// epilogue, what the cpu target fuses a quantized layer into so that one
// int8 kernel runs it: the int32 sums, scaled per output channel back to
// real values (sx * sw), plus a float bias, activations, optionally the
// rounding to an intermediate quantized tensor that the graph stores
// (quantize -> dequantize before a residual add), a residual add, more
// activations, and the quantization of the result (or a float result).
//
// Inputs: x codes, w codes (constant int8), x zero point (one value of x's
// dtype), scale [M] float32, then bias [M] float32 if has_bias, then the
// residual if any: float32 of the result's lens, or quantized codes whose
// scale and zero point are attributes.
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/operation.hpp"
#include "ops/post_ops.hpp"
#include "ops/quantized_linalg.hpp"

namespace kiln::op {

enum class residual_kind { none, real, quantized };
inline std::span<const char* const> enum_names(residual_kind) {
    static constexpr const char* names[] = {"none", "real", "quantized"};
    return names;
}

// What follows the integer product, in order. Scales are float32 values
// held as double (exactly).
struct requantize_epilogue {
    bool has_bias = false;
    post_op_chain activation;             // unary kinds only (relu, clip, ...)
    dtype round_type = dtype::float_type;  // float_type: no intermediate rounding
    double round_scale = 1;
    std::int64_t round_zero_point = 0;
    residual_kind residual = residual_kind::none;
    double residual_scale = 1;
    std::int64_t residual_zero_point = 0;
    post_op_chain after_residual;          // unary kinds only
    dtype output_type = dtype::float_type;  // int8 / uint8: quantized with output_scale / zero point
    double output_scale = 1;
    std::int64_t output_zero_point = 0;

    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.has_bias, "has_bias");
        f(self.activation.kinds, "activation");
        f(self.activation.alpha, "activation_alpha");
        f(self.activation.beta, "activation_beta");
        f(self.round_type, "round_type");
        f(self.round_scale, "round_scale");
        f(self.round_zero_point, "round_zero_point");
        f(self.residual, "residual");
        f(self.residual_scale, "residual_scale");
        f(self.residual_zero_point, "residual_zero_point");
        f(self.after_residual.kinds, "after_residual");
        f(self.after_residual.alpha, "after_residual_alpha");
        f(self.after_residual.beta, "after_residual_beta");
        f(self.output_type, "output_type");
        f(self.output_scale, "output_scale");
        f(self.output_zero_point, "output_zero_point");
    }

    std::size_t residual_input() const { return has_bias ? 5 : 4; }
    std::size_t input_count() const { return residual_input() + (residual == residual_kind::none ? 0 : 1); }
    // Checks the inputs after the product's own three against the product's
    // result `sums` (int32, channels along `channel_axis`); returns the result shape.
    shape check(const std::string& op, const std::vector<shape>& inputs, const shape& sums,
                std::size_t channel_axis) const;
    // Applies the epilogue to `sums` (int32, standard) and writes `result`.
    void apply(const argument& sums, std::size_t channel_axis, const std::vector<argument>& inputs,
               const argument& result) const;
    // Whether everything after the intermediate rounding depends on its code
    // alone: the epilogue rounds, adds no residual and has an 8-bit result.
    bool ends_in_code_map() const;
    // For such an epilogue, the result code of each intermediate code,
    // indexed by the code's byte (an int8 code -1 is entry 255): apply's
    // own arithmetic over the 256 codes, so a kernel that stops at the
    // rounding and looks the rest up gives apply's codes.
    std::vector<std::uint8_t> code_map() const;
};

struct fused_quant_convolution : op_base {
    quant_convolution conv;
    requantize_epilogue epilogue;
    // A 4-D result stored channels-last (NHWC strides, NCHW lens): the
    // layout oneDNN's int8 kernels read and write, kept between them.
    bool channels_last = false;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        quant_convolution::reflect(self.conv, f);
        requantize_epilogue::reflect(self.epilogue, f);
        f(self.channels_last, "channels_last");
    }
    std::string name() const { return "fused_quant_convolution"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// b is constant weights, or (a product of two activations) b's codes
// computed at run time with zero point b_zero_point.
struct fused_quant_dot : op_base {
    requantize_epilogue epilogue;
    std::int64_t b_zero_point = 0;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        requantize_epilogue::reflect(self.epilogue, f);
        f(self.b_zero_point, "b_zero_point");
    }
    std::string name() const { return "fused_quant_dot"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// NHWC strides for NCHW lens `lens` (4-D).
std::vector<std::size_t> channels_last_strides(const std::vector<std::size_t>& lens);

}  // namespace kiln::op
