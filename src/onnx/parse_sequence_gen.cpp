// ONNX ops that generate, tile, scan, sort or select along sequences: Range,
// EyeLike, OneHot, Trilu, Tile, CumSum, ReverseSequence, TopK, Compress and
// NonZero. Most are compositions of existing IR ops; the ones whose output
// shape depends on data (Range, Compress, NonZero) need constant inputs.
#include <cmath>

#include "onnx/onnx_tensor.hpp"
#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

std::int64_t normalize_axis(const node_context& ctx, std::int64_t axis, std::size_t rank) {
    const auto r = static_cast<std::int64_t>(rank);
    if (axis < -r || axis >= r)
        ctx.fail(error_kind::invalid_argument,
                 "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    return axis < 0 ? axis + r : axis;
}

// A constant input's value, or a clear error for a data-dependent one.
literal required_constant(const node_context& ctx, instruction_ref ins, const std::string& what) {
    auto lit = ctx.constant(ins);
    if (!lit) ctx.fail_not_constant(ins, what, "a data-dependent output shape is not supported");
    return *lit;
}

std::int64_t constant_int(const node_context& ctx, instruction_ref ins, const std::string& what) {
    auto v = ctx.constant_ints(ins, what);
    if (v.size() != 1)
        ctx.fail(error_kind::invalid_argument, what + " must hold one value, has " + std::to_string(v.size()));
    return v[0];
}

// int64 literal holding 0..n-1 laid along dimension `dim` of a rank-`rank` shape.
instruction_ref iota_along(const node_context& ctx, std::size_t n, std::size_t dim, std::size_t rank) {
    std::vector<std::size_t> lens(rank, 1);
    lens[dim] = n;
    std::vector<std::int64_t> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::int64_t>(i);
    return ctx.add_literal(literal(shape{dtype::int64_type, lens}, v));
}

// Range's output length depends on its inputs, so they must be constant; the
// result is folded into a literal.
args_t parse_range(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 3);
    const literal start = required_constant(ctx, args[0], "the start input");
    const literal limit = required_constant(ctx, args[1], "the limit input");
    const literal delta = required_constant(ctx, args[2], "the delta input");
    const dtype t = start.get_shape().type();
    if (start.get_shape().elements() != 1 || limit.get_shape().elements() != 1 || delta.get_shape().elements() != 1)
        ctx.fail(error_kind::invalid_argument, "start, limit and delta must be scalars");
    std::vector<std::int64_t> dims(1, 0);
    if (is_integral(t)) {
        const auto s = start.to_vector<std::int64_t>()[0], l = limit.to_vector<std::int64_t>()[0],
                   d = delta.to_vector<std::int64_t>()[0];
        if (d == 0) ctx.fail(error_kind::invalid_argument, "delta must not be 0");
        // ceil((l - s) / d) in integers
        const std::int64_t span = l - s;
        dims[0] = std::max<std::int64_t>(0, span / d + ((span % d != 0 && (span > 0) == (d > 0)) ? 1 : 0));
        std::vector<std::int64_t> v(static_cast<std::size_t>(dims[0]));
        checked_shape(t, dims, "output");
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = s + static_cast<std::int64_t>(i) * d;
        return {ctx.add_literal(literal(shape{t, {v.size()}}, v))};
    }
    const double s = start.to_vector<double>()[0], l = limit.to_vector<double>()[0], d = delta.to_vector<double>()[0];
    if (d == 0 || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d))
        ctx.fail(error_kind::invalid_argument, "start, limit and delta must be finite and delta non-zero");
    dims[0] = std::max<std::int64_t>(0, static_cast<std::int64_t>(std::ceil((l - s) / d)));
    checked_shape(t, dims, "output");
    std::vector<double> v(static_cast<std::size_t>(dims[0]));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = s + static_cast<double>(i) * d;
    return {ctx.add_literal(literal(shape{t, {v.size()}}, v))};
}

// A 2-D identity-like literal: ones where column - row == k.
args_t parse_eye_like(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    const shape& in = args[0]->get_shape();
    if (in.ndim() != 2) ctx.fail(error_kind::invalid_argument, "input must be 2-D, got " + to_string(in.lens()));
    const dtype t =
        ctx.has_attribute("dtype") ? to_dtype(static_cast<std::int32_t>(ctx.get_int("dtype", 1)), "dtype") : in.type();
    const std::int64_t k = ctx.get_int("k", 0);
    const auto rows = static_cast<std::int64_t>(in.lens()[0]), cols = static_cast<std::int64_t>(in.lens()[1]);
    std::vector<double> v(in.elements(), 0.0);
    for (std::int64_t r = 0; r < rows; ++r)
        if (r + k >= 0 && r + k < cols) v[static_cast<std::size_t>(r * cols + r + k)] = 1.0;
    return {ctx.add_literal(literal(shape{t, in.lens()}, v))};
}

// values[1] where the index matches the position along the new axis, else
// values[0]; negative indices count from depth, others out of range match nothing.
args_t parse_one_hot(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 3);
    const double depth_value = required_constant(ctx, args[1], "the depth input").to_vector<double>().at(0);
    if (!(depth_value >= 1)) ctx.fail(error_kind::invalid_argument, "depth must be positive");
    const auto depth = static_cast<std::int64_t>(depth_value);
    const std::size_t rank = args[0]->get_shape().ndim() + 1;
    const auto axis = static_cast<std::size_t>(normalize_axis(ctx, ctx.get_int("axis", -1), rank));
    auto idx = ctx.add("convert", {args[0]}, value_map{{"target_type", "int64_type"}});
    auto zero = ctx.add_scalar(dtype::int64_type, 0);
    auto wrapped = ctx.add("add", {idx, ctx.add_scalar(dtype::int64_type, static_cast<double>(depth))});
    idx = ctx.add("where", {ctx.add("less", {idx, zero}), wrapped, idx});
    idx = ctx.add("unsqueeze", {idx},
                  value_map{{"axes", int_list(std::vector<std::int64_t>{static_cast<std::int64_t>(axis)})}});
    auto hot = ctx.add("equal", {idx, iota_along(ctx, static_cast<std::size_t>(depth), axis, rank)});
    auto off = ctx.add("gather", {args[2], ctx.add_scalar(dtype::int64_type, 0)});
    auto on = ctx.add("gather", {args[2], ctx.add_scalar(dtype::int64_type, 1)});
    return {ctx.add("where", {hot, on, off})};
}

// x where the (row, column) mask of the last two dims keeps it, else zero.
args_t parse_trilu(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 2);
    const shape& in = args[0]->get_shape();
    if (in.ndim() < 2)
        ctx.fail(error_kind::invalid_argument, "input must have at least 2 dims, got " + to_string(in.lens()));
    const std::int64_t k = ctx.has_input(args, 1) ? constant_int(ctx, args[1], "the k input") : 0;
    const bool upper = ctx.get_int("upper", 1) != 0;
    const auto rows = static_cast<std::int64_t>(in.lens()[in.ndim() - 2]);
    const auto cols = static_cast<std::int64_t>(in.lens()[in.ndim() - 1]);
    std::vector<std::int64_t> keep(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
            keep[static_cast<std::size_t>(r * cols + c)] = upper ? c - r >= k : c - r <= k;
    auto mask =
        ctx.add_literal(literal(shape{dtype::bool_type, {in.lens()[in.ndim() - 2], in.lens()[in.ndim() - 1]}}, keep));
    return {ctx.add("where", {mask, args[0], ctx.add_scalar(in.type(), 0)})};
}

// [d0, d1, ...] -> unsqueeze to [1, d0, 1, d1, ...] -> broadcast to
// [r0, d0, r1, d1, ...] -> reshape to [r0*d0, r1*d1, ...].
args_t parse_tile(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    const auto repeats = ctx.constant_ints(args[1], "the repeats input");
    const auto& lens = args[0]->get_shape().lens();
    if (repeats.size() != lens.size())
        ctx.fail(error_kind::invalid_argument, "repeats has " + std::to_string(repeats.size()) +
                                                   " values but the input has rank " + std::to_string(lens.size()));
    if (lens.empty()) return {args[0]};
    std::vector<std::int64_t> axes, wide, out;
    for (std::size_t i = 0; i < lens.size(); ++i) {
        if (repeats[i] < 0) ctx.fail(error_kind::invalid_argument, "repeats must be non-negative");
        axes.push_back(static_cast<std::int64_t>(2 * i));
        wide.push_back(repeats[i]);
        wide.push_back(static_cast<std::int64_t>(lens[i]));
        out.push_back(repeats[i] * static_cast<std::int64_t>(lens[i]));
    }
    checked_shape(args[0]->get_shape().type(), out, "output");
    auto x = ctx.add("unsqueeze", {args[0]}, value_map{{"axes", int_list(axes)}});
    x = ctx.add("broadcast", {x}, value_map{{"out_lens", int_list(wide)}});
    return {ctx.add("reshape", {x}, value_map{{"dims", int_list(out)}})};
}

args_t parse_cumsum(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    const std::int64_t axis = constant_int(ctx, args[1], "the axis input");
    return {ctx.add("cumsum", {args[0]},
                    value_map{{"axis", axis},
                              {"exclusive", ctx.get_int("exclusive", 0) != 0},
                              {"reverse", ctx.get_int("reverse", 0) != 0}})};
}

// A gather_elements along the time axis with index len-1-t for t < len and t
// after it, built from the lengths so that they may be runtime data.
args_t parse_reverse_sequence(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    const shape& in = args[0]->get_shape();
    if (in.ndim() < 2) ctx.fail(error_kind::invalid_argument, "input must have at least 2 dims");
    const auto time = static_cast<std::size_t>(normalize_axis(ctx, ctx.get_int("time_axis", 0), in.ndim()));
    const auto batch = static_cast<std::size_t>(normalize_axis(ctx, ctx.get_int("batch_axis", 1), in.ndim()));
    if (time == batch) ctx.fail(error_kind::invalid_argument, "time_axis and batch_axis must differ");
    if (args[1]->get_shape().lens() != std::vector<std::size_t>{in.lens()[batch]})
        ctx.fail(error_kind::invalid_argument, "sequence_lens must be 1-D with one length per batch entry");
    std::vector<std::int64_t> len_dims(in.ndim(), 1);
    len_dims[batch] = static_cast<std::int64_t>(in.lens()[batch]);
    auto len = ctx.add("convert", {args[1]}, value_map{{"target_type", "int64_type"}});
    len = ctx.add("reshape", {len}, value_map{{"dims", int_list(len_dims)}});
    auto t = iota_along(ctx, in.lens()[time], time, in.ndim());
    auto reversed = ctx.add("sub", {ctx.add("sub", {len, ctx.add_scalar(dtype::int64_type, 1)}), t});
    auto idx = ctx.add("where", {ctx.add("less", {t, len}), reversed, t});
    idx = ctx.add("broadcast", {idx}, value_map{{"out_lens", int_list(in.lens())}});
    return {ctx.add("gather_elements", {args[0], idx}, value_map{{"axis", static_cast<std::int64_t>(time)}})};
}

// Two topk instructions, one per ONNX output. k is an input from opset 10.
args_t parse_topk(const node_context& ctx, const args_t& args) {
    std::int64_t k = 0;
    if (ctx.opset() < 10) {
        ctx.expect_inputs(args, 1, 1);
        k = ctx.get_int("k", 0);
    } else {
        ctx.expect_inputs(args, 2, 2);
        k = constant_int(ctx, args[1], "the K input");
    }
    args_t outputs;
    for (std::int64_t out : {0, 1})
        outputs.push_back(ctx.add("topk", {args[0]},
                                  value_map{{"k", k},
                                            {"axis", ctx.get_int("axis", -1)},
                                            {"largest", ctx.get_int("largest", 1) != 0},
                                            {"sorted", ctx.get_int("sorted", 1) != 0},
                                            {"output", out}}));
    return outputs;
}

// A gather of the positions where a constant condition holds.
args_t parse_compress(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    const auto keep = required_constant(ctx, args[1], "the condition input").to_vector<double>();
    auto x = args[0];
    std::int64_t axis = 0;
    if (ctx.has_attribute("axis")) {
        axis = normalize_axis(ctx, ctx.get_int("axis", 0), x->get_shape().ndim());
    } else {
        x = ctx.add("reshape", {x}, value_map{{"dims", int_list(std::vector<std::int64_t>{-1})}});
    }
    const std::size_t extent = x->get_shape().lens()[static_cast<std::size_t>(axis)];
    if (keep.size() > extent)
        ctx.fail(error_kind::invalid_argument, "condition has " + std::to_string(keep.size()) +
                                                   " entries but the axis has extent " + std::to_string(extent));
    std::vector<std::int64_t> positions;
    for (std::size_t i = 0; i < keep.size(); ++i)
        if (keep[i] != 0) positions.push_back(static_cast<std::int64_t>(i));
    auto idx = ctx.add_literal(literal(shape{dtype::int64_type, {positions.size()}}, positions));
    return {ctx.add("gather", {x, idx}, value_map{{"axis", axis}})};
}

// Indices [rank, count] of the non-zero elements of a constant input.
args_t parse_non_zero(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    const literal in = required_constant(ctx, args[0], "the input");
    const auto values = in.to_vector<double>();
    const auto& lens = in.get_shape().lens();
    std::vector<std::size_t> hits;
    for (std::size_t i = 0; i < values.size(); ++i)
        if (values[i] != 0) hits.push_back(i);
    std::vector<std::int64_t> out(lens.size() * hits.size());
    for (std::size_t h = 0; h < hits.size(); ++h) {
        std::size_t rest = hits[h];
        for (std::size_t d = lens.size(); d-- > 0;) {
            out[d * hits.size() + h] = static_cast<std::int64_t>(rest % lens[d]);
            rest /= lens[d];
        }
    }
    return {ctx.add_literal(literal(shape{dtype::int64_type, {lens.size(), hits.size()}}, out))};
}

}  // namespace

void add_sequence_gen_parsers(parser_table& table) {
    table["Range"] = parse_range;
    table["EyeLike"] = parse_eye_like;
    table["OneHot"] = parse_one_hot;
    table["Trilu"] = parse_trilu;
    table["Tile"] = parse_tile;
    table["CumSum"] = parse_cumsum;
    table["ReverseSequence"] = parse_reverse_sequence;
    table["TopK"] = parse_topk;
    table["Compress"] = parse_compress;
    table["NonZero"] = parse_non_zero;
}

}  // namespace kiln::onnx_import
