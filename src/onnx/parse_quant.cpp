// ONNX quantization ops. QuantizeLinear / DequantizeLinear map to IR ops; the
// integer and QLinear ops are decomposed into convert / sub / dot /
// convolution / mul and a final quantize_linear, so no new kernels are needed.
// Integer products are exact: dot accumulates in int32, and convolution runs
// in double, which holds every sum of 8-bit products exactly.
#include "onnx/onnx_tensor.hpp"
#include "onnx/parse_families.hpp"

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
    args_t inputs{args[0], as_type(ctx, args[1], args[0]->get_shape().type())};
    if (has_zero_point) inputs.push_back(args[2]);
    return {ctx.add("quantize_linear", inputs,
                    value_map{{"axis", ctx.get_int("axis", 1)},
                              {"output_type", to_string(out)},
                              {"saturate", ctx.get_int("saturate", 1) != 0},
                              {"block_size", block_size_of(ctx)}})};
}

args_t parse_dequantize_linear(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 3);
    args_t inputs{args[0], args[1]};
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

// Rounds an exact double accumulator into y's quantized type: rint(acc) +
// zero point, saturated (quantize_linear with a scale of 1).
instruction_ref requantize(const node_context& ctx, instruction_ref acc, const args_t& args, std::size_t y_zp,
                           dtype fallback) {
    args_t inputs{acc, ctx.add_scalar(dtype::double_type, 1)};
    if (ctx.has_input(args, y_zp)) inputs.push_back(args[y_zp]);
    return ctx.add("quantize_linear", inputs, value_map{{"output_type", to_string(fallback)}});
}

// a_scale * b_scale / y_scale in the scales' dtype, then widened to double
// (as the ONNX reference multiplies its int32 accumulator).
instruction_ref multiplier(const node_context& ctx, instruction_ref a_scale, instruction_ref b_scale,
                           instruction_ref y_scale) {
    auto m = ctx.add("div", {ctx.add("mul", {a_scale, b_scale}), y_scale});
    return as_type(ctx, m, dtype::double_type);
}

args_t parse_matmul_integer(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 4);
    auto a = centered(ctx, args, 0, 2, dtype::int32_type, 2, 0);  // a zero point per row of A
    auto b = centered(ctx, args, 1, 3, dtype::int32_type);
    return {ctx.add("dot", {a, b})};
}

// a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp
args_t parse_qlinear_matmul(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 8, 8);
    auto a = centered(ctx, args, 0, 2, dtype::int32_type, 2, 0);
    auto b = centered(ctx, args, 3, 5, dtype::int32_type);
    auto acc = as_type(ctx, ctx.add("dot", {a, b}), dtype::double_type);
    auto m = multiplier(ctx, along(ctx, args[1], 2, 0), args[4], args[6]);
    return {requantize(ctx, ctx.add("mul", {acc, m}), args, 7, args[0]->get_shape().type())};
}

// The Conv parser (same attributes) on double operands.
instruction_ref integer_conv(const node_context& ctx, instruction_ref x, instruction_ref w) {
    return get_parsers().at("Conv")(ctx, {x, w}).at(0);
}

args_t parse_conv_integer(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 4);
    const std::size_t rank = args[1]->get_shape().ndim();
    auto x = centered(ctx, args, 0, 2, dtype::double_type);
    auto w = centered(ctx, args, 1, 3, dtype::double_type, rank, 0);  // a zero point per output channel
    return {as_type(ctx, integer_conv(ctx, x, w), dtype::int32_type)};
}

// x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp[, B (int32)]
args_t parse_qlinear_conv(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 8, 9);
    const std::size_t rank = args[3]->get_shape().ndim();
    auto x = centered(ctx, args, 0, 2, dtype::double_type);
    auto w = centered(ctx, args, 3, 5, dtype::double_type, rank, 0);
    auto acc = integer_conv(ctx, x, w);
    if (ctx.has_input(args, 8))
        acc = ctx.add("add", {acc, along(ctx, as_type(ctx, args[8], dtype::double_type), rank - 1, 0)});
    // Per-channel scales line up with the output's channel dim.
    auto m = multiplier(ctx, args[1], along(ctx, args[4], rank - 1, 0), args[6]);
    return {requantize(ctx, ctx.add("mul", {acc, m}), args, 7, args[0]->get_shape().type())};
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
