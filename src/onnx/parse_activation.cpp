// ONNX activations that Kiln composes from elementwise ops; fusion passes
// see through the composition, so no dedicated ops are needed.
#include <cmath>
#include <numbers>

#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

dtype type_of(instruction_ref x) { return x->get_shape().type(); }

// where(x < 0, negative_part, x)
instruction_ref select_negative(const node_context& ctx, instruction_ref x, instruction_ref negative_part) {
    auto is_negative = ctx.add("less", {x, ctx.add_scalar(type_of(x), 0)});
    return ctx.add("where", {is_negative, negative_part, x});
}

args_t parse_leaky_relu(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto x = args[0];
    auto alpha = ctx.add_scalar(type_of(x), ctx.get_float("alpha", 0.01));
    return {select_negative(ctx, x, ctx.add("mul", {x, alpha}))};
}

args_t parse_prelu(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    auto slope = args[1];
    // Before opset 7 a 1-D slope holds one value per channel (axis 1), not a numpy-broadcast row.
    const auto& x_lens = args[0]->get_shape().lens();
    const auto& slope_lens = slope->get_shape().lens();
    if (ctx.opset() < 7 && x_lens.size() > 2 && slope_lens.size() == 1 && slope_lens[0] == x_lens[1] &&
        slope_lens[0] != 1) {
        std::vector<std::int64_t> dims(x_lens.size() - 1, 1);
        dims[0] = static_cast<std::int64_t>(slope_lens[0]);
        slope = ctx.add("reshape", {slope}, value_map{{"dims", int_list(dims)}});
    }
    return {select_negative(ctx, args[0], ctx.add("mul", {args[0], slope}))};
}

// alpha * (exp(x) - 1)
instruction_ref exp_minus_one(const node_context& ctx, instruction_ref x, double alpha) {
    auto t = type_of(x);
    auto em1 = ctx.add("sub", {ctx.add("exp", {x}), ctx.add_scalar(t, 1)});
    return ctx.add("mul", {em1, ctx.add_scalar(t, alpha)});
}

args_t parse_elu(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    return {select_negative(ctx, args[0], exp_minus_one(ctx, args[0], ctx.get_float("alpha", 1.0)))};
}

args_t parse_selu(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    // Defaults from the ONNX operator specification.
    double alpha = ctx.get_float("alpha", 1.67326319217681884765625);
    double gamma = ctx.get_float("gamma", 1.05070102214813232421875);
    auto x = args[0];
    auto elu = select_negative(ctx, x, exp_minus_one(ctx, x, alpha));
    return {ctx.add("mul", {elu, ctx.add_scalar(type_of(x), gamma)})};
}

// clip(alpha * x + beta, 0, 1)
instruction_ref hard_sigmoid(const node_context& ctx, instruction_ref x, double alpha, double beta) {
    auto t = type_of(x);
    auto lin = ctx.add("add", {ctx.add("mul", {x, ctx.add_scalar(t, alpha)}), ctx.add_scalar(t, beta)});
    return ctx.add("clip", {lin, ctx.add_scalar(t, 0), ctx.add_scalar(t, 1)});
}

args_t parse_hard_sigmoid(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    return {hard_sigmoid(ctx, args[0], ctx.get_float("alpha", 0.2), ctx.get_float("beta", 0.5))};
}

args_t parse_hard_swish(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    return {ctx.add("mul", {args[0], hard_sigmoid(ctx, args[0], 1.0 / 6.0, 0.5)})};
}

args_t parse_softplus(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto x = args[0];
    return {ctx.add("log", {ctx.add("add", {ctx.add("exp", {x}), ctx.add_scalar(type_of(x), 1)})})};
}

args_t parse_softsign(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto x = args[0];
    auto denom = ctx.add("add", {ctx.add("abs", {x}), ctx.add_scalar(type_of(x), 1)});
    return {ctx.add("div", {x, denom})};
}

args_t parse_thresholded_relu(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto x = args[0];
    auto above = ctx.add("greater", {x, ctx.add_scalar(type_of(x), ctx.get_float("alpha", 1.0))});
    return {ctx.add("where", {above, x, ctx.add_scalar(type_of(x), 0)})};
}

// 0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation when asked.
args_t parse_gelu(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto x = args[0];
    auto t = type_of(x);
    std::string approximate = ctx.get_string("approximate", "none");
    instruction_ref inner;
    if (approximate == "none") {
        inner = ctx.add("erf", {ctx.add("mul", {x, ctx.add_scalar(t, 1.0 / std::numbers::sqrt2)})});
    } else if (approximate == "tanh") {
        auto cube = ctx.add("mul", {ctx.add("mul", {x, x}), x});
        auto poly = ctx.add("add", {x, ctx.add("mul", {cube, ctx.add_scalar(t, 0.044715)})});
        auto scaled = ctx.add("mul", {poly, ctx.add_scalar(t, std::sqrt(2.0 / std::numbers::pi))});
        inner = ctx.add("tanh", {scaled});
    } else {
        ctx.fail(error_kind::invalid_argument, "approximate must be \"none\" or \"tanh\", not \"" + approximate + "\"");
    }
    auto one_plus = ctx.add("add", {inner, ctx.add_scalar(t, 1)});
    return {ctx.add("mul", {ctx.add("mul", {x, one_plus}), ctx.add_scalar(t, 0.5)})};
}

}  // namespace

void add_activation_parsers(parser_table& table) {
    table["LeakyRelu"] = parse_leaky_relu;
    table["PRelu"] = parse_prelu;
    table["Elu"] = parse_elu;
    table["Selu"] = parse_selu;
    table["HardSigmoid"] = parse_hard_sigmoid;
    table["HardSwish"] = parse_hard_swish;
    table["Softplus"] = parse_softplus;
    table["Softsign"] = parse_softsign;
    table["ThresholdedRelu"] = parse_thresholded_relu;
    table["Gelu"] = parse_gelu;
}

}  // namespace kiln::onnx_import
