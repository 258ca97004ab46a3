// Split, SplitV, Tile, OneHot, Cumsum, TopKV2 and Einsum.
#include "onnx/einsum_lowering.hpp"
#include "onnx/onnx_tensor.hpp"  // checked_shape
#include "tf/tf_parser.hpp"

namespace kiln::tf_import {

namespace {

using ints = std::vector<std::int64_t>;

std::int64_t checked_axis(const node_context& ctx, std::int64_t axis, std::size_t rank) {
    auto r = static_cast<std::int64_t>(rank);
    if (axis < -r || axis >= r)
        ctx.fail(error_kind::invalid_argument,
                 "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    return axis < 0 ? axis + r : axis;
}

std::int64_t constant_axis(const node_context& ctx, instruction_ref axis, std::size_t rank) {
    auto v = ctx.constant_ints(axis, "axis");
    if (v.size() != 1) ctx.fail(error_kind::invalid_argument, "the axis input must hold one value");
    return checked_axis(ctx, v[0], rank);
}

// Consecutive slices of x along `axis` with the given extents.
args_t slices(const node_context& ctx, instruction_ref x, std::int64_t axis, const ints& sizes) {
    args_t parts;
    std::int64_t start = 0;
    for (auto size : sizes) {
        parts.push_back(ctx.add("slice", {x},
                                value_map{{"axes", int_list(ints{axis})},
                                          {"starts", int_list(ints{start})},
                                          {"ends", int_list(ints{start + size})}}));
        start += size;
    }
    return parts;
}

// Split(axis, value): num_split equal parts.
args_t parse_split(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    const auto& lens = args[1]->get_shape().lens();
    auto axis = constant_axis(ctx, args[0], lens.size());
    std::int64_t n = ctx.get_int("num_split", 1);
    auto extent = static_cast<std::int64_t>(lens[static_cast<std::size_t>(axis)]);
    if (n < 1 || extent % n != 0)
        ctx.fail(error_kind::invalid_argument, "num_split " + std::to_string(n) + " does not divide dim " +
                                                   std::to_string(axis) + " of extent " + std::to_string(extent));
    return slices(ctx, args[1], axis, ints(static_cast<std::size_t>(n), extent / n));
}

// SplitV(value, size_splits, axis): one size may be -1 (the rest).
args_t parse_split_v(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 3);
    const auto& lens = args[0]->get_shape().lens();
    auto axis = constant_axis(ctx, args[2], lens.size());
    auto sizes = ctx.constant_ints(args[1], "size_splits");
    auto extent = static_cast<std::int64_t>(lens[static_cast<std::size_t>(axis)]);
    std::int64_t known = 0;
    std::size_t unknown = sizes.size();
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        if (sizes[i] == -1 && unknown == sizes.size()) {
            unknown = i;
        } else if (sizes[i] < 0) {
            ctx.fail(error_kind::invalid_argument, "size_splits has a bad size " + std::to_string(sizes[i]));
        } else {
            known += sizes[i];
        }
    }
    if (unknown < sizes.size()) sizes[unknown] = extent - known;
    if (known > extent || (unknown == sizes.size() && known != extent))
        ctx.fail(error_kind::invalid_argument,
                 "size_splits do not add up to dim " + std::to_string(axis) + " of extent " + std::to_string(extent));
    return slices(ctx, args[0], axis, sizes);
}

// Tile: x [a, b] with multiples [m, n] is broadcast [m, a, n, b] reshaped to [m*a, n*b].
args_t parse_tile(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    auto multiples = ctx.constant_ints(args[1], "multiples");
    const auto& lens = args[0]->get_shape().lens();
    if (multiples.size() != lens.size())
        ctx.fail(error_kind::invalid_argument, "multiples has " + std::to_string(multiples.size()) +
                                                   " values but the input has rank " + std::to_string(lens.size()));
    ints axes, wide, out;
    for (std::size_t i = 0; i < lens.size(); ++i) {
        if (multiples[i] < 0) ctx.fail(error_kind::invalid_argument, "multiples must be non-negative");
        axes.push_back(static_cast<std::int64_t>(2 * i));
        wide.push_back(multiples[i]);
        wide.push_back(static_cast<std::int64_t>(lens[i]));
        out.push_back(multiples[i] * static_cast<std::int64_t>(lens[i]));
    }
    onnx_import::checked_shape(args[0]->get_shape().type(), out, "output");
    auto x = ctx.add("unsqueeze", {args[0]}, value_map{{"axes", int_list(axes)}});
    x = ctx.add("broadcast", {x}, value_map{{"out_lens", int_list(wide)}});
    return {ctx.add("reshape", {x}, value_map{{"dims", int_list(out)}})};
}

// OneHot(indices, depth, on, off): an index outside [0, depth) gives all off.
args_t parse_one_hot(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 4, 4);
    auto depth_values = ctx.constant_ints(args[1], "depth");
    if (depth_values.size() != 1 || depth_values[0] < 1)
        ctx.fail(error_kind::invalid_argument, "depth must be one positive value");
    const auto depth = static_cast<std::size_t>(depth_values[0]);
    const std::size_t rank = args[0]->get_shape().lens().size() + 1;
    auto axis = static_cast<std::size_t>(checked_axis(ctx, ctx.get_int("axis", -1), rank));
    auto idx = ctx.add("convert", {args[0]}, value_map{{"target_type", "int64_type"}});
    idx = ctx.add("unsqueeze", {idx}, value_map{{"axes", int_list(ints{static_cast<std::int64_t>(axis)})}});
    std::vector<std::size_t> iota_lens(rank, 1);
    iota_lens[axis] = depth;
    std::vector<std::int64_t> iota(depth);
    for (std::size_t i = 0; i < depth; ++i) iota[i] = static_cast<std::int64_t>(i);
    auto positions = ctx.add_literal(literal(shape(dtype::int64_type, iota_lens), iota));
    auto hot = ctx.add("equal", {idx, positions});
    return {ctx.add("where", {hot, args[2], args[3]})};
}

args_t parse_cumsum(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    auto axis = constant_axis(ctx, args[1], args[0]->get_shape().lens().size());
    return {ctx.add("cumsum", {args[0]},
                    value_map{{"axis", axis},
                              {"exclusive", ctx.get_bool("exclusive", false)},
                              {"reverse", ctx.get_bool("reverse", false)}})};
}

// TopKV2(input, k) along the last dim: values, and indices as index_type.
args_t parse_top_k(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    auto k = ctx.constant_ints(args[1], "k");
    if (k.size() != 1 || k[0] < 0) ctx.fail(error_kind::invalid_argument, "k must be one non-negative value");
    args_t outputs;
    for (std::int64_t out = 0; out < 2; ++out)
        outputs.push_back(ctx.add(
            "topk", {args[0]},
            value_map{{"k", k[0]}, {"axis", std::int64_t{-1}}, {"largest", true}, {"sorted", true}, {"output", out}}));
    dtype index_type = ctx.has_attribute("index_type") ? ctx.get_type("index_type") : dtype::int32_type;
    if (index_type != dtype::int64_type)
        outputs[1] = ctx.add("convert", {outputs[1]}, value_map{{"target_type", to_string(index_type)}});
    return outputs;
}

args_t parse_einsum(const node_context& ctx, const args_t& args) {
    if (args.empty()) ctx.fail(error_kind::invalid_argument, "Einsum needs inputs");
    return {lower_einsum(context_emitter<node_context>(ctx), ctx.get_string("equation", ""), args)};
}

}  // namespace

void add_sequence_parsers(parser_table& table) {
    table["Split"] = parse_split;
    table["SplitV"] = parse_split_v;
    table["Tile"] = parse_tile;
    table["OneHot"] = parse_one_hot;
    table["Cumsum"] = parse_cumsum;
    table["TopKV2"] = parse_top_k;
    table["Einsum"] = parse_einsum;
}

}  // namespace kiln::tf_import
