// ONNX ConvTranspose: resolves auto_pad and output_shape into explicit
// begin / end padding and output_padding of convolution_transpose.
#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

std::vector<std::int64_t> ones_if_empty(std::vector<std::int64_t> v, std::size_t rank) {
    if (v.empty()) v.assign(rank, 1);
    return v;
}

args_t parse_conv_transpose(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 3);
    const auto& x = args[0]->get_shape().lens();
    const auto& w = args[1]->get_shape().lens();
    if (w.size() < 3 || x.size() != w.size())
        ctx.fail(error_kind::invalid_argument, "input " + to_string(x) + " and weights " + to_string(w) +
                                                   " must be [N, C, spatial...] and [C, M / group, kernel...]");
    const std::size_t rank = w.size() - 2;
    auto stride = ones_if_empty(ctx.get_ints("strides"), rank);
    auto dilation = ones_if_empty(ctx.get_ints("dilations"), rank);
    auto extra = ctx.get_ints("output_padding", std::vector<std::int64_t>(rank, 0));
    auto output_shape = ctx.get_ints("output_shape");
    const std::string auto_pad = ctx.get_string("auto_pad", "NOTSET");
    if (stride.size() != rank || dilation.size() != rank || extra.size() != rank)
        ctx.fail(error_kind::invalid_argument, "strides, dilations and output_padding need one value per spatial dim");
    for (std::size_t d = 0; d < rank; ++d)
        if (stride[d] < 1 || dilation[d] < 1)
            ctx.fail(error_kind::invalid_argument, "strides and dilations must be at least 1");
    // Older exporters write output_shape with the batch and channel dims.
    if (output_shape.size() == rank + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
    if (!output_shape.empty() && output_shape.size() != rank)
        ctx.fail(error_kind::invalid_argument, "output_shape needs one value per spatial dim");
    const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    if (!same && auto_pad != "NOTSET" && auto_pad != "VALID")
        ctx.fail(error_kind::invalid_argument,
                 "auto_pad '" + auto_pad + "' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER");
    std::vector<std::int64_t> pads = auto_pad == "NOTSET" ? ctx.get_ints("pads", std::vector<std::int64_t>(2 * rank, 0))
                                                          : std::vector<std::int64_t>(2 * rank, 0);
    if (pads.size() != 2 * rank) ctx.fail(error_kind::invalid_argument, "pads needs 2 values per spatial dim");
    for (std::size_t d = 0; d < rank; ++d) {
        const auto in = static_cast<std::int64_t>(x[d + 2]);
        const auto k = static_cast<std::int64_t>(w[d + 2]);
        const std::int64_t unpadded = stride[d] * (in - 1) + extra[d] + (k - 1) * dilation[d] + 1;
        // SAME aims at output = input * stride unless output_shape says otherwise.
        const std::int64_t target = !output_shape.empty() ? output_shape[d] : same ? in * stride[d] : -1;
        if (same) {
            // The odd unit of padding goes at the end for SAME_UPPER, at the start for SAME_LOWER.
            const std::int64_t total = std::max<std::int64_t>(0, unpadded - target);
            pads[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
            pads[d + rank] = total - pads[d];
        }
        if (target < 0) continue;
        // The remaining difference grows (output_padding) or crops (end padding) the end.
        const std::int64_t natural = unpadded - pads[d] - pads[d + rank];
        if (target > natural)
            extra[d] += target - natural;
        else
            pads[d + rank] += natural - target;
    }
    value_map attrs{{"padding", int_list(pads)},
                    {"stride", int_list(stride)},
                    {"dilation", int_list(dilation)},
                    {"output_padding", int_list(extra)},
                    {"group", ctx.get_int("group", 1)}};
    auto y = ctx.add("convolution_transpose", {args[0], args[1]}, attrs);
    if (!ctx.has_input(args, 2)) return {y};
    std::vector<std::int64_t> bias_dims{-1};
    bias_dims.insert(bias_dims.end(), rank, 1);
    return {ctx.add("add", {y, ctx.add("reshape", {args[2]}, value_map{{"dims", int_list(bias_dims)}})})};
}

}  // namespace

void add_conv_transpose_parsers(parser_table& table) {
    table["ConvTranspose"] = parse_conv_transpose;
}

}  // namespace kiln::onnx_import
