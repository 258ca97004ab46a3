// ONNX Resize (opsets 10, 11, 13, 18, 19) and Upsample: resolves scales,
// sizes, axes and keep_aspect_ratio_policy into the resize op's output
// extents and per-dim scales. Scales, sizes and roi must be constants.
#include <cmath>

#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

// A constant floating input's values, or nothing when absent or empty.
std::vector<double> constant_floats(const node_context& ctx, const args_t& args, std::size_t i,
                                    const std::string& what) {
    if (!ctx.has_input(args, i)) return {};
    auto lit = ctx.constant(args[i]);
    if (!lit) ctx.fail_not_constant(args[i], what, "Kiln's shapes are static");
    return lit->to_vector<double>();
}

std::string resize_mode_name(const node_context& ctx) {
    std::string mode = ctx.get_string("mode", "nearest");
    if (mode == "bilinear" || mode == "trilinear") mode = "linear";  // Upsample-7 spellings
    if (mode != "nearest" && mode != "linear" && mode != "cubic")
        ctx.fail(error_kind::invalid_argument, "mode must be nearest, linear or cubic, not \"" + mode + "\"");
    return mode;
}

// out = floor(in * scale) for every dim (Upsample and Resize-10 semantics, and scales given to later Resize).
std::vector<std::int64_t> lens_from_scales(const std::vector<std::size_t>& in, const std::vector<double>& scales) {
    std::vector<std::int64_t> out;
    for (std::size_t d = 0; d < in.size(); ++d)
        out.push_back(static_cast<std::int64_t>(std::floor(static_cast<double>(in[d]) * scales[d])));
    return out;
}

instruction_ref add_resize(const node_context& ctx, instruction_ref x, const std::vector<std::int64_t>& out_lens,
                           const std::vector<double>& scales, value_map attrs) {
    attrs.emplace_back("out_lens", int_list(out_lens));
    attrs.emplace_back("scales", value_list(scales.begin(), scales.end()));
    return ctx.add("resize", {x}, attrs);
}

// Upsample and Resize-10: scales for every dim, asymmetric coordinates,
// nearest rounding down.
args_t parse_scales_only(const node_context& ctx, const args_t& args) {
    const auto& in = args.at(0)->get_shape().lens();
    std::vector<double> scales;
    if (ctx.op_type() == "Upsample" && ctx.opset() < 9) {
        ctx.expect_inputs(args, 1, 1);
        for (float s : ctx.get_floats("scales")) scales.push_back(s);
    } else {
        ctx.expect_inputs(args, 2, 2);
        scales = constant_floats(ctx, args, 1, "scales");
    }
    if (scales.size() != in.size())
        ctx.fail(error_kind::invalid_argument,
                 "scales needs " + std::to_string(in.size()) + " values, got " + std::to_string(scales.size()));
    value_map attrs{
        {"mode", resize_mode_name(ctx)}, {"coordinate_transformation_mode", "asymmetric"}, {"nearest_mode", "floor"}};
    return {add_resize(ctx, args[0], lens_from_scales(in, scales), scales, attrs)};
}

// Sizes with keep_aspect_ratio_policy not_larger / not_smaller: one scale for
// all resized axes (the smallest or largest ratio), extents rounded from it.
void keep_aspect_ratio(const node_context& ctx, const std::string& policy, const std::vector<std::size_t>& in,
                       const std::vector<std::size_t>& axes, std::vector<std::int64_t>& out,
                       std::vector<double>& scales) {
    if (policy == "stretch") return;
    if (policy != "not_larger" && policy != "not_smaller")
        ctx.fail(error_kind::invalid_argument,
                 "keep_aspect_ratio_policy must be stretch, not_larger or not_smaller, not \"" + policy + "\"");
    double scale = policy == "not_larger" ? INFINITY : 0.0;
    for (auto a : axes) {
        double r = static_cast<double>(out[a]) / static_cast<double>(in[a]);
        scale = policy == "not_larger" ? std::min(scale, r) : std::max(scale, r);
    }
    for (auto a : axes) {
        scales[a] = scale;
        out[a] = static_cast<std::int64_t>(std::nearbyint(scale * static_cast<double>(in[a])));
    }
}

args_t parse_resize(const node_context& ctx, const args_t& args) {
    if (ctx.opset() < 11) return parse_scales_only(ctx, args);
    ctx.expect_inputs(args, 1, 4);
    auto x = args[0];
    const auto& in = x->get_shape().lens();
    const std::size_t rank = in.size();
    std::vector<std::size_t> axes;
    for (auto a : ctx.get_ints("axes")) {
        if (a < -static_cast<std::int64_t>(rank) || a >= static_cast<std::int64_t>(rank))
            ctx.fail(error_kind::invalid_argument,
                     "axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
        axes.push_back(static_cast<std::size_t>(a < 0 ? a + static_cast<std::int64_t>(rank) : a));
    }
    if (axes.empty())
        for (std::size_t d = 0; d < rank; ++d) axes.push_back(d);
    auto given_scales = constant_floats(ctx, args, 2, "scales");
    std::vector<std::int64_t> given_sizes;
    if (ctx.has_input(args, 3) && args[3]->get_shape().elements() > 0)
        given_sizes = ctx.constant_ints(args[3], "sizes");
    if (given_scales.empty() == given_sizes.empty())
        ctx.fail(error_kind::invalid_argument, "exactly one of scales and sizes must be given");
    std::vector<double> scales(rank, 1.0);
    std::vector<std::int64_t> out(in.begin(), in.end());
    const auto& given = given_scales.empty() ? given_sizes.size() : given_scales.size();
    if (given != axes.size())
        ctx.fail(error_kind::invalid_argument, (given_scales.empty() ? "sizes" : "scales") + std::string(" has ") +
                                                   std::to_string(given) + " values for " +
                                                   std::to_string(axes.size()) + " resized axes");
    for (std::size_t i = 0; i < axes.size(); ++i) {
        const std::size_t a = axes[i];
        if (given_scales.empty()) {
            out[a] = given_sizes[i];
            scales[a] = static_cast<double>(given_sizes[i]) / static_cast<double>(in[a]);
        } else {
            scales[a] = given_scales[i];
            out[a] = static_cast<std::int64_t>(std::floor(static_cast<double>(in[a]) * given_scales[i]));
        }
    }
    if (!given_sizes.empty())
        keep_aspect_ratio(ctx, ctx.get_string("keep_aspect_ratio_policy", "stretch"), in, axes, out, scales);
    const std::string coordinates = ctx.get_string("coordinate_transformation_mode", "half_pixel");
    value_map attrs{{"mode", resize_mode_name(ctx)},
                    {"coordinate_transformation_mode", coordinates},
                    {"nearest_mode", ctx.get_string("nearest_mode", "round_prefer_floor")},
                    {"cubic_coeff_a", ctx.get_float("cubic_coeff_a", -0.75)},
                    {"exclude_outside", ctx.get_int("exclude_outside", 0) != 0},
                    {"antialias", ctx.get_int("antialias", 0) != 0},
                    {"extrapolation_value", ctx.get_float("extrapolation_value", 0.0)}};
    if (coordinates == "tf_crop_and_resize") {
        auto given_roi = constant_floats(ctx, args, 1, "roi");
        if (given_roi.size() != 2 * axes.size())
            ctx.fail(error_kind::invalid_argument, "roi needs " + std::to_string(2 * axes.size()) +
                                                       " values (starts and ends of the resized axes), got " +
                                                       std::to_string(given_roi.size()));
        std::vector<double> roi(rank, 0.0);
        roi.resize(2 * rank, 1.0);
        for (std::size_t i = 0; i < axes.size(); ++i) {
            roi[axes[i]] = given_roi[i];
            roi[rank + axes[i]] = given_roi[axes.size() + i];
        }
        attrs.emplace_back("roi", value_list(roi.begin(), roi.end()));
    }
    return {add_resize(ctx, x, out, scales, attrs)};
}

}  // namespace

void add_resize_parsers(parser_table& table) {
    table["Resize"] = parse_resize;
    table["Upsample"] = parse_scales_only;
}

}  // namespace kiln::onnx_import
