#include "ops/fused_quantized_linalg.hpp"

#include <cmath>
#include <limits>

#include "kiln/argument.hpp"
#include "ops/op_helpers.hpp"
#include "ops/quant.hpp"

namespace kiln::op {

namespace {

void expect_unary(const std::string& op, const post_op_chain& chain, const char* which) {
    if (chain.alpha.size() != chain.kinds.size() || chain.beta.size() != chain.kinds.size())
        fail(op + ": " + which + " needs one alpha and one beta per kind");
    for (auto k : chain.kinds)
        if (is_binary(k)) fail(op + ": " + which + " takes unary kinds only, got " + enum_names(k)[static_cast<std::size_t>(k)]);
}

double apply_chain(const post_op_chain& chain, double v) {
    for (std::size_t k = 0; k < chain.kinds.size(); ++k) v = apply_unary(chain.kinds[k], v, chain.alpha[k], chain.beta[k]);
    return v;
}

// The code saturate(round_half_to_even(v / scale) + zero_point) of an 8-bit type.
double quantized_code(double v, double scale, std::int64_t zero_point, dtype t) {
    const double lo = t == dtype::uint8_type ? 0 : -128;
    const double hi = t == dtype::uint8_type ? 255 : 127;
    return saturated_code(v / scale, static_cast<double>(zero_point), lo, hi);
}

// The real value of an intermediate code.
double rounded_value(const requantize_epilogue& e, double code) {
    return (code - static_cast<double>(e.round_zero_point)) * e.round_scale;
}

// The 8-bit result code of real value `v` after the rounding and residual.
double output_code(const requantize_epilogue& e, double v) {
    return quantized_code(apply_chain(e.after_residual, v), e.output_scale, e.output_zero_point, e.output_type);
}

}  // namespace

std::vector<std::size_t> channels_last_strides(const std::vector<std::size_t>& lens) {
    // n, c, h, w with c fastest, then w, then h.
    return {lens[1] * lens[2] * lens[3], 1, lens[3] * lens[1], lens[1]};
}

shape requantize_epilogue::check(const std::string& op, const std::vector<shape>& inputs, const shape& sums,
                                 std::size_t channel_axis) const {
    if (inputs.size() != input_count())
        fail(op + ": expected " + std::to_string(input_count()) + " inputs (x, w, x zero point, scale" +
             (has_bias ? ", bias" : "") + (residual != residual_kind::none ? ", residual" : "") + "), got " +
             std::to_string(inputs.size()));
    const std::vector<std::size_t> channels{sums.lens()[channel_axis]};
    ops::expect_type(op, inputs[3], dtype::float_type, "scale (input 3)");
    if (inputs[3].lens() != channels) fail(op + ": scale must be " + to_string(channels) + ", got " + to_string(inputs[3]));
    if (has_bias) {
        ops::expect_type(op, inputs[4], dtype::float_type, "bias (input 4)");
        if (inputs[4].lens() != channels) fail(op + ": bias must be " + to_string(channels) + ", got " + to_string(inputs[4]));
    }
    expect_unary(op, activation, "activation");
    expect_unary(op, after_residual, "after_residual");
    if (round_type != dtype::float_type && !is_8bit_integer(round_type))
        fail(error_kind::type_error, op + ": round_type must be float_type, int8 or uint8, got " + to_string(round_type));
    if (!is_8bit_integer(output_type) && output_type != dtype::float_type)
        fail(error_kind::type_error, op + ": output_type must be float_type, int8 or uint8, got " + to_string(output_type));
    if (residual != residual_kind::none) {
        const shape& r = inputs[residual_input()];
        if (r.lens() != sums.lens()) fail(op + ": the residual must have the result's lens " + to_string(sums.lens()) + ", got " + to_string(r));
        if (residual == residual_kind::real) ops::expect_type(op, r, dtype::float_type, "real residual");
        if (residual == residual_kind::quantized && !is_8bit_integer(r.type()))
            fail(error_kind::type_error, op + ": a quantized residual must be int8 or uint8, got " + to_string(r.type()));
    }
    return {output_type, sums.lens()};
}

void requantize_epilogue::apply(const argument& sums, std::size_t channel_axis, const std::vector<argument>& inputs,
                                const argument& result) const {
    const shape& s = sums.get_shape();
    const auto* acc = sums.data_as<const std::int32_t>();
    const auto* scale = inputs[3].data_as<const float>();
    const float* bias = has_bias ? inputs[4].data_as<const float>() : nullptr;
    const std::vector<double> res = residual == residual_kind::none ? std::vector<double>{} : inputs[residual_input()].to_vector<double>();
    std::size_t inner = 1;
    for (std::size_t d = channel_axis + 1; d < s.ndim(); ++d) inner *= s.lens()[d];
    const std::size_t channels = s.lens()[channel_axis];
    argument out(shape{output_type, s.lens()});
    visit_type(output_type, [&](auto tag) {
        using O = typename decltype(tag)::type;
        if constexpr (std::is_same_v<O, float> || std::is_same_v<O, std::int8_t> || std::is_same_v<O, std::uint8_t>) {
            O* y = out.data_as<O>();
            for (std::size_t i = 0; i < s.elements(); ++i) {
                const std::size_t c = (i / inner) % channels;
                double v = static_cast<double>(acc[i]) * static_cast<double>(scale[c]) + (bias ? bias[c] : 0.0);
                v = apply_chain(activation, v);
                if (round_type != dtype::float_type)
                    v = rounded_value(*this, quantized_code(v, round_scale, round_zero_point, round_type));
                if (residual == residual_kind::real) v += res[i];
                if (residual == residual_kind::quantized)
                    v += (res[i] - static_cast<double>(residual_zero_point)) * residual_scale;
                if constexpr (std::is_same_v<O, float>)
                    y[i] = static_cast<float>(apply_chain(after_residual, v));
                else
                    y[i] = static_cast<O>(output_code(*this, v));
            }
        }
    });
    copy_values(out, result);
}

bool requantize_epilogue::ends_in_code_map() const {
    return round_type != dtype::float_type && residual == residual_kind::none && output_type != dtype::float_type;
}

std::vector<std::uint8_t> requantize_epilogue::code_map() const {
    if (!ends_in_code_map()) fail("code_map: the epilogue must round, add no residual and have an 8-bit result");
    std::vector<std::uint8_t> map(256);
    for (int byte = 0; byte < 256; ++byte) {
        const double code = round_type == dtype::int8_type ? static_cast<std::int8_t>(byte) : byte;
        map[static_cast<std::size_t>(byte)] =
            static_cast<std::uint8_t>(static_cast<std::int64_t>(output_code(*this, rounded_value(*this, code))));
    }
    return map;
}

// ---- fused_quant_convolution ----

shape fused_quant_convolution::compute_shape(const std::vector<shape>& inputs) const {
    if (inputs.size() < 3) fail(name() + ": expected x, w, x zero point, scale and the epilogue's inputs");
    const shape sums = conv.compute_shape({inputs[0], inputs[1], inputs[2]});
    const shape plain = epilogue.check(name(), inputs, sums, 1);
    if (!channels_last) return plain;
    if (plain.ndim() != 4) fail(name() + ": channels_last needs a 4-D result, got " + to_string(plain.lens()));
    return {plain.type(), plain.lens(), channels_last_strides(plain.lens())};
}

void fused_quant_convolution::compute(const argument& result, const std::vector<argument>& inputs) const {
    const std::vector<argument> operands{inputs[0], inputs[1], inputs[2]};
    const shape sums_shape = conv.compute_shape({inputs[0].get_shape(), inputs[1].get_shape(), inputs[2].get_shape()});
    epilogue.apply(operation(conv).evaluate(sums_shape, operands), 1, inputs, result);
}

// ---- fused_quant_dot ----

shape fused_quant_dot::compute_shape(const std::vector<shape>& inputs) const {
    if (inputs.size() < 3) fail(name() + ": expected a, b, a zero point, scale and the epilogue's inputs");
    const shape sums = quant_dot{}.compute_shape({inputs[0], inputs[1], inputs[2]});
    return epilogue.check(name(), inputs, sums, sums.ndim() - 1);
}

void fused_quant_dot::compute(const argument& result, const std::vector<argument>& inputs) const {
    const literal b_zero(shape{inputs[1].get_shape().type(), {}}, std::vector<std::int64_t>{b_zero_point});
    const std::vector<argument> operands{inputs[0], inputs[1], inputs[2], b_zero.get_argument()};
    const shape sums_shape = quant_dot{}.compute_shape({inputs[0].get_shape(), inputs[1].get_shape(), inputs[2].get_shape()});
    epilogue.apply(operation(quant_dot{}).evaluate(sums_shape, operands), sums_shape.ndim() - 1, inputs, result);
}

}  // namespace kiln::op
