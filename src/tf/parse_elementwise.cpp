// Elementwise TensorFlow ops: arithmetic (numpy broadcasting, as Kiln's binary
// ops do), activations, Softmax and Cast.
#include <cmath>

#include "tf/tf_parser.hpp"

namespace kiln::tf_import {

namespace {

parse_function unary(std::string op) {
    return [op](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, 1, 1);
        return {ctx.pointwise(op, {args[0]})};
    };
}

parse_function binary(std::string op) {
    return [op](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, 2, 2);
        return {ctx.pointwise(op, {args[0], args[1]})};
    };
}

dtype type_of(instruction_ref x) {
    return x->get_shape().type();
}

args_t parse_relu6(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    dtype t = type_of(args[0]);
    return {ctx.pointwise("clip", {args[0], ctx.add_scalar(t, 0.0), ctx.add_scalar(t, 6.0)})};
}

// alpha * (exp(x) - 1) where x < 0, else x (then scaled, for Selu).
instruction_ref elu(const node_context& ctx, instruction_ref x, double alpha, double scale) {
    dtype t = type_of(x);
    auto zero = ctx.add_scalar(t, 0.0);
    auto negative =
        ctx.add("mul", {ctx.add("sub", {ctx.add("exp", {x}), ctx.add_scalar(t, 1.0)}), ctx.add_scalar(t, alpha)});
    auto y = ctx.add("where", {ctx.add("greater", {x, zero}), x, negative});
    return scale == 1.0 ? y : ctx.add("mul", {y, ctx.add_scalar(t, scale)});
}

args_t parse_elu(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    return {elu(ctx, args[0], 1.0, 1.0)};
}

args_t parse_selu(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    // TensorFlow's constants (tf.nn.selu).
    return {elu(ctx, args[0], 1.6732632423543772848170429916717, 1.0507009873554804934193349852946)};
}

args_t parse_square(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    return {ctx.add("mul", {args[0], args[0]})};
}

// Erfc(x) = 1 - erf(x) (Keras's exact Gelu is 0.5 * x * erfc(-x / sqrt(2))).
args_t parse_erfc(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto one = ctx.add_scalar(args[0]->get_shape().type(), 1.0);
    return {ctx.pointwise("sub", {one, ctx.add("erf", {args[0]})})};
}

args_t parse_squared_difference(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    auto d = ctx.add("sub", {args[0], args[1]});
    return {ctx.add("mul", {d, d})};
}

parse_function softmax(std::string op) {
    return [op](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, 1, 1);
        return {ctx.add(op, {args[0]}, value_map{{"axis", std::int64_t{-1}}})};
    };
}

args_t parse_cast(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    dtype to = ctx.get_type("DstT");
    if (type_of(args[0]) == to) return {args[0]};
    return {ctx.add("convert", {args[0]}, value_map{{"target_type", to_string(to)}})};
}

}  // namespace

void add_elementwise_parsers(parser_table& table) {
    for (auto [tf_name, op] : std::initializer_list<std::pair<const char*, const char*>>{{"Relu", "relu"},
                                                                                         {"Sigmoid", "sigmoid"},
                                                                                         {"Tanh", "tanh"},
                                                                                         {"Rsqrt", "rsqrt"},
                                                                                         {"Sqrt", "sqrt"},
                                                                                         {"Exp", "exp"},
                                                                                         {"Log", "log"},
                                                                                         {"Neg", "neg"},
                                                                                         {"Abs", "abs"},
                                                                                         {"Erf", "erf"},
                                                                                         {"Reciprocal", "reciprocal"},
                                                                                         {"Floor", "floor"},
                                                                                         {"Ceil", "ceil"}})
        table[tf_name] = unary(op);
    for (auto [tf_name, op] : std::initializer_list<std::pair<const char*, const char*>>{{"Add", "add"},
                                                                                         {"AddV2", "add"},
                                                                                         {"Sub", "sub"},
                                                                                         {"Mul", "mul"},
                                                                                         {"RealDiv", "div"},
                                                                                         {"Maximum", "max"},
                                                                                         {"Minimum", "min"},
                                                                                         {"Pow", "pow"}})
        table[tf_name] = binary(op);
    table["Relu6"] = parse_relu6;
    table["Elu"] = parse_elu;
    table["Selu"] = parse_selu;
    table["Square"] = parse_square;
    table["Erfc"] = parse_erfc;
    table["SquaredDifference"] = parse_squared_difference;
    table["Softmax"] = softmax("softmax");
    table["LogSoftmax"] = softmax("log_softmax");
    table["Cast"] = parse_cast;
}

}  // namespace kiln::tf_import
