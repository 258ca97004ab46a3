// Shape and data-movement TensorFlow ops (Reshape, Squeeze, ExpandDims,
// Transpose, ConcatV2, Shape, StridedSlice, Pad) and the reductions. Their
// shape operands must be constants: Kiln's shapes are static.
#include <algorithm>
#include <numeric>
#include <optional>

#include "tf/tf_parser.hpp"

namespace kiln::tf_import {

namespace {

using ints = std::vector<std::int64_t>;

std::size_t rank_of(instruction_ref x) {
    return x->get_shape().lens().size();
}

std::int64_t normalize_axis(const node_context& ctx, std::int64_t axis, std::size_t rank, const std::string& what) {
    auto r = static_cast<std::int64_t>(rank);
    if (axis < -r || axis >= r)
        ctx.fail(error_kind::invalid_argument,
                 what + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    return axis < 0 ? axis + r : axis;
}

args_t parse_reshape(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    auto dims = ctx.constant_ints(args[1], "the shape input");
    const auto& lens = args[0]->get_shape().lens();
    const std::size_t total = std::accumulate(lens.begin(), lens.end(), std::size_t{1}, std::multiplies<>());
    std::size_t known = 1;
    int inferred = -1;
    for (std::size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] == -1) {
            if (inferred >= 0) ctx.fail(error_kind::invalid_argument, "the shape has more than one -1");
            inferred = static_cast<int>(i);
        } else if (dims[i] < 0) {
            ctx.fail(error_kind::invalid_argument, "the shape has a negative extent " + std::to_string(dims[i]));
        } else {
            known *= static_cast<std::size_t>(dims[i]);
        }
    }
    if (inferred >= 0) {
        if (known == 0 || total % known != 0)
            ctx.fail(error_kind::invalid_argument,
                     "cannot infer the -1 in the shape for " + std::to_string(total) + " elements");
        dims[static_cast<std::size_t>(inferred)] = static_cast<std::int64_t>(total / known);
    } else if (known != total) {
        ctx.fail(error_kind::invalid_argument, "cannot reshape " + to_string(lens) + " (" + std::to_string(total) +
                                                   " elements) to " + std::to_string(known) + " elements");
    }
    return {ctx.add("reshape", {args[0]}, value_map{{"dims", int_list(dims)}})};
}

args_t parse_squeeze(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    const auto& lens = args[0]->get_shape().lens();
    ints axes;
    for (auto a : ctx.get_ints("squeeze_dims")) axes.push_back(normalize_axis(ctx, a, lens.size(), "squeeze dim"));
    if (axes.empty())
        for (std::size_t i = 0; i < lens.size(); ++i)
            if (lens[i] == 1) axes.push_back(static_cast<std::int64_t>(i));
    if (axes.empty()) return {args[0]};
    return {ctx.add("squeeze", {args[0]}, value_map{{"axes", int_list(axes)}})};
}

args_t parse_expand_dims(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    auto axis = ctx.constant_ints(args[1], "the axis input");
    if (axis.size() != 1) ctx.fail(error_kind::invalid_argument, "the axis input must hold one value");
    auto a = normalize_axis(ctx, axis[0], rank_of(args[0]) + 1, "axis");
    return {ctx.add("unsqueeze", {args[0]}, value_map{{"axes", int_list(ints{a})}})};
}

args_t parse_transpose(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    auto perm = ctx.constant_ints(args[1], "the perm input");
    return {ctx.add("transpose", {args[0]}, value_map{{"permutation", int_list(perm)}})};
}

args_t parse_concat(const node_context& ctx, const args_t& args) {
    if (args.size() < 2) ctx.fail(error_kind::invalid_argument, "expects values and an axis");
    auto axis = ctx.constant_ints(args.back(), "the axis input");
    if (axis.size() != 1) ctx.fail(error_kind::invalid_argument, "the axis input must hold one value");
    args_t values(args.begin(), args.end() - 1);
    auto a = normalize_axis(ctx, axis[0], rank_of(values[0]), "axis");
    if (values.size() == 1) return {values[0]};
    return {ctx.add("concat", values, value_map{{"axis", a}})};
}

// Pack: the inputs stacked along a new axis.
args_t parse_pack(const node_context& ctx, const args_t& args) {
    if (args.empty()) ctx.fail(error_kind::invalid_argument, "expects at least one input");
    auto a = normalize_axis(ctx, ctx.get_int("axis", 0), rank_of(args[0]) + 1, "axis");
    args_t parts;
    for (auto x : args) parts.push_back(ctx.add("unsqueeze", {x}, value_map{{"axes", int_list(ints{a})}}));
    if (parts.size() == 1) return parts;
    return {ctx.add("concat", parts, value_map{{"axis", a}})};
}

args_t parse_shape(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    dtype t = ctx.has_attribute("out_type") ? ctx.get_type("out_type") : dtype::int32_type;
    const auto& lens = args[0]->get_shape().lens();
    std::vector<double> values(lens.begin(), lens.end());
    return {ctx.add_literal(literal(shape(t, {lens.size()}), values))};
}

args_t parse_strided_slice(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 4, 4);
    auto begin = ctx.constant_ints(args[1], "begin");
    auto end = ctx.constant_ints(args[2], "end");
    auto strides = ctx.constant_ints(args[3], "strides");
    if (begin.size() != end.size() || begin.size() != strides.size())
        ctx.fail(error_kind::invalid_argument, "begin, end and strides must have the same length");
    if (begin.size() > 32) ctx.fail(error_kind::invalid_argument, "more than 32 slice indices");
    auto bit = [&](const char* mask, std::size_t i) { return (ctx.get_int(mask, 0) >> i) & 1; };
    const auto& lens = args[0]->get_shape().lens();
    const std::size_t rank = lens.size();
    std::size_t real_entries = 0;  // spec entries that index an input dim (not ellipsis, not new axis)
    for (std::size_t i = 0; i < begin.size(); ++i)
        if (!bit("ellipsis_mask", i) && !bit("new_axis_mask", i)) ++real_entries;
    ints axes, starts, ends, steps;
    std::vector<std::pair<std::int64_t, ints>> reversed;  // dims with a negative stride: indices taken
    std::vector<std::int64_t> out_dims;                   // -1 marks nothing; values are final extents
    std::size_t dim = 0;
    auto full_dim = [&](std::size_t d) { out_dims.push_back(static_cast<std::int64_t>(lens[d])); };
    bool seen_ellipsis = false;
    for (std::size_t i = 0; i < begin.size(); ++i) {
        if (bit("ellipsis_mask", i)) {
            if (seen_ellipsis) ctx.fail(error_kind::invalid_argument, "more than one ellipsis");
            seen_ellipsis = true;
            if (real_entries > rank) ctx.fail(error_kind::invalid_argument, "more indices than dims");
            for (std::size_t k = 0; k < rank - real_entries; ++k) full_dim(dim++);
            continue;
        }
        if (bit("new_axis_mask", i)) {
            out_dims.push_back(1);
            continue;
        }
        if (dim >= rank)
            ctx.fail(error_kind::invalid_argument, "more indices than the input's " + std::to_string(rank) + " dims");
        const auto extent = static_cast<std::int64_t>(lens[dim]);
        std::int64_t s = strides[i];
        if (s == 0) ctx.fail(error_kind::invalid_argument, "stride " + std::to_string(i) + " is 0");
        if (bit("shrink_axis_mask", i)) {
            std::int64_t b = begin[i] < 0 ? begin[i] + extent : begin[i];
            if (b < 0 || b >= extent)
                ctx.fail(error_kind::out_of_range, "index " + std::to_string(begin[i]) + " is out of range for dim " +
                                                       std::to_string(dim) + " of extent " + std::to_string(extent));
            axes.push_back(static_cast<std::int64_t>(dim));
            starts.push_back(b);
            ends.push_back(b + 1);
            steps.push_back(1);
            ++dim;
            continue;
        }
        if (s < 0) {
            // Walking backwards: the picked indices, gathered along the dim.
            auto clampn = [&](std::int64_t v) {
                return std::clamp(v < 0 ? v + extent : v, std::int64_t{-1}, extent - 1);
            };
            std::int64_t b = bit("begin_mask", i) ? extent - 1 : clampn(begin[i]);
            std::int64_t e = bit("end_mask", i) ? -1 : clampn(end[i]);
            ints picked;
            for (std::int64_t k = b; k > e; k += s) picked.push_back(k);
            out_dims.push_back(static_cast<std::int64_t>(picked.size()));
            reversed.emplace_back(static_cast<std::int64_t>(dim), picked);
            ++dim;
            continue;
        }
        auto clampi = [&](std::int64_t v) { return std::clamp(v < 0 ? v + extent : v, std::int64_t{0}, extent); };
        std::int64_t b = bit("begin_mask", i) ? 0 : clampi(begin[i]);
        std::int64_t e = bit("end_mask", i) ? extent : clampi(end[i]);
        std::int64_t count = e > b ? (e - b + s - 1) / s : 0;
        out_dims.push_back(count);
        if (b != 0 || e != extent || s != 1) {
            axes.push_back(static_cast<std::int64_t>(dim));
            starts.push_back(b);
            ends.push_back(e);
            steps.push_back(s);
        }
        ++dim;
    }
    while (dim < rank) full_dim(dim++);
    auto y = args[0];
    for (const auto& [axis, picked] : reversed) {
        auto idx = ctx.add_literal(literal(shape(dtype::int64_type, {picked.size()}), picked));
        y = ctx.add("gather", {y, idx}, value_map{{"axis", axis}});
    }
    if (!axes.empty())
        y = ctx.add("slice", {y},
                    value_map{{"axes", int_list(axes)},
                              {"starts", int_list(starts)},
                              {"ends", int_list(ends)},
                              {"steps", int_list(steps)}});
    std::vector<std::size_t> now = y->get_shape().lens();
    if (std::vector<std::size_t>(out_dims.begin(), out_dims.end()) != now)
        y = ctx.add("reshape", {y}, value_map{{"dims", int_list(out_dims)}});
    return {y};
}

// MirrorPad SYMMETRIC (the edge repeated: [a b c] padded by 2 is [b a a b c c b])
// as one gather per padded dim.
instruction_ref symmetric_pad(const node_context& ctx, instruction_ref x, const ints& pads) {
    const auto lens = x->get_shape().lens();
    const std::size_t rank = lens.size();
    for (std::size_t d = 0; d < rank; ++d) {
        auto n = static_cast<std::int64_t>(lens[d]);
        std::int64_t before = pads[d], after = pads[rank + d];
        if (before == 0 && after == 0) continue;
        if (before < 0 || after < 0 || before > n || after > n)
            ctx.fail(error_kind::invalid_argument,
                     "SYMMETRIC paddings of dim " + std::to_string(d) + " must lie in [0, " + std::to_string(n) + "]");
        ints idx;
        for (std::int64_t j = -before; j < n + after; ++j) idx.push_back(j < 0 ? -j - 1 : j >= n ? 2 * n - j - 1 : j);
        auto indices = ctx.add_literal(literal(shape(dtype::int64_type, {idx.size()}), idx));
        x = ctx.add("gather", {x, indices}, value_map{{"axis", static_cast<std::int64_t>(d)}});
    }
    return x;
}

parse_function parse_pad(bool with_value, bool mirror) {
    return [with_value, mirror](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, with_value ? 3 : 2, with_value ? 3 : 2);
        auto paddings = ctx.constant_ints(args[1], "paddings");
        const std::size_t rank = rank_of(args[0]);
        if (paddings.size() != 2 * rank)
            ctx.fail(error_kind::invalid_argument, "paddings must be [" + std::to_string(rank) + ", 2], got " +
                                                       std::to_string(paddings.size()) + " values");
        ints pads(2 * rank);
        for (std::size_t i = 0; i < rank; ++i) {
            pads[i] = paddings[2 * i];
            pads[rank + i] = paddings[2 * i + 1];
        }
        value_map attrs{{"pads", int_list(pads)}};
        if (with_value) {
            if (!args[2]->is_literal() || args[2]->get_shape().elements() != 1)
                ctx.fail(error_kind::not_implemented, "the constant_values input must be a constant scalar");
            attrs.emplace_back("value", args[2]->get_literal().to_vector<double>()[0]);
        }
        if (mirror) {
            std::string mode = ctx.get_string("mode", "REFLECT");
            if (mode == "SYMMETRIC") return {symmetric_pad(ctx, args[0], pads)};
            if (mode != "REFLECT")
                ctx.fail(error_kind::not_implemented, "MirrorPad mode " + mode + " is not supported");
            attrs.emplace_back("mode", std::string("reflect"));
        }
        // A value with an NCHW form (see layout_cache) is padded there.
        // So is a zero padding of the spatial dims of an NHWC value (it folds into
        // the convolution that usually follows).
        auto nchw = ctx.known_nchw(args[0]);
        const bool spatial_zero_pad = rank == 4 && !with_value && !mirror && ctx.nhwc() && pads[0] == 0 &&
                                      pads[3] == 0 && pads[4] == 0 && pads[7] == 0 && !args[0]->is_literal();
        if (!nchw && spatial_zero_pad) nchw = ctx.to_nchw(args[0]);
        if (nchw && rank == 4) {
            const std::size_t order[] = {0, 3, 1, 2};
            ints permuted(8);
            for (std::size_t i = 0; i < 4; ++i) {
                permuted[i] = pads[order[i]];
                permuted[4 + i] = pads[4 + order[i]];
            }
            value_map nchw_attrs = attrs;
            nchw_attrs[0] = {"pads", int_list(permuted)};
            auto padded = ctx.add("pad", {*nchw}, nchw_attrs);
            if (!with_value && !mirror) ctx.note_zero_pad(padded, *nchw, permuted);
            return {ctx.nhwc_of(padded)};
        }
        return {ctx.add("pad", {args[0]}, attrs)};
    };
}

// A reduction of an NHWC value that has an NCHW form (see layout_cache), done on
// that form, as an ONNX model's global pooling is: the cpu target then reduces
// a convolution's channel-blocked result in place, where the reduction of the
// transposed view read it element by element after a copy out of the blocks
// (Keras's GlobalAveragePooling2D: 0.03 + 0.18 ms on MobileNetV2, one thread).
// Kept dims give the NHWC view of the NCHW result; dropped dims a reshape of
// it, when the dims left are in the same order in both layouts (N, C for
// axes {1, 2}); nullopt otherwise.
std::optional<instruction_ref> reduce_nchw_form(const node_context& ctx, const std::string& op, instruction_ref x,
                                                const ints& axes, bool keep) {
    auto nchw = ctx.known_nchw(x);
    if (!nchw || rank_of(x) != 4) return std::nullopt;
    const std::int64_t nchw_position[] = {0, 2, 3, 1};  // NHWC axis -> its NCHW axis
    std::vector<bool> reduced(4, false);
    for (auto a : axes) reduced[static_cast<std::size_t>(normalize_axis(ctx, a, 4, "reduction index"))] = true;
    ints nchw_axes;
    for (std::size_t a = 0; a < 4; ++a)
        if (reduced[a]) nchw_axes.push_back(nchw_position[a]);
    std::sort(nchw_axes.begin(), nchw_axes.end());
    if (!keep) {
        if (std::all_of(reduced.begin(), reduced.end(), [](bool r) { return r; })) return std::nullopt;
        std::int64_t last = -1;
        for (std::size_t a = 0; a < 4; ++a) {
            if (reduced[a]) continue;
            if (nchw_position[a] < last) return std::nullopt;
            last = nchw_position[a];
        }
    }
    auto y = ctx.add(op, {*nchw}, value_map{{"axes", int_list(nchw_axes)}, {"keepdims", true}});
    if (keep) return ctx.nhwc_of(y);
    std::vector<std::size_t> dims;
    const auto& lens = x->get_shape().lens();
    for (std::size_t a = 0; a < 4; ++a)
        if (!reduced[a]) dims.push_back(lens[a]);
    return ctx.add("reshape", {y}, value_map{{"dims", int_list(dims)}});
}

parse_function parse_reduce(std::string op) {
    return [op](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, 2, 2);
        auto axes = ctx.constant_ints(args[1], "the reduction indices");
        // No axes reduces nothing in TensorFlow (all axes in Kiln).
        if (axes.empty()) return {args[0]};
        bool keep = ctx.get_bool("keep_dims", false);
        if (auto y = reduce_nchw_form(ctx, op, args[0], axes, keep)) return {*y};
        return {ctx.add(op, {args[0]}, value_map{{"axes", int_list(axes)}, {"keepdims", keep}})};
    };
}

}  // namespace

void add_shape_parsers(parser_table& table) {
    table["Reshape"] = parse_reshape;
    table["Squeeze"] = parse_squeeze;
    table["ExpandDims"] = parse_expand_dims;
    table["Transpose"] = parse_transpose;
    table["ConcatV2"] = parse_concat;
    table["Pack"] = parse_pack;
    table["Shape"] = parse_shape;
    table["StridedSlice"] = parse_strided_slice;
    table["Pad"] = parse_pad(false, false);
    table["PadV2"] = parse_pad(true, false);
    table["MirrorPad"] = parse_pad(false, true);
    table["Mean"] = parse_reduce("reduce_mean");
    table["Sum"] = parse_reduce("reduce_sum");
    table["Max"] = parse_reduce("reduce_max");
    table["Min"] = parse_reduce("reduce_min");
    table["Prod"] = parse_reduce("reduce_prod");
}

}  // namespace kiln::tf_import
