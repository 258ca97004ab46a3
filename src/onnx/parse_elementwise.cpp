// ONNX elementwise ops. Kiln's binary ops broadcast like numpy, which is
// ONNX's multidirectional broadcasting (opset 7 on), so most map one to one.
#include <limits>

#include "onnx/onnx_tensor.hpp"
#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

parse_function unary(std::string op) {
    return [op](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, 1, 1);
        return {ctx.add(op, {args[0]})};
    };
}

parse_function binary(std::string op) {
    return [op](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, 2, 2);
        return {ctx.add(op, {args[0], args[1]})};
    };
}

// LessOrEqual and GreaterOrEqual: the negation of the strict opposite.
parse_function negated_binary(std::string op) {
    return [op](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, 2, 2);
        return {ctx.add("not", {ctx.add(op, {args[0], args[1]})})};
    };
}

// Max, Min, Sum take any number of inputs: a chain of binary ops.
parse_function variadic(std::string op) {
    return [op](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, 1, std::numeric_limits<std::size_t>::max());
        auto result = args[0];
        for (std::size_t i = 1; i < args.size(); ++i) result = ctx.add(op, {result, args[i]});
        return {result};
    };
}

args_t parse_mean(const node_context& ctx, const args_t& args) {
    auto sum = variadic("add")(ctx, args)[0];
    if (args.size() == 1) return {sum};
    auto count = ctx.add_scalar(sum->get_shape().type(), static_cast<double>(args.size()));
    return {ctx.add("div", {sum, count})};
}

// Since opset 12 the exponent may have another dtype than the base.
args_t parse_pow(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    auto base_type = args[0]->get_shape().type();
    auto exponent = args[1];
    if (exponent->get_shape().type() != base_type)
        exponent = ctx.add("convert", {exponent}, value_map{{"target_type", to_string(base_type)}});
    return {ctx.add("pow", {args[0], exponent})};
}

args_t parse_mod(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    bool fmod = ctx.get_int("fmod", 0) != 0;
    // Opset 28 defines fmod=0 for floating point (the result takes the divisor's sign); before, it was invalid.
    if (!fmod && is_floating(args[0]->get_shape().type()) && ctx.opset() < 28)
        ctx.fail(error_kind::invalid_argument, "fmod must be 1 for floating-point inputs before opset 28");
    return {ctx.add("mod", {args[0], args[1]}, value_map{{"fmod", fmod}})};
}

}  // namespace

// `saturate` and `round_mode` apply to float8 results only; the IR's convert carries them for any target.
value_map cast_attributes(const node_context& ctx, dtype target) {
    const std::string round_mode = ctx.get_string("round_mode", "up");
    if (round_mode != "up" && round_mode != "down" && round_mode != "nearest")
        ctx.fail(error_kind::invalid_argument, "round_mode must be up, down or nearest, got '" + round_mode + "'");
    return value_map{{"target_type", to_string(target)},
                     {"saturate", ctx.get_int("saturate", 1) != 0},
                     {"round_mode", round_mode}};
}

namespace {

args_t parse_cast(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    if (!ctx.has_attribute("to")) ctx.fail(error_kind::invalid_argument, "required attribute 'to' is missing");
    dtype target = to_dtype(static_cast<std::int32_t>(ctx.get_int("to", 0)), "attribute 'to'");
    return {ctx.add("convert", {args[0]}, cast_attributes(ctx, target))};
}

// The lowest or highest value of dtype t, as a rank-0 literal.
instruction_ref type_limit(const node_context& ctx, dtype t, bool lowest) {
    return visit_type(t, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (is_float_like_v<T>) {
            float inf = std::numeric_limits<float>::infinity();
            return ctx.add_literal(literal(shape{t}, std::vector<float>{lowest ? -inf : inf}));
        } else {
            T v = lowest ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
            return ctx.add_literal(literal(shape{t}, std::vector<T>{v}));
        }
    });
}

// Bounds are attributes before opset 11 and optional inputs from then on.
args_t parse_clip(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, ctx.opset() < 11 ? 1 : 3);
    const dtype t = args[0]->get_shape().type();
    instruction_ref lo;
    instruction_ref hi;
    if (ctx.opset() < 11) {
        lo = ctx.has_attribute("min") ? ctx.add_scalar(t, ctx.get_float("min", 0)) : type_limit(ctx, t, true);
        hi = ctx.has_attribute("max") ? ctx.add_scalar(t, ctx.get_float("max", 0)) : type_limit(ctx, t, false);
    } else {
        lo = ctx.has_input(args, 1) ? args[1] : type_limit(ctx, t, true);
        hi = ctx.has_input(args, 2) ? args[2] : type_limit(ctx, t, false);
    }
    return {ctx.add("clip", {args[0], lo, hi})};
}

args_t parse_where(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 3);
    return {ctx.add("where", {args[0], args[1], args[2]})};
}

}  // namespace

void add_elementwise_parsers(parser_table& table) {
    const std::pair<const char*, const char*> unary_ops[] = {
        {"Abs", "abs"},   {"Neg", "neg"},     {"Exp", "exp"},     {"Log", "log"},         {"Sqrt", "sqrt"},
        {"Sin", "sin"},   {"Cos", "cos"},     {"Tanh", "tanh"},   {"Sigmoid", "sigmoid"}, {"Relu", "relu"},
        {"Erf", "erf"},   {"Floor", "floor"}, {"Ceil", "ceil"},   {"Round", "round"},     {"Sign", "sign"},
        {"Not", "not"},   {"Reciprocal", "reciprocal"},
    };
    for (const auto& [onnx_name, kiln_name] : unary_ops) table[onnx_name] = unary(kiln_name);
    const std::pair<const char*, const char*> binary_ops[] = {
        {"Add", "add"},     {"Sub", "sub"},   {"Mul", "mul"}, {"Div", "div"}, {"Equal", "equal"},
        {"Less", "less"},   {"Greater", "greater"},           {"And", "and"}, {"Or", "or"},
        {"Xor", "xor"},
    };
    for (const auto& [onnx_name, kiln_name] : binary_ops) table[onnx_name] = binary(kiln_name);
    table["LessOrEqual"] = negated_binary("greater");
    table["GreaterOrEqual"] = negated_binary("less");
    table["Max"] = variadic("max");
    table["Min"] = variadic("min");
    table["Sum"] = variadic("add");
    table["Mean"] = parse_mean;
    table["Pow"] = parse_pow;
    table["Mod"] = parse_mod;
    table["Cast"] = parse_cast;
    table["Clip"] = parse_clip;
    table["Where"] = parse_where;
}

}  // namespace kiln::onnx_import
