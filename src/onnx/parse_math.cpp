// ONNX math ops added beside the core elementwise set: trigonometric and
// hyperbolic functions, bitwise ops, activations composed from elementwise
// ops (Celu, Shrink, Mish), IsNaN / IsInf, CastLike and Hardmax.
#include <limits>

#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

dtype type_of(instruction_ref x) {
    return x->get_shape().type();
}

parse_function same_arity(std::string op, std::size_t arity) {
    return [op, arity](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, arity, arity);
        return {ctx.add(op, args)};
    };
}

args_t parse_bitshift(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    std::string direction = ctx.get_string("direction", "");
    if (direction == "LEFT")
        direction = "left";
    else if (direction == "RIGHT")
        direction = "right";
    else
        ctx.fail(error_kind::invalid_argument, "direction must be \"LEFT\" or \"RIGHT\", not \"" + direction + "\"");
    return {ctx.add("bitshift", args, value_map{{"direction", direction}})};
}

// max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
args_t parse_celu(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto x = args[0];
    const dtype t = type_of(x);
    const double alpha = ctx.get_float("alpha", 1.0);
    auto zero = ctx.add_scalar(t, 0);
    auto e = ctx.add("exp", {ctx.add("div", {x, ctx.add_scalar(t, alpha)})});
    auto negative = ctx.add("mul", {ctx.add("sub", {e, ctx.add_scalar(t, 1)}), ctx.add_scalar(t, alpha)});
    return {ctx.add("add", {ctx.add("max", {x, zero}), ctx.add("min", {negative, zero})})};
}

// x + bias below -lambd, x - bias above lambd, 0 between.
args_t parse_shrink(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto x = args[0];
    const dtype t = type_of(x);
    const double lambd = ctx.get_float("lambd", 0.5);
    const double bias = ctx.get_float("bias", 0.0);
    auto below = ctx.add("less", {x, ctx.add_scalar(t, -lambd)});
    auto above = ctx.add("greater", {x, ctx.add_scalar(t, lambd)});
    auto inner = ctx.add("where", {above, ctx.add("sub", {x, ctx.add_scalar(t, bias)}), ctx.add_scalar(t, 0)});
    return {ctx.add("where", {below, ctx.add("add", {x, ctx.add_scalar(t, bias)}), inner})};
}

// x * tanh(log(1 + exp(x))); exp overflowing to inf still gives tanh(inf) = 1.
args_t parse_mish(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto x = args[0];
    auto softplus = ctx.add("log", {ctx.add("add", {ctx.add("exp", {x}), ctx.add_scalar(type_of(x), 1)})});
    return {ctx.add("mul", {x, ctx.add("tanh", {softplus})})};
}

args_t parse_isnan(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    return {ctx.add("not", {ctx.add("equal", {args[0], args[0]})})};
}

args_t parse_isinf(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto x = args[0];
    const double inf = std::numeric_limits<double>::infinity();
    const bool positive = ctx.get_int("detect_positive", 1) != 0;
    const bool negative = ctx.get_int("detect_negative", 1) != 0;
    auto is_pos = ctx.add("equal", {x, ctx.add_scalar(type_of(x), inf)});
    auto is_neg = ctx.add("equal", {x, ctx.add_scalar(type_of(x), -inf)});
    if (positive && negative) return {ctx.add("or", {is_pos, is_neg})};
    if (positive) return {is_pos};
    if (negative) return {is_neg};
    return {ctx.add("and", {is_pos, is_neg})};  // never both: all false
}

args_t parse_cast_like(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    return {ctx.add("convert", {args[0]}, cast_attributes(ctx, type_of(args[1])))};
}

// 1 where x is the first maximum along `axis`, else 0: argmax compared with
// the positions along the axis.
instruction_ref hardmax_along(const node_context& ctx, instruction_ref x, std::int64_t axis) {
    const auto& lens = x->get_shape().lens();
    const std::size_t a = static_cast<std::size_t>(axis < 0 ? axis + static_cast<std::int64_t>(lens.size()) : axis);
    if (a >= lens.size()) ctx.fail(error_kind::invalid_argument, "axis " + std::to_string(axis) + " is out of range");
    std::vector<std::size_t> position_lens(lens.size(), 1);
    position_lens[a] = lens[a];
    std::vector<std::int64_t> positions(lens[a]);
    for (std::size_t i = 0; i < lens[a]; ++i) positions[i] = static_cast<std::int64_t>(i);
    auto index = ctx.add_literal(literal(shape{dtype::int64_type, position_lens}, positions));
    auto best = ctx.add("argmax", {x}, value_map{{"axis", static_cast<std::int64_t>(a)}, {"keepdims", true}});
    auto hit = ctx.add("equal", {index, best});
    return ctx.add("convert", {hit}, value_map{{"target_type", to_string(type_of(x))}});
}

// Before opset 13 Hardmax works on the input flattened to 2-D at `axis`.
args_t parse_hardmax(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto x = args[0];
    if (ctx.opset() >= 13) return {hardmax_along(ctx, x, ctx.get_int("axis", -1))};
    auto flat = ctx.add("flatten", {x}, value_map{{"axis", ctx.get_int("axis", 1)}});
    auto y = hardmax_along(ctx, flat, 1);
    return {ctx.add("reshape", {y}, value_map{{"dims", int_list(x->get_shape().lens())}})};
}

}  // namespace

void add_math_parsers(parser_table& table) {
    const std::pair<const char*, const char*> unary_ops[] = {
        {"Tan", "tan"},   {"Asin", "asin"},   {"Acos", "acos"},   {"Atan", "atan"},   {"Sinh", "sinh"},
        {"Cosh", "cosh"}, {"Asinh", "asinh"}, {"Acosh", "acosh"}, {"Atanh", "atanh"}, {"BitwiseNot", "bitwise_not"},
    };
    for (const auto& [onnx_name, kiln_name] : unary_ops) table[onnx_name] = same_arity(kiln_name, 1);
    table["BitwiseAnd"] = same_arity("bitwise_and", 2);
    table["BitwiseOr"] = same_arity("bitwise_or", 2);
    table["BitwiseXor"] = same_arity("bitwise_xor", 2);
    table["BitShift"] = parse_bitshift;
    table["Celu"] = parse_celu;
    table["Shrink"] = parse_shrink;
    table["Mish"] = parse_mish;
    table["IsNaN"] = parse_isnan;
    table["IsInf"] = parse_isinf;
    table["CastLike"] = parse_cast_like;
    table["Hardmax"] = parse_hardmax;
}

}  // namespace kiln::onnx_import
