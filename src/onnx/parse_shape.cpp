// ONNX ops that move or select data without arithmetic. Shape-like inputs
// (Reshape's shape, Slice's starts, ...) must be constants at import, which
// folding of Shape subgraphs usually makes them.
#include <algorithm>

#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

std::int64_t rank_of(instruction_ref x) { return static_cast<std::int64_t>(x->get_shape().ndim()); }

// Maps a possibly negative axis into [0, rank).
std::int64_t normalize_axis(const node_context& ctx, std::int64_t axis, std::int64_t rank) {
    if (axis < -rank || axis >= rank)
        ctx.fail(error_kind::invalid_argument, "axis " + std::to_string(axis) + " is out of range for rank " +
                                                   std::to_string(rank));
    return axis < 0 ? axis + rank : axis;
}

std::vector<std::int64_t> normalize_axes(const node_context& ctx, std::vector<std::int64_t> axes, std::int64_t rank) {
    for (auto& a : axes) a = normalize_axis(ctx, a, rank);
    return axes;
}

args_t parse_reshape(const node_context& ctx, const args_t& args) {
    std::vector<std::int64_t> dims;
    if (ctx.opset() < 5) {
        ctx.expect_inputs(args, 1, 1);
        dims = ctx.get_ints("shape");
    } else {
        ctx.expect_inputs(args, 2, 2);
        dims = ctx.constant_ints(args[1], "the shape input");
    }
    // allowzero (opset 14) makes 0 a real extent instead of "copy the input's".
    if (ctx.get_int("allowzero", 0) != 0 && std::find(dims.begin(), dims.end(), 0) != dims.end())
        ctx.fail(error_kind::not_implemented, "allowzero=1 with a 0 in the shape is not supported");
    return {ctx.add("reshape", {args[0]}, value_map{{"dims", int_list(dims)}})};
}

args_t parse_transpose(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto perm = ctx.get_ints("perm");
    return {ctx.add("transpose", {args[0]}, value_map{{"permutation", int_list(perm)}})};
}

args_t parse_flatten(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto rank = rank_of(args[0]);
    std::int64_t axis = ctx.get_int("axis", 1);
    // Flatten's axis may equal the rank (everything in the first dim).
    if (axis != rank) axis = normalize_axis(ctx, axis, rank);
    return {ctx.add("flatten", {args[0]}, value_map{{"axis", axis}})};
}

args_t parse_concat(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, std::numeric_limits<std::size_t>::max());
    if (!ctx.has_attribute("axis")) ctx.fail(error_kind::invalid_argument, "required attribute 'axis' is missing");
    std::int64_t axis = normalize_axis(ctx, ctx.get_int("axis", 0), rank_of(args[0]));
    return {ctx.add("concat", args, value_map{{"axis", axis}})};
}

// Squeeze and Unsqueeze take axes as an attribute before opset 13, as an input after.
std::vector<std::int64_t> axes_attr_or_input(const node_context& ctx, const args_t& args) {
    if (ctx.opset() < 13) {
        ctx.expect_inputs(args, 1, 1);
        return ctx.get_ints("axes");
    }
    ctx.expect_inputs(args, 1, 2);
    return ctx.has_input(args, 1) ? ctx.constant_ints(args[1], "the axes input") : std::vector<std::int64_t>{};
}

args_t parse_squeeze(const node_context& ctx, const args_t& args) {
    auto axes = normalize_axes(ctx, axes_attr_or_input(ctx, args), rank_of(args[0]));
    return {ctx.add("squeeze", {args[0]}, value_map{{"axes", int_list(axes)}})};
}

args_t parse_unsqueeze(const node_context& ctx, const args_t& args) {
    auto axes = axes_attr_or_input(ctx, args);
    // Unsqueeze's axes index the output.
    axes = normalize_axes(ctx, axes, rank_of(args[0]) + static_cast<std::int64_t>(axes.size()));
    return {ctx.add("unsqueeze", {args[0]}, value_map{{"axes", int_list(axes)}})};
}

// The indices a slice with a negative step takes along an axis of `extent`,
// in order (ONNX: start clamped to [0, extent - 1], end to [-1, extent - 1]
// after adding the extent to negative ones).
std::vector<std::int64_t> reversed_slice_indices(std::int64_t start, std::int64_t end, std::int64_t step,
                                                 std::int64_t extent) {
    auto resolve = [extent](std::int64_t i, std::int64_t low) {
        if (i < 0) i = i < -extent ? -extent - 1 : i;  // no overflow for INT64_MIN: clamp before adding
        if (i < 0) i += extent;
        return std::clamp(i, low, extent - 1);
    };
    std::vector<std::int64_t> indices;
    if (extent == 0) return indices;
    for (std::int64_t i = resolve(start, 0), last = resolve(end, -1); i > last; i += step) indices.push_back(i);
    return indices;
}

// Attributes before opset 10; constant inputs (with steps) from then on.
// Axes with negative steps (a list reversed) take their elements with a
// gather, since a view's strides cannot run backwards.
args_t parse_slice(const node_context& ctx, const args_t& args) {
    std::vector<std::int64_t> starts, ends, axes, steps;
    if (ctx.opset() < 10) {
        ctx.expect_inputs(args, 1, 1);
        starts = ctx.get_ints("starts");
        ends = ctx.get_ints("ends");
        axes = ctx.get_ints("axes");
    } else {
        ctx.expect_inputs(args, 3, 5);
        starts = ctx.constant_ints(args[1], "the starts input");
        ends = ctx.constant_ints(args[2], "the ends input");
        if (ctx.has_input(args, 3)) axes = ctx.constant_ints(args[3], "the axes input");
        if (ctx.has_input(args, 4)) steps = ctx.constant_ints(args[4], "the steps input");
    }
    if (starts.size() != ends.size())
        ctx.fail(error_kind::invalid_argument, "starts and ends have different lengths");
    if (axes.empty())
        for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
    axes = normalize_axes(ctx, axes, rank_of(args[0]));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (steps.size() != starts.size()) ctx.fail(error_kind::invalid_argument, "steps and starts have different lengths");
    if (axes.size() != starts.size()) ctx.fail(error_kind::invalid_argument, "axes and starts have different lengths");
    std::vector<std::int64_t> forward_axes, forward_starts, forward_ends, forward_steps;
    std::vector<std::size_t> reversed;
    for (std::size_t k = 0; k < steps.size(); ++k) {
        if (steps[k] == 0) ctx.fail(error_kind::invalid_argument, "steps[" + std::to_string(k) + "] is 0");
        if (steps[k] < 0) {
            reversed.push_back(k);
            continue;
        }
        forward_axes.push_back(axes[k]);
        forward_starts.push_back(starts[k]);
        forward_ends.push_back(ends[k]);
        forward_steps.push_back(steps[k]);
    }
    instruction_ref out = args[0];
    if (!forward_axes.empty() || reversed.empty())
        out = ctx.add("slice", {out}, value_map{{"axes", int_list(forward_axes)}, {"starts", int_list(forward_starts)},
                                                {"ends", int_list(forward_ends)}, {"steps", int_list(forward_steps)}});
    for (std::size_t k : reversed) {
        const auto axis = static_cast<std::size_t>(axes[k]);
        const auto extent = static_cast<std::int64_t>(out->get_shape().lens()[axis]);
        const auto indices = reversed_slice_indices(starts[k], ends[k], steps[k], extent);
        const auto index = ctx.add_literal(literal(shape{dtype::int64_type, {indices.size()}}, indices));
        out = ctx.add("gather", {out, index}, value_map{{"axis", axes[k]}});
    }
    return {out};
}

// Pads: attributes before opset 11; inputs pads, constant_value and (opset 18) axes after.
args_t parse_pad(const node_context& ctx, const args_t& args) {
    std::string mode = ctx.get_string("mode", "constant");
    if (mode != "constant" && mode != "reflect" && mode != "edge")
        ctx.fail(error_kind::not_implemented, "pad mode '" + mode + "' is not supported");
    const auto rank = rank_of(args.at(0));
    std::vector<std::int64_t> pads;
    double fill = 0.0;
    if (ctx.opset() < 11) {
        ctx.expect_inputs(args, 1, 1);
        pads = ctx.get_ints("pads");
        fill = ctx.get_float("value", 0.0);
    } else {
        ctx.expect_inputs(args, 2, 4);
        pads = ctx.constant_ints(args[1], "the pads input");
        if (ctx.has_input(args, 2)) {
            auto value_lit = ctx.constant(args[2]);
            if (!value_lit) ctx.fail(error_kind::not_implemented, "the constant_value input must be a constant");
            if (value_lit->get_shape().elements() > 0) fill = value_lit->to_vector<double>()[0];
        }
        if (ctx.has_input(args, 3)) {
            // Pads listed for some axes only: spread them over all dims.
            auto axes = normalize_axes(ctx, ctx.constant_ints(args[3], "the axes input"), rank);
            if (pads.size() != 2 * axes.size())
                ctx.fail(error_kind::invalid_argument, "pads must hold two values per axis");
            std::vector<std::int64_t> full(static_cast<std::size_t>(2 * rank), 0);
            for (std::size_t i = 0; i < axes.size(); ++i) {
                full[static_cast<std::size_t>(axes[i])] = pads[i];
                full[static_cast<std::size_t>(axes[i] + rank)] = pads[i + axes.size()];
            }
            pads = full;
        }
    }
    if (std::any_of(pads.begin(), pads.end(), [](std::int64_t p) { return p < 0; }))
        ctx.fail(error_kind::not_implemented, "negative pads (cropping) are not supported");
    return {ctx.add("pad", {args[0]}, value_map{{"pads", int_list(pads)}, {"mode", mode}, {"value", fill}})};
}

// Expand broadcasts both ways: the result has the larger extent of input and shape.
args_t parse_expand(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    auto dims = ctx.constant_ints(args[1], "the shape input");
    auto in = args[0]->get_shape().lens();
    std::size_t rank = std::max(in.size(), dims.size());
    std::vector<std::size_t> out(rank, 1);
    for (std::size_t i = 0; i < rank; ++i) {
        std::size_t a = i < rank - in.size() ? 1 : in[i - (rank - in.size())];
        std::int64_t b = i < rank - dims.size() ? 1 : dims[i - (rank - dims.size())];
        if (b < 0) ctx.fail(error_kind::invalid_argument, "shape holds a negative extent");
        auto ub = static_cast<std::size_t>(b);
        if (a != ub && a != 1 && ub != 1)
            ctx.fail(error_kind::invalid_argument, "cannot expand " + to_string(in) + " to the shape input");
        out[i] = a == 1 ? ub : a;
    }
    return {ctx.add("broadcast", {args[0]}, value_map{{"out_lens", int_list(out)}})};
}

// One split instruction per output; sizes come from an attribute (< 13), an
// input (>= 13) or num_outputs (18), else equal pieces.
args_t parse_split(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 2);
    std::int64_t axis = normalize_axis(ctx, ctx.get_int("axis", 0), rank_of(args[0]));
    std::vector<std::int64_t> sizes = ctx.get_ints("split");
    if (ctx.has_input(args, 1)) sizes = ctx.constant_ints(args[1], "the split input");
    auto outputs = static_cast<std::int64_t>(ctx.node().output_size());
    std::int64_t num_outputs = ctx.get_int("num_outputs", outputs);
    // Opset 18: with num_outputs, an extent that does not divide evenly leaves the last chunk smaller.
    auto extent = static_cast<std::int64_t>(args[0]->get_shape().lens()[static_cast<std::size_t>(axis)]);
    if (sizes.empty() && ctx.has_attribute("num_outputs") && num_outputs > 0 && extent % num_outputs != 0) {
        std::int64_t chunk = (extent + num_outputs - 1) / num_outputs;
        for (std::int64_t i = 0; i < num_outputs; ++i)
            sizes.push_back(std::max<std::int64_t>(0, std::min(chunk, extent - i * chunk)));
    }
    args_t results;
    for (std::int64_t i = 0; i < outputs; ++i)
        results.push_back(ctx.add("split", {args[0]},
                                  value_map{{"axis", axis},
                                            {"sizes", int_list(sizes)},
                                            {"num_outputs", sizes.empty() ? num_outputs : std::int64_t{0}},
                                            {"output", i}}));
    return results;
}

}  // namespace

void add_shape_parsers(parser_table& table) {
    table["Reshape"] = parse_reshape;
    table["Transpose"] = parse_transpose;
    table["Flatten"] = parse_flatten;
    table["Concat"] = parse_concat;
    table["Squeeze"] = parse_squeeze;
    table["Unsqueeze"] = parse_unsqueeze;
    table["Slice"] = parse_slice;
    table["Pad"] = parse_pad;
    table["Expand"] = parse_expand;
    table["Split"] = parse_split;
}

}  // namespace kiln::onnx_import
