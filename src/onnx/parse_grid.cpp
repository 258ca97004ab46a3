// ONNX ops that sample or crop spatial data: GridSample maps to the
// grid_sample IR op; CenterCropPad is a slice (crop) followed by a pad.
#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

args_t parse_grid_sample(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    std::string mode = ctx.get_string("mode", ctx.opset() < 20 ? "bilinear" : "linear");
    // Opset 16 spelled the 2-D modes bilinear / bicubic.
    if (mode == "bilinear") mode = "linear";
    if (mode == "bicubic") mode = "cubic";
    const std::string padding = ctx.get_string("padding_mode", "zeros");
    if (mode != "linear" && mode != "nearest" && mode != "cubic")
        ctx.fail(error_kind::invalid_argument, "mode must be linear, nearest or cubic, got '" + mode + "'");
    if (padding != "zeros" && padding != "border" && padding != "reflection")
        ctx.fail(error_kind::invalid_argument,
                 "padding_mode must be zeros, border or reflection, got '" + padding + "'");
    return {ctx.add(
        "grid_sample", {args[0], args[1]},
        value_map{{"mode", mode}, {"padding_mode", padding}, {"align_corners", ctx.get_int("align_corners", 0) != 0}})};
}

// Per axis: a longer input keeps its centred window (the extra element falls
// on the right), a shorter one gets zeros on both sides (the extra one on the right).
args_t parse_center_crop_pad(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    const auto target = ctx.constant_ints(args[1], "the shape input");
    const auto& lens = args[0]->get_shape().lens();
    const auto rank = static_cast<std::int64_t>(lens.size());
    std::vector<std::int64_t> axes = ctx.get_ints("axes");
    if (axes.empty())
        for (std::int64_t a = 0; a < rank; ++a) axes.push_back(a);
    if (axes.size() != target.size())
        ctx.fail(error_kind::invalid_argument,
                 "shape has " + std::to_string(target.size()) + " values for " + std::to_string(axes.size()) + " axes");
    std::vector<std::int64_t> crop_axes, starts, ends, pads(2 * lens.size(), 0);
    for (std::size_t i = 0; i < axes.size(); ++i) {
        if (axes[i] < -rank || axes[i] >= rank)
            ctx.fail(error_kind::invalid_argument, "axis " + std::to_string(axes[i]) + " is out of range");
        const auto a = static_cast<std::size_t>(axes[i] < 0 ? axes[i] + rank : axes[i]);
        const auto have = static_cast<std::int64_t>(lens[a]);
        if (target[i] < 0) ctx.fail(error_kind::invalid_argument, "shape values must be non-negative");
        if (target[i] < have) {
            crop_axes.push_back(static_cast<std::int64_t>(a));
            starts.push_back((have - target[i]) / 2);
            ends.push_back((have - target[i]) / 2 + target[i]);
        } else if (target[i] > have) {
            pads[a] = (target[i] - have) / 2;
            pads[a + lens.size()] = target[i] - have - pads[a];
        }
    }
    auto x = args[0];
    if (!crop_axes.empty())
        x = ctx.add("slice", {x},
                    value_map{{"axes", int_list(crop_axes)}, {"starts", int_list(starts)}, {"ends", int_list(ends)}});
    bool padded = false;
    for (auto p : pads) padded = padded || p != 0;
    if (padded) x = ctx.add("pad", {x}, value_map{{"pads", int_list(pads)}});
    return {x};
}

}  // namespace

void add_grid_parsers(parser_table& table) {
    table["GridSample"] = parse_grid_sample;
    table["CenterCropPad"] = parse_center_crop_pad;
}

}  // namespace kiln::onnx_import
