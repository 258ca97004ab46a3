// ONNX neural-network layers: Conv, pooling, BatchNormalization, Softmax.
#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

// ONNX pads [begin..., end...], resolving auto_pad (SAME_UPPER puts the odd
// extra padding at the end, SAME_LOWER at the start).
std::vector<std::int64_t> resolve_pads(const node_context& ctx, const std::vector<std::size_t>& in_lens,
                                       const std::vector<std::int64_t>& kernel, const std::vector<std::int64_t>& stride,
                                       const std::vector<std::int64_t>& dilation) {
    const std::size_t rank = kernel.size();
    std::string auto_pad = ctx.get_string("auto_pad", "NOTSET");
    if (auto_pad == "NOTSET") return ctx.get_ints("pads", std::vector<std::int64_t>(2 * rank, 0));
    if (auto_pad == "VALID") return std::vector<std::int64_t>(2 * rank, 0);
    if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
        ctx.fail(error_kind::invalid_argument, "auto_pad '" + auto_pad + "' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER");
    // Checked here because the arithmetic below reads them by spatial index.
    if (in_lens.size() != rank + 2)
        ctx.fail(error_kind::invalid_argument, "input has rank " + std::to_string(in_lens.size()) + " but the kernel has " +
                                                   std::to_string(rank) + " spatial dims");
    if ((!stride.empty() && stride.size() != rank) || (!dilation.empty() && dilation.size() != rank))
        ctx.fail(error_kind::invalid_argument, "strides and dilations need one value per spatial dim (" +
                                                   std::to_string(rank) + ")");
    std::vector<std::int64_t> pads(2 * rank, 0);
    for (std::size_t i = 0; i < rank; ++i) {
        auto in = static_cast<std::int64_t>(in_lens[i + 2]);
        std::int64_t s = stride.empty() ? 1 : stride[i];
        std::int64_t d = dilation.empty() ? 1 : dilation[i];
        if (s < 1 || d < 1) ctx.fail(error_kind::invalid_argument, "strides and dilations must be at least 1");
        std::int64_t out = (in + s - 1) / s;
        std::int64_t total = std::max<std::int64_t>(0, (out - 1) * s + (kernel[i] - 1) * d + 1 - in);
        std::int64_t small = total / 2;
        pads[i] = auto_pad == "SAME_UPPER" ? small : total - small;
        pads[i + rank] = total - pads[i];
    }
    return pads;
}

std::vector<std::int64_t> ones_if_empty(std::vector<std::int64_t> v, std::size_t rank) {
    if (v.empty()) v.assign(rank, 1);
    return v;
}

args_t parse_conv(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 3);
    const auto& w = args[1]->get_shape().lens();
    if (w.size() < 3) ctx.fail(error_kind::invalid_argument, "weights must have at least 3 dims");
    const std::size_t rank = w.size() - 2;
    std::vector<std::int64_t> kernel(w.begin() + 2, w.end());
    auto stride = ones_if_empty(ctx.get_ints("strides"), rank);
    auto dilation = ones_if_empty(ctx.get_ints("dilations"), rank);
    auto pads = resolve_pads(ctx, args[0]->get_shape().lens(), kernel, stride, dilation);
    value_map attrs{{"padding", int_list(pads)}, {"stride", int_list(stride)}, {"dilation", int_list(dilation)},
                    {"group", ctx.get_int("group", 1)}};
    auto y = ctx.add("convolution", {args[0], args[1]}, attrs);
    if (!ctx.has_input(args, 2)) return {y};
    // Bias [M] broadcast over [N, M, spatial...].
    std::vector<std::int64_t> bias_dims{-1};
    bias_dims.insert(bias_dims.end(), rank, 1);
    auto bias = ctx.add("reshape", {args[2]}, value_map{{"dims", int_list(bias_dims)}});
    return {ctx.add("add", {y, bias})};
}

parse_function parse_pool(std::string mode, bool global) {
    return [mode, global](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, 1, 1);
        const auto& lens = args[0]->get_shape().lens();
        if (lens.size() < 3) ctx.fail(error_kind::invalid_argument, "input must be [N, C, spatial...]");
        if (global)
            return {ctx.add("pooling", {args[0]}, value_map{{"mode", mode}, {"global", true}})};
        if (ctx.node().output_size() > 1 && !ctx.node().output(1).empty())
            ctx.fail(error_kind::not_implemented, "the Indices output of MaxPool is not supported");
        if (ctx.get_int("storage_order", 0) != 0)
            ctx.fail(error_kind::not_implemented, "storage_order=1 is not supported");
        auto kernel = ctx.get_ints("kernel_shape");
        if (kernel.size() != lens.size() - 2)
            ctx.fail(error_kind::invalid_argument, "kernel_shape must give one extent per spatial dim");
        auto stride = ones_if_empty(ctx.get_ints("strides"), kernel.size());
        auto dilation = ones_if_empty(ctx.get_ints("dilations"), kernel.size());
        auto pads = resolve_pads(ctx, lens, kernel, stride, dilation);
        value_map attrs{{"mode", mode},
                        {"lengths", int_list(kernel)},
                        {"stride", int_list(stride)},
                        {"padding", int_list(pads)},
                        {"dilation", int_list(dilation)},
                        {"ceil_mode", ctx.get_int("ceil_mode", 0) != 0},
                        {"count_include_pad", ctx.get_int("count_include_pad", 0) != 0}};
        return {ctx.add("pooling", {args[0]}, attrs)};
    };
}

args_t parse_batch_norm(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 5, 5);
    if (ctx.get_int("training_mode", 0) != 0)
        ctx.fail(error_kind::not_implemented, "training-mode BatchNormalization is not supported");
    value_map attrs{{"epsilon", ctx.get_float("epsilon", 1e-5)}};
    return {ctx.add("batch_norm_inference", {args[0], args[1], args[2], args[3], args[4]}, attrs)};
}

// Before opset 13 Softmax normalizes the input flattened to 2-D at `axis`
// (default 1); from 13 on it works along one axis (default -1).
parse_function parse_softmax(std::string op) {
    return [op](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, 1, 1);
        auto x = args[0];
        const auto rank = static_cast<std::int64_t>(x->get_shape().ndim());
        if (ctx.opset() >= 13) return {ctx.add(op, {x}, value_map{{"axis", ctx.get_int("axis", -1)}})};
        std::int64_t axis = ctx.get_int("axis", 1);
        if (axis < 0) axis += rank;
        if (axis == rank - 1) return {ctx.add(op, {x}, value_map{{"axis", axis}})};
        auto flat = ctx.add("flatten", {x}, value_map{{"axis", axis}});
        auto y = ctx.add(op, {flat}, value_map{{"axis", std::int64_t{1}}});
        return {ctx.add("reshape", {y}, value_map{{"dims", int_list(x->get_shape().lens())}})};
    };
}

}  // namespace

void add_nn_parsers(parser_table& table) {
    table["Conv"] = parse_conv;
    table["MaxPool"] = parse_pool("max", false);
    table["AveragePool"] = parse_pool("average", false);
    table["GlobalMaxPool"] = parse_pool("max", true);
    table["GlobalAveragePool"] = parse_pool("average", true);
    table["BatchNormalization"] = parse_batch_norm;
    table["Softmax"] = parse_softmax("softmax");
    table["LogSoftmax"] = parse_softmax("log_softmax");
}

}  // namespace kiln::onnx_import
