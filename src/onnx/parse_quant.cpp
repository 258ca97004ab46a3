// ONNX quantization ops. QuantizeLinear / DequantizeLinear map to IR ops; the
// QOperator ops become the QDQ form or integer ops (see below), so that they
// reach the same int8 kernels as QDQ models. Integer products that do not fit
// the integer ops are decomposed exactly: dot accumulates in int32, and
// convolution runs in double, which holds every sum of 8-bit products.
#include "onnx/onnx_tensor.hpp"
#include "onnx/parse_families.hpp"
#include "ops/op_helpers.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

instruction_ref as_type(const node_context& ctx, instruction_ref x, dtype t) {
    if (x->get_shape().type() == t) return x;
    return ctx.add("convert", {x}, value_map{{"target_type", to_string(t)}});
}

// A per-channel parameter (more than one value) reshaped so that it lines up
// with dimension `axis` of a rank-`rank` tensor; one value broadcasts as is.
instruction_ref along(const node_context& ctx, instruction_ref v, std::size_t rank, std::size_t axis) {
    if (v->get_shape().elements() <= 1) return v;
    std::vector<std::int64_t> dims(rank, 1);
    dims[axis] = -1;
    return ctx.add("reshape", {v}, value_map{{"dims", int_list(dims)}});
}

// q - zero_point in dtype t (q itself when the zero point is absent).
instruction_ref centered(const node_context& ctx, const args_t& args, std::size_t q, std::size_t zp, dtype t,
                         std::size_t rank = 0, std::size_t axis = 0) {
    auto x = as_type(ctx, args[q], t);
    if (!ctx.has_input(args, zp)) return x;
    auto z = as_type(ctx, args[zp], t);
    return ctx.add("sub", {x, rank == 0 ? z : along(ctx, z, rank, axis)});
}

// ONNX's block_size: 0 for per-tensor / per-axis, else the block length along axis.
std::int64_t block_size_of(const node_context& ctx) {
    const std::int64_t block_size = ctx.get_int("block_size", 0);
    if (block_size < 0)
        ctx.fail(error_kind::invalid_argument, "block_size must not be negative, got " + std::to_string(block_size));
    return block_size;
}

args_t parse_quantize_linear(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 3);
    const bool has_zero_point = ctx.has_input(args, 2);
    dtype out = has_zero_point ? args[2]->get_shape().type() : dtype::uint8_type;
    if (ctx.has_attribute("output_dtype") && ctx.get_int("output_dtype", 0) != 0) {
        const dtype wanted = to_dtype(static_cast<std::int32_t>(ctx.get_int("output_dtype", 0)), "output_dtype");
        if (has_zero_point && wanted != out)
            ctx.fail(error_kind::type_error, "output_dtype " + to_string(wanted) +
                                                 " does not match the zero point's dtype " + to_string(out));
        out = wanted;
    }
    // x / scale in `precision` (opset 25) when given, else in x's type. A float8 e8m0 scale converts exactly.
    dtype division = args[0]->get_shape().type();
    if (ctx.get_int("precision", 0) != 0)
        division = to_dtype(static_cast<std::int32_t>(ctx.get_int("precision", 0)), "precision");
    if (!is_floating(division))
        ctx.fail(error_kind::type_error, "the division x / y_scale needs a floating-point type, got " +
                                             to_string(division) + " (set precision)");
    args_t inputs{as_type(ctx, args[0], division), as_type(ctx, args[1], division)};
    if (has_zero_point) inputs.push_back(args[2]);
    return {ctx.add("quantize_linear", inputs,
                    value_map{{"axis", ctx.get_int("axis", 1)},
                              {"output_type", to_string(out)},
                              {"saturate", ctx.get_int("saturate", 1) != 0},
                              {"block_size", block_size_of(ctx)}})};
}

args_t parse_dequantize_linear(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 3);
    // A float8 e8m0 scale (the MX formats') multiplies in float32, as ONNX's reference does.
    auto scale = args[1];
    if (scale->get_shape().type() == dtype::fp8e8m0fnu_type) scale = as_type(ctx, scale, dtype::float_type);
    args_t inputs{args[0], scale};
    if (ctx.has_input(args, 2)) inputs.push_back(args[2]);
    auto y = ctx.add("dequantize_linear", inputs,
                     value_map{{"axis", ctx.get_int("axis", 1)}, {"block_size", block_size_of(ctx)}});
    if (!ctx.has_attribute("output_dtype") || ctx.get_int("output_dtype", 0) == 0) return {y};
    return {as_type(ctx, y, to_dtype(static_cast<std::int32_t>(ctx.get_int("output_dtype", 0)), "output_dtype"))};
}

// uint8 quantization with a scale and zero point chosen from the data's range
// (widened to include 0): scale = (max - min) / 255, or 1/255 when both are 0.
args_t parse_dynamic_quantize_linear(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    const dtype t = args[0]->get_shape().type();
    if (t != dtype::float_type) ctx.fail(error_kind::type_error, "input must be float32, got " + to_string(t));
    auto zero = ctx.add_scalar(t, 0);
    auto all = value_map{{"axes", int_list(std::vector<std::int64_t>{})}, {"keepdims", false}};
    auto hi = ctx.add("max", {ctx.add("reduce_max", {args[0]}, all), zero});
    auto lo = ctx.add("min", {ctx.add("reduce_min", {args[0]}, all), zero});
    auto range = ctx.add("sub", {hi, lo});
    range = ctx.add("where", {ctx.add("equal", {range, zero}), ctx.add_scalar(t, 1), range});
    auto scale = ctx.add("div", {range, ctx.add_scalar(t, 255)});
    // zero point = saturate(round(0 - min / scale)), a quantization of -min
    auto zp = ctx.add("quantize_linear", {ctx.add("neg", {lo}), scale}, value_map{{"output_type", "uint8_type"}});
    auto y = ctx.add("quantize_linear", {args[0], scale, zp});
    return {y, scale, zp};
}

// ---- QOperator ops ----
// QLinearConv / QLinearMatMul import as the QDQ form (dequantize the
// operands, the float op, quantize the result), which fuse_quantized_ops
// turns into quant_convolution / quant_dot and the cpu target into its int8
// kernels, as for a QDQ model. ConvInteger / MatMulInteger with one zero
// point for x and none (or zero) for the weights are quant_convolution /
// quant_dot themselves; other zero points decompose into exact arithmetic.

// dequantize_linear(q, scale[, zero_point]) with per-axis parameters along
// `axis` (scale is converted to float32 when it is float16: the products
// and their sums then round as in the QDQ form's float32).
instruction_ref dequantized(const node_context& ctx, const args_t& args, std::size_t q, std::size_t scale,
                            std::size_t zp, std::int64_t axis) {
    args_t inputs{args[q], as_type(ctx, args[scale], dtype::float_type)};
    if (ctx.has_input(args, zp)) inputs.push_back(args[zp]);
    return ctx.add("dequantize_linear", inputs, value_map{{"axis", axis}});
}

instruction_ref quantized(const node_context& ctx, instruction_ref y, const args_t& args, std::size_t scale,
                          std::size_t zp, dtype fallback) {
    args_t inputs{y, as_type(ctx, args[scale], dtype::float_type)};
    if (ctx.has_input(args, zp)) inputs.push_back(args[zp]);
    return ctx.add("quantize_linear", inputs, value_map{{"output_type", to_string(fallback)}});
}

// Whether input `zp` is absent or a literal of zeros.
bool absent_or_zero(const node_context& ctx, const args_t& args, std::size_t zp) {
    if (!ctx.has_input(args, zp)) return true;
    if (!args[zp]->is_literal()) return false;
    return ops::all_bytes_zero(args[zp]->get_literal().get_argument());
}

bool one_value(const node_context& ctx, const args_t& args, std::size_t zp) {
    return !ctx.has_input(args, zp) || args[zp]->get_shape().elements() == 1;
}

// The quantized ops take their zero point as one value of x's type.
args_t codes_and_zero_point(const node_context& ctx, const args_t& args, std::size_t x, std::size_t w, std::size_t zp) {
    args_t inputs{args[x], args[w]};
    if (ctx.has_input(args, zp))
        inputs.push_back(ctx.add("reshape", {args[zp]}, value_map{{"dims", int_list(std::vector<std::int64_t>{})}}));
    return inputs;
}

args_t parse_matmul_integer(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 4);
    if (one_value(ctx, args, 2) && absent_or_zero(ctx, args, 3) && args[1]->get_shape().type() == dtype::int8_type)
        return {ctx.add("quant_dot", codes_and_zero_point(ctx, args, 0, 1, 2))};
    auto a = centered(ctx, args, 0, 2, dtype::int32_type, 2, 0);  // a zero point per row of A
    auto b = centered(ctx, args, 1, 3, dtype::int32_type);
    return {ctx.add("dot", {a, b})};
}

// a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp: per-row scales of a,
// per-column scales of b.
args_t parse_qlinear_matmul(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 8, 8);
    const auto rank_a = static_cast<std::int64_t>(args[0]->get_shape().ndim());
    const auto rank_b = static_cast<std::int64_t>(args[3]->get_shape().ndim());
    auto a = dequantized(ctx, args, 0, 1, 2, std::max<std::int64_t>(rank_a - 2, 0));
    auto b = dequantized(ctx, args, 3, 4, 5, rank_b - 1);
    return {quantized(ctx, ctx.add("dot", {a, b}), args, 6, 7, args[0]->get_shape().type())};
}

// The Conv parser (same attributes) on the given operands.
instruction_ref integer_conv(const node_context& ctx, instruction_ref x, instruction_ref w) {
    return get_parsers().at("Conv")(ctx, {x, w}).at(0);
}

args_t parse_conv_integer(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 4);
    const std::size_t rank = args[1]->get_shape().ndim();
    if (one_value(ctx, args, 2) && absent_or_zero(ctx, args, 3) && args[1]->get_shape().type() == dtype::int8_type) {
        // The Conv parser resolves the geometry (auto_pad and all) on a float view, which then dies.
        auto geometry = integer_conv(ctx, as_type(ctx, args[0], dtype::float_type), as_type(ctx, args[1], dtype::float_type));
        if (geometry->name() == "convolution")
            return {ctx.add("quant_convolution", codes_and_zero_point(ctx, args, 0, 1, 2),
                            geometry->get_operator().attributes())};
    }
    auto x = centered(ctx, args, 0, 2, dtype::double_type);
    auto w = centered(ctx, args, 1, 3, dtype::double_type, rank, 0);  // a zero point per output channel
    return {as_type(ctx, integer_conv(ctx, x, w), dtype::int32_type)};
}

// x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp[, B (int32, scale x_scale * w_scale)]
args_t parse_qlinear_conv(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 8, 9);
    auto x = dequantized(ctx, args, 0, 1, 2, 1);
    auto w = dequantized(ctx, args, 3, 4, 5, 0);
    args_t conv_inputs{x, w};
    if (ctx.has_input(args, 8)) {
        auto bias_scale = ctx.add("mul", {as_type(ctx, args[1], dtype::float_type), as_type(ctx, args[4], dtype::float_type)});
        conv_inputs.push_back(ctx.add("dequantize_linear", {args[8], bias_scale}, value_map{{"axis", 0}}));
    }
    auto y = get_parsers().at("Conv")(ctx, conv_inputs).at(0);
    return {quantized(ctx, y, args, 6, 7, args[0]->get_shape().type())};
}

}  // namespace

void add_quant_parsers(parser_table& table) {
    table["QuantizeLinear"] = parse_quantize_linear;
    table["DequantizeLinear"] = parse_dequantize_linear;
    table["DynamicQuantizeLinear"] = parse_dynamic_quantize_linear;
    table["MatMulInteger"] = parse_matmul_integer;
    table["QLinearMatMul"] = parse_qlinear_matmul;
    table["ConvInteger"] = parse_conv_integer;
    table["QLinearConv"] = parse_qlinear_conv;
}

}  // namespace kiln::onnx_import
