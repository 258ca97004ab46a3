// ONNX loss ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, both
// decomposed into gather_elements / gather / where / reductions. The targets
// pick one class per sample; weights scale it and ignore_index zeroes it.
#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

// NLL of log-probabilities x [N, C, d...] against class indices target
// [N, d...], with optional per-class weights [C].
instruction_ref negative_log_likelihood(const node_context& ctx, instruction_ref x, instruction_ref target,
                                        std::optional<instruction_ref> weight) {
    const shape& xs = x->get_shape();
    const shape& ts = target->get_shape();
    if (xs.ndim() < 2) ctx.fail(error_kind::invalid_argument, "input must be [N, C, ...], got " + to_string(xs.lens()));
    auto expected = xs.lens();
    expected.erase(expected.begin() + 1);
    if (ts.lens() != expected)
        ctx.fail(error_kind::invalid_argument,
                 "target must have shape " + to_string(expected) + ", got " + to_string(ts.lens()));
    if (!is_integral(ts.type()))
        ctx.fail(error_kind::type_error, "target must hold integers, got " + to_string(ts.type()));
    const std::string reduction = ctx.get_string("reduction", "mean");
    if (reduction != "none" && reduction != "sum" && reduction != "mean")
        ctx.fail(error_kind::invalid_argument, "reduction must be none, sum or mean, got '" + reduction + "'");

    const dtype t = xs.type();
    auto index = ctx.add("convert", {target}, value_map{{"target_type", "int64_type"}});
    std::optional<instruction_ref> ignored;
    if (ctx.has_attribute("ignore_index")) {
        // Ignored entries may hold any value, so they gather class 0 and get weight 0.
        ignored = ctx.add("equal", {index, ctx.add_scalar(dtype::int64_type, double(ctx.get_int("ignore_index", 0)))});
        index = ctx.add("where", {*ignored, ctx.add_scalar(dtype::int64_type, 0), index});
    }
    auto picked =
        ctx.add("gather_elements",
                {x, ctx.add("unsqueeze", {index}, value_map{{"axes", int_list(std::vector<std::int64_t>{1})}})},
                value_map{{"axis", std::int64_t{1}}});
    picked = ctx.add("squeeze", {picked}, value_map{{"axes", int_list(std::vector<std::int64_t>{1})}});
    auto loss = ctx.add("neg", {picked});

    // Per-entry weight, absent when every entry counts once.
    std::optional<instruction_ref> w;
    if (weight) w = ctx.add("gather", {*weight, index}, value_map{{"axis", std::int64_t{0}}});
    if (ignored) w = ctx.add("where", {*ignored, ctx.add_scalar(t, 0), w ? *w : ctx.add_scalar(t, 1)});
    if (w) loss = ctx.add("mul", {loss, *w});

    const auto all = value_map{{"axes", int_list(std::vector<std::int64_t>{})}, {"keepdims", false}};
    if (reduction == "none") return loss;
    if (reduction == "sum") return ctx.add("reduce_sum", {loss}, all);
    if (!w) return ctx.add("reduce_mean", {loss}, all);
    // A weighted mean divides by the total weight of the entries that count.
    return ctx.add("div", {ctx.add("reduce_sum", {loss}, all), ctx.add("reduce_sum", {*w}, all)});
}

std::optional<instruction_ref> optional_input(const node_context& ctx, const args_t& args, std::size_t i) {
    if (!ctx.has_input(args, i)) return std::nullopt;
    return args[i];
}

args_t parse_negative_log_likelihood_loss(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 3);
    return {negative_log_likelihood(ctx, args[0], args[1], optional_input(ctx, args, 2))};
}

// NLL of log_softmax over the class axis; the second output is that log_softmax.
args_t parse_softmax_cross_entropy_loss(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 3);
    if (args[0]->get_shape().ndim() < 2)
        ctx.fail(error_kind::invalid_argument,
                 "scores must be [N, C, ...], got " + to_string(args[0]->get_shape().lens()));
    auto log_prob = ctx.add("log_softmax", {args[0]}, value_map{{"axis", std::int64_t{1}}});
    return {negative_log_likelihood(ctx, log_prob, args[1], optional_input(ctx, args, 2)), log_prob};
}

}  // namespace

void add_loss_parsers(parser_table& table) {
    table["NegativeLogLikelihoodLoss"] = parse_negative_log_likelihood_loss;
    table["SoftmaxCrossEntropyLoss"] = parse_softmax_cross_entropy_loss;
}

}  // namespace kiln::onnx_import
