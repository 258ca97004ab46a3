// ONNX normalizations beyond BatchNormalization: LayerNormalization maps to
// layer_norm; Instance/Group normalization reshape so that the normalized
// dims trail and reuse it; MeanVarianceNormalization, LpNormalization and
// LRN are compositions of reductions and elementwise ops.
#include <cmath>

#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

dtype type_of(instruction_ref x) {
    return x->get_shape().type();
}
const std::vector<std::size_t>& lens_of(instruction_ref x) {
    return x->get_shape().lens();
}

void expect_channels_first(const node_context& ctx, instruction_ref x, std::size_t min_rank) {
    if (lens_of(x).size() < min_rank)
        ctx.fail(error_kind::invalid_argument, "input must be [N, C, ...] with rank at least " +
                                                   std::to_string(min_rank) + ", got " + to_string(lens_of(x)));
}

// A per-channel vector [C] reshaped to [C, 1, ...] so it broadcasts over [N, C, spatial...].
instruction_ref per_channel(const node_context& ctx, instruction_ref v, std::size_t rank) {
    std::vector<std::int64_t> dims{-1};
    dims.insert(dims.end(), rank - 2, 1);
    return ctx.add("reshape", {v}, value_map{{"dims", int_list(dims)}});
}

instruction_ref scale_and_shift(const node_context& ctx, instruction_ref y, instruction_ref scale,
                                instruction_ref bias) {
    const std::size_t rank = lens_of(y).size();
    y = ctx.add("mul", {y, per_channel(ctx, scale, rank)});
    return ctx.add("add", {y, per_channel(ctx, bias, rank)});
}

bool output_used(const node_context& ctx, int i) {
    return ctx.node().output_size() > i && !ctx.node().output(i).empty();
}

// The optional Mean and InvStdDev outputs, in the stash type (float32 by
// default), recomputed with reductions; only added when the node names them.
args_t layer_norm_statistics(const node_context& ctx, instruction_ref x, std::int64_t axis, double epsilon) {
    const auto rank = static_cast<std::int64_t>(lens_of(x).size());
    if (axis < -rank || axis >= rank)
        ctx.fail(error_kind::invalid_argument,
                 "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    std::vector<std::int64_t> axes;
    for (std::int64_t a = axis < 0 ? axis + rank : axis; a < rank; ++a) axes.push_back(a);
    const std::int64_t stash = ctx.get_int("stash_type", 1);
    if (stash != 1 && stash != 11)
        ctx.fail(error_kind::invalid_argument, "stash_type must be 1 (float) or 11 (double)");
    const dtype t = stash == 1 ? dtype::float_type : dtype::double_type;
    if (type_of(x) != t) x = ctx.add("convert", {x}, value_map{{"target_type", to_string(t)}});
    value_map reduce{{"axes", int_list(axes)}, {"keepdims", true}};
    auto mean = ctx.add("reduce_mean", {x}, reduce);
    auto centered = ctx.add("sub", {x, mean});
    auto variance = ctx.add("reduce_mean", {ctx.add("mul", {centered, centered})}, reduce);
    return {mean, ctx.add("rsqrt", {ctx.add("add", {variance, ctx.add_scalar(t, epsilon)})})};
}

args_t parse_layer_norm(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 3);
    value_map attrs{{"axis", ctx.get_int("axis", -1)}, {"epsilon", ctx.get_float("epsilon", 1e-5)}};
    args_t inputs{args[0]};
    const bool has_scale = ctx.has_input(args, 1);
    const bool has_bias = ctx.has_input(args, 2);
    if (has_scale) inputs.push_back(args[1]);
    // layer_norm takes bias only after scale: a missing scale with a bias becomes a bias-only add.
    if (has_bias && has_scale) inputs.push_back(args[2]);
    auto y = ctx.add("layer_norm", inputs, attrs);
    if (has_bias && !has_scale) y = ctx.add("add", {y, args[2]});
    if (!output_used(ctx, 1) && !output_used(ctx, 2)) return {y};
    auto stats = layer_norm_statistics(ctx, args[0], ctx.get_int("axis", -1), ctx.get_float("epsilon", 1e-5));
    return {y, stats[0], stats[1]};
}

args_t parse_instance_norm(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 3);
    expect_channels_first(ctx, args[0], 3);
    value_map attrs{{"axis", std::int64_t{2}}, {"epsilon", ctx.get_float("epsilon", 1e-5)}};
    auto y = ctx.add("layer_norm", {args[0]}, attrs);
    return {scale_and_shift(ctx, y, args[1], args[2])};
}

// Opset 18 gives scale and bias per group, 21 per channel; a [G] vector is
// repeated C / G times to become per channel.
instruction_ref channel_params(const node_context& ctx, instruction_ref v, std::size_t groups, std::size_t channels) {
    const std::size_t n = v->get_shape().elements();
    if (n == channels) return v;
    if (n != groups)
        ctx.fail(error_kind::invalid_argument, "scale and bias must have " + std::to_string(channels) +
                                                   " (channels) or " + std::to_string(groups) +
                                                   " (groups) elements, got " + std::to_string(n));
    auto column = ctx.add(
        "reshape", {v}, value_map{{"dims", int_list(std::vector<std::int64_t>{static_cast<std::int64_t>(groups), 1})}});
    auto tiled = ctx.add("broadcast", {column},
                         value_map{{"out_lens", int_list(std::vector<std::size_t>{groups, channels / groups})}});
    return ctx.add("reshape", {tiled}, value_map{{"dims", int_list(std::vector<std::int64_t>{-1})}});
}

args_t parse_group_norm(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 3);
    expect_channels_first(ctx, args[0], 3);
    const auto& lens = lens_of(args[0]);
    const std::int64_t groups = ctx.get_int("num_groups", 0);
    const auto channels = static_cast<std::int64_t>(lens[1]);
    if (groups <= 0 || channels % groups != 0)
        ctx.fail(error_kind::invalid_argument, "num_groups " + std::to_string(groups) +
                                                   " must be positive and divide the channel count " +
                                                   std::to_string(channels));
    auto grouped = ctx.add(
        "reshape", {args[0]},
        value_map{{"dims", int_list(std::vector<std::int64_t>{static_cast<std::int64_t>(lens[0]), groups, -1})}});
    auto normalized = ctx.add("layer_norm", {grouped},
                              value_map{{"axis", std::int64_t{2}}, {"epsilon", ctx.get_float("epsilon", 1e-5)}});
    auto y = ctx.add("reshape", {normalized}, value_map{{"dims", int_list(lens)}});
    auto g = static_cast<std::size_t>(groups);
    auto c = static_cast<std::size_t>(channels);
    return {scale_and_shift(ctx, y, channel_params(ctx, args[1], g, c), channel_params(ctx, args[2], g, c))};
}

// (x - mean) / (sqrt(variance) + 1e-9) over `axes`, the ONNX function's epsilon.
args_t parse_mean_variance_norm(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto x = args[0];
    value_map reduce{{"axes", int_list(ctx.get_ints("axes", {0, 2, 3}))}, {"keepdims", true}};
    auto centered = ctx.add("sub", {x, ctx.add("reduce_mean", {x}, reduce)});
    auto variance = ctx.add("reduce_mean", {ctx.add("mul", {centered, centered})}, reduce);
    auto denom = ctx.add("add", {ctx.add("sqrt", {variance}), ctx.add_scalar(type_of(x), 1e-9)});
    return {ctx.add("div", {centered, denom})};
}

args_t parse_lp_norm(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto x = args[0];
    const std::int64_t p = ctx.get_int("p", 2);
    value_map reduce{{"axes", int_list(std::vector<std::int64_t>{ctx.get_int("axis", -1)})}, {"keepdims", true}};
    instruction_ref norm;
    if (p == 1)
        norm = ctx.add("reduce_sum", {ctx.add("abs", {x})}, reduce);
    else if (p == 2)
        norm = ctx.add("sqrt", {ctx.add("reduce_sum", {ctx.add("mul", {x, x})}, reduce)});
    else
        ctx.fail(error_kind::invalid_argument, "p must be 1 or 2, got " + std::to_string(p));
    return {ctx.add("div", {x, norm})};
}

// Sum of squares over a window of `size` channels, as an average pool with
// count_include_pad over x^2 seen as [N, 1, C, rest] times the window size.
args_t parse_lrn(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto x = args[0];
    expect_channels_first(ctx, x, 3);
    const auto& lens = lens_of(x);
    const std::int64_t size = ctx.get_int("size", 0);
    if (size <= 0) ctx.fail(error_kind::invalid_argument, "attribute 'size' must be positive");
    const double alpha = ctx.get_float("alpha", 1e-4);
    const double beta = ctx.get_float("beta", 0.75);
    const double bias = ctx.get_float("bias", 1.0);
    const dtype t = type_of(x);
    auto columns =
        ctx.add("reshape", {ctx.add("mul", {x, x})},
                value_map{{"dims", int_list(std::vector<std::int64_t>{static_cast<std::int64_t>(lens[0]), 1,
                                                                      static_cast<std::int64_t>(lens[1]), -1})}});
    const std::int64_t before = (size - 1) / 2;
    const std::int64_t after = size - 1 - before;
    value_map pool{{"mode", "average"},
                   {"lengths", int_list(std::vector<std::int64_t>{size, 1})},
                   {"stride", int_list(std::vector<std::int64_t>{1, 1})},
                   {"padding", int_list(std::vector<std::int64_t>{before, 0, after, 0})},
                   {"count_include_pad", true}};
    auto mean = ctx.add("reshape", {ctx.add("pooling", {columns}, pool)}, value_map{{"dims", int_list(lens)}});
    // bias + alpha / size * sum = bias + alpha * mean
    auto base = ctx.add("add", {ctx.add("mul", {mean, ctx.add_scalar(t, alpha)}), ctx.add_scalar(t, bias)});
    return {ctx.add("div", {x, ctx.add("pow", {base, ctx.add_scalar(t, beta)})})};
}

}  // namespace

void add_normalization_parsers(parser_table& table) {
    table["LayerNormalization"] = parse_layer_norm;
    table["InstanceNormalization"] = parse_instance_norm;
    table["GroupNormalization"] = parse_group_norm;
    table["MeanVarianceNormalization"] = parse_mean_variance_norm;
    table["LpNormalization"] = parse_lp_norm;
    table["LRN"] = parse_lrn;
}

}  // namespace kiln::onnx_import
