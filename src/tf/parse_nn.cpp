// Neural-network TensorFlow ops: Conv2D, DepthwiseConv2dNative,
// Conv2DBackpropInput, MaxPool, AvgPool and their 3-D forms (on NCHW inside, transposed around when the node is NHWC),
// FusedBatchNorm (inference), BiasAdd, MatMul and BatchMatMul.
#include <algorithm>
#include <optional>

#include "tf/tf_parser.hpp"

namespace kiln::tf_import {

namespace {

using ints = std::vector<std::int64_t>;

// The two spatial entries of a 4-value attribute given in the node's layout.
ints spatial(const node_context& ctx, const std::string& name, const ints& values) {
    if (values.size() != 4)
        ctx.fail(error_kind::invalid_argument,
                 "attribute '" + name + "' must have 4 values, got " + std::to_string(values.size()));
    ints out = ctx.nhwc() ? ints{values[1], values[2]} : ints{values[2], values[3]};
    for (auto v : out)
        if (v < 1)
            ctx.fail(error_kind::invalid_argument,
                     "attribute '" + name + "' must be positive, got " + std::to_string(v));
    return out;
}

// Kiln's padding [begin_h, begin_w, end_h, end_w] for TensorFlow's padding
// attribute. SAME puts the odd extra padding at the end.
ints resolve_padding(const node_context& ctx, const std::vector<std::size_t>& nchw_lens, const ints& kernel,
                     const ints& stride, const ints& dilation) {
    std::string padding = ctx.get_string("padding", "VALID");
    if (padding == "VALID") return ints(4, 0);
    if (padding == "EXPLICIT") {
        ints e = ctx.get_ints("explicit_paddings");
        if (e.size() != 8)
            ctx.fail(error_kind::invalid_argument,
                     "explicit_paddings must have 8 values, got " + std::to_string(e.size()));
        // Pairs (before, after) per dim in the node's layout.
        std::size_t h = ctx.nhwc() ? 1 : 2;
        return {e[2 * h], e[2 * h + 2], e[2 * h + 1], e[2 * h + 3]};
    }
    if (padding != "SAME") ctx.fail(error_kind::not_implemented, "padding '" + padding + "' is not supported");
    ints pads(4, 0);
    for (std::size_t i = 0; i < 2; ++i) {
        auto in = static_cast<std::int64_t>(nchw_lens[2 + i]);
        std::int64_t out = (in + stride[i] - 1) / stride[i];
        std::int64_t extent = (kernel[i] - 1) * dilation[i] + 1;
        std::int64_t total = std::max<std::int64_t>((out - 1) * stride[i] + extent - in, 0);
        pads[i] = total / 2;
        pads[2 + i] = total - total / 2;
    }
    return pads;
}

const std::vector<std::int64_t> hwio_to_oihw{3, 2, 0, 1};

instruction_ref convolve(const node_context& ctx, instruction_ref x, instruction_ref w_oihw, std::int64_t group) {
    auto xc = ctx.to_nchw(x);
    const auto& wl = w_oihw->get_shape().lens();
    ints kernel{static_cast<std::int64_t>(wl[2]), static_cast<std::int64_t>(wl[3])};
    auto stride = spatial(ctx, "strides", ctx.get_ints("strides", {1, 1, 1, 1}));
    auto dilation = spatial(ctx, "dilations", ctx.get_ints("dilations", {1, 1, 1, 1}));
    auto pads = resolve_padding(ctx, xc->get_shape().lens(), kernel, stride, dilation);
    // A zero Pad of the spatial dims just before: the convolution's own padding.
    if (const auto* padded = ctx.zero_pad(xc)) {
        const auto& p = padded->second;  // [n, c, h, w] begins then ends
        if (p[0] == 0 && p[1] == 0 && p[4] == 0 && p[5] == 0) {
            xc = padded->first;
            pads = {pads[0] + p[2], pads[1] + p[3], pads[2] + p[6], pads[3] + p[7]};
        }
    }
    auto y = ctx.add("convolution", {xc, w_oihw},
                     value_map{{"padding", int_list(pads)},
                               {"stride", int_list(stride)},
                               {"dilation", int_list(dilation)},
                               {"group", group}});
    return ctx.from_nchw(y);
}

args_t parse_conv2d(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    const auto& x = args[0]->get_shape().lens();
    const auto& w = args[1]->get_shape().lens();
    if (x.size() != 4 || w.size() != 4)
        ctx.fail(error_kind::invalid_argument,
                 "input and filter must be 4-D, got " + to_string(x) + " and " + to_string(w));
    std::size_t channels = ctx.nhwc() ? x[3] : x[1];
    if (w[2] == 0 || channels % w[2] != 0)
        ctx.fail(error_kind::invalid_argument,
                 "filter " + to_string(w) + " does not fit " + std::to_string(channels) + " input channels");
    auto w_oihw = ctx.fold("transpose", args[1], value_map{{"permutation", int_list(hwio_to_oihw)}});
    return {convolve(ctx, args[0], w_oihw, static_cast<std::int64_t>(channels / w[2]))};
}

args_t parse_depthwise(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    const auto& x = args[0]->get_shape().lens();
    const auto& w = args[1]->get_shape().lens();
    if (x.size() != 4 || w.size() != 4)
        ctx.fail(error_kind::invalid_argument,
                 "input and filter must be 4-D, got " + to_string(x) + " and " + to_string(w));
    std::size_t channels = ctx.nhwc() ? x[3] : x[1];
    if (w[2] != channels)
        ctx.fail(error_kind::invalid_argument,
                 "filter " + to_string(w) + " does not fit " + std::to_string(channels) + " input channels");
    // [H, W, C, M] -> [H, W, 1, C*M]: output channel c*M + m, as TensorFlow numbers them.
    auto flat = ctx.fold("reshape", args[1],
                         value_map{{"dims", int_list(std::vector<std::size_t>{w[0], w[1], 1, w[2] * w[3]})}});
    auto w_oihw = ctx.fold("transpose", flat, value_map{{"permutation", int_list(hwio_to_oihw)}});
    return {convolve(ctx, args[0], w_oihw, static_cast<std::int64_t>(channels))};
}

parse_function parse_pool(std::string mode) {
    return [mode](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, 1, 1);
        auto xc = ctx.to_nchw(args[0]);
        if (xc->get_shape().lens().size() != 4) ctx.fail(error_kind::invalid_argument, "input must be 4-D");
        auto kernel = spatial(ctx, "ksize", ctx.get_ints("ksize"));
        auto stride = spatial(ctx, "strides", ctx.get_ints("strides", {1, 1, 1, 1}));
        ints dilation{1, 1};
        auto pads = resolve_padding(ctx, xc->get_shape().lens(), kernel, stride, dilation);
        // A zero Pad of the spatial dims just before becomes the pool's padding:
        // for max when the padded values are never negative (a Relu's), for
        // average when the pool itself does not pad (the zeros then count).
        bool count_pad = false;
        if (const auto* padded = ctx.zero_pad(xc)) {
            const auto& p = padded->second;
            bool spatial_only = p[0] == 0 && p[1] == 0 && p[4] == 0 && p[5] == 0;
            bool own_padding = std::any_of(pads.begin(), pads.end(), [](auto v) { return v != 0; });
            bool fits = mode == "max" ? padded->first->name() == "relu" : !own_padding;
            if (spatial_only && fits) {
                xc = padded->first;
                pads = {pads[0] + p[2], pads[1] + p[3], pads[2] + p[6], pads[3] + p[7]};
                count_pad = mode == "average";
            }
        }
        auto y = ctx.add("pooling", {xc},
                         value_map{{"mode", mode},
                                   {"lengths", int_list(kernel)},
                                   {"stride", int_list(stride)},
                                   {"padding", int_list(pads)},
                                   {"dilation", int_list(dilation)},
                                   {"ceil_mode", false},
                                   {"count_include_pad", count_pad}});
        return {ctx.from_nchw(y)};
    };
}

// Conv2DBackpropInput(input_sizes, filter, out_backprop): the transposed
// convolution whose output is the forward convolution's input, of the given
// size; the forward padding is resolved on that size, and what the stride
// leaves over becomes output padding.
args_t parse_conv2d_backprop_input(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 3);
    auto sizes = ctx.constant_ints(args[0], "input_sizes");
    const auto& w = args[1]->get_shape().lens();
    if (sizes.size() != 4 || w.size() != 4 || args[2]->get_shape().lens().size() != 4)
        ctx.fail(error_kind::invalid_argument, "input_sizes, filter and out_backprop must be 4-D");
    for (auto v : sizes)
        if (v < 1) ctx.fail(error_kind::invalid_argument, "input_sizes must be positive");
    auto dy = ctx.to_nchw(args[2]);
    const auto& dl = dy->get_shape().lens();
    if (dl[1] != w[3])
        ctx.fail(error_kind::invalid_argument,
                 "filter " + to_string(w) + " does not fit " + std::to_string(dl[1]) + " out_backprop channels");
    ints out = ctx.nhwc() ? ints{sizes[0], sizes[3], sizes[1], sizes[2]} : sizes;
    if (out[1] != static_cast<std::int64_t>(w[2]))
        ctx.fail(error_kind::invalid_argument,
                 "filter " + to_string(w) + " does not make " + std::to_string(out[1]) + " channels");
    ints kernel{static_cast<std::int64_t>(w[0]), static_cast<std::int64_t>(w[1])};
    auto stride = spatial(ctx, "strides", ctx.get_ints("strides", {1, 1, 1, 1}));
    auto dilation = spatial(ctx, "dilations", ctx.get_ints("dilations", {1, 1, 1, 1}));
    auto pads = resolve_padding(ctx, std::vector<std::size_t>(out.begin(), out.end()), kernel, stride, dilation);
    ints extra(2);
    for (std::size_t i = 0; i < 2; ++i) {
        std::int64_t natural = (static_cast<std::int64_t>(dl[2 + i]) - 1) * stride[i] + (kernel[i] - 1) * dilation[i] +
                               1 - pads[i] - pads[2 + i];
        extra[i] = out[2 + i] - natural;
        if (extra[i] < 0 || extra[i] >= stride[i])
            ctx.fail(error_kind::invalid_argument,
                     "input_sizes " + to_string(std::vector<std::size_t>(sizes.begin(), sizes.end())) +
                         " do not fit out_backprop " + to_string(args[2]->get_shape().lens()));
    }
    // HWIO with I the output's channels: [O, I, H, W] is the transposed convolution's weight.
    auto w_t = ctx.fold("transpose", args[1], value_map{{"permutation", int_list(hwio_to_oihw)}});
    auto y = ctx.add("convolution_transpose", {dy, w_t},
                     value_map{{"padding", int_list(pads)},
                               {"stride", int_list(stride)},
                               {"dilation", int_list(dilation)},
                               {"output_padding", int_list(extra)},
                               {"group", std::int64_t{1}}});
    return {ctx.from_nchw(y)};
}

// MaxPool3D / AvgPool3D on NDHWC (or NCDHW) values: pooling on NCDHW.
parse_function parse_pool3d(std::string mode) {
    return [mode](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, 1, 1);
        const auto& lens = args[0]->get_shape().lens();
        if (lens.size() != 5) ctx.fail(error_kind::invalid_argument, "input must be 5-D, got " + to_string(lens));
        bool channels_last = ctx.get_string("data_format", "NDHWC") != "NCDHW";
        auto ksize = ctx.get_ints("ksize");
        auto strides = ctx.get_ints("strides", {1, 1, 1, 1, 1});
        if (ksize.size() != 5 || strides.size() != 5)
            ctx.fail(error_kind::invalid_argument, "ksize and strides must have 5 values");
        std::size_t first = channels_last ? 1 : 2;
        ints kernel(ksize.begin() + static_cast<std::ptrdiff_t>(first),
                    ksize.begin() + static_cast<std::ptrdiff_t>(first + 3));
        ints stride(strides.begin() + static_cast<std::ptrdiff_t>(first),
                    strides.begin() + static_cast<std::ptrdiff_t>(first + 3));
        for (std::size_t i = 0; i < 3; ++i)
            if (kernel[i] < 1 || stride[i] < 1)
                ctx.fail(error_kind::invalid_argument, "ksize and strides must be positive");
        auto x = args[0];
        if (channels_last) {
            x = ctx.add("transpose", {x}, value_map{{"permutation", int_list(ints{0, 4, 1, 2, 3})}});
            x = ctx.add("contiguous", {x});
        }
        const auto& xl = x->get_shape().lens();
        std::string padding = ctx.get_string("padding", "VALID");
        if (padding != "VALID" && padding != "SAME")
            ctx.fail(error_kind::not_implemented, "padding '" + padding + "' is not supported");
        ints pads(6, 0);
        for (std::size_t i = 0; padding == "SAME" && i < 3; ++i) {
            auto in = static_cast<std::int64_t>(xl[2 + i]);
            std::int64_t out = (in + stride[i] - 1) / stride[i];
            std::int64_t total = std::max<std::int64_t>((out - 1) * stride[i] + kernel[i] - in, 0);
            pads[i] = total / 2;
            pads[3 + i] = total - total / 2;
        }
        auto y = ctx.add("pooling", {x},
                         value_map{{"mode", mode},
                                   {"lengths", int_list(kernel)},
                                   {"stride", int_list(stride)},
                                   {"padding", int_list(pads)},
                                   {"dilation", int_list(ints{1, 1, 1})},
                                   {"ceil_mode", false},
                                   {"count_include_pad", false}});
        if (channels_last) y = ctx.add("transpose", {y}, value_map{{"permutation", int_list(ints{0, 2, 3, 4, 1})}});
        return {y};
    };
}

// A per-channel vector [C] shaped to broadcast over x in the node's layout.
instruction_ref per_channel(const node_context& ctx, instruction_ref v, std::size_t rank) {
    if (ctx.nhwc() || rank < 2) return v;
    std::vector<std::int64_t> dims{-1};
    dims.insert(dims.end(), rank - 2, 1);
    return ctx.add("reshape", {v}, value_map{{"dims", int_list(dims)}});
}

// y = x * scale / sqrt(variance + epsilon) + (offset - mean * scale / sqrt(variance + epsilon))
args_t parse_fused_batch_norm(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 5, 5);
    // TensorFlow's default is training mode; a graph frozen for inference says is_training=false.
    if (ctx.get_bool("is_training", true))
        ctx.fail(error_kind::not_implemented, "training-mode FusedBatchNorm is not supported (is_training is true)");
    auto x = args[0];
    const double epsilon = ctx.get_float("epsilon", 1e-4);
    // On NCHW (the node's layout, or the NCHW form a convolution left): Kiln's
    // batch_norm_inference, which the optimizer folds into that convolution.
    std::optional<instruction_ref> nchw = ctx.nhwc() ? ctx.known_nchw(x) : std::optional<instruction_ref>(x);
    bool same_type = true;
    for (std::size_t i = 1; i < 5; ++i) same_type = same_type && args[i]->get_shape().type() == x->get_shape().type();
    if (nchw && same_type && (*nchw)->get_shape().lens().size() >= 2) {
        auto y = ctx.add("batch_norm_inference", {*nchw, args[1], args[2], args[3], args[4]},
                         value_map{{"epsilon", epsilon}});
        return {ctx.nhwc() ? ctx.nhwc_of(y) : y};
    }
    dtype t = x->get_shape().type();
    auto as_x = [&](instruction_ref v) {
        return v->get_shape().type() == t ? v : ctx.add("convert", {v}, value_map{{"target_type", to_string(t)}});
    };
    auto eps = ctx.add_scalar(args[4]->get_shape().type(), epsilon);
    auto inv = ctx.add("rsqrt", {ctx.add("add", {args[4], eps})});
    auto scale = ctx.add("mul", {args[1], inv});
    auto shift = ctx.add("sub", {args[2], ctx.add("mul", {args[3], scale})});
    std::size_t rank = x->get_shape().lens().size();
    auto y =
        ctx.add("add", {ctx.add("mul", {x, per_channel(ctx, as_x(scale), rank)}), per_channel(ctx, as_x(shift), rank)});
    return {y};
}

args_t parse_bias_add(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    return {ctx.pointwise("add", {args[0], per_channel(ctx, args[1], args[0]->get_shape().lens().size())})};
}

// Swaps the last two dims.
instruction_ref transposed(const node_context& ctx, instruction_ref x) {
    std::size_t rank = x->get_shape().lens().size();
    if (rank < 2) ctx.fail(error_kind::invalid_argument, "matmul operands must have at least 2 dims");
    std::vector<std::int64_t> perm;
    for (std::size_t i = 0; i < rank; ++i) perm.push_back(static_cast<std::int64_t>(i));
    std::swap(perm[rank - 1], perm[rank - 2]);
    return ctx.fold("transpose", x, value_map{{"permutation", int_list(perm)}});
}

parse_function parse_matmul(std::string adj_a, std::string adj_b) {
    return [adj_a, adj_b](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, 2, 2);
        auto a = ctx.get_bool(adj_a, false) ? transposed(ctx, args[0]) : args[0];
        auto b = ctx.get_bool(adj_b, false) ? transposed(ctx, args[1]) : args[1];
        return {ctx.add("dot", {a, b})};
    };
}

}  // namespace

void add_nn_parsers(parser_table& table) {
    table["Conv2D"] = parse_conv2d;
    table["DepthwiseConv2dNative"] = parse_depthwise;
    table["MaxPool"] = parse_pool("max");
    table["AvgPool"] = parse_pool("average");
    table["MaxPool3D"] = parse_pool3d("max");
    table["AvgPool3D"] = parse_pool3d("average");
    table["Conv2DBackpropInput"] = parse_conv2d_backprop_input;
    table["FusedBatchNorm"] = parse_fused_batch_norm;
    table["FusedBatchNormV2"] = parse_fused_batch_norm;
    table["FusedBatchNormV3"] = parse_fused_batch_norm;
    table["BiasAdd"] = parse_bias_add;
    table["MatMul"] = parse_matmul("transpose_a", "transpose_b");
    table["BatchMatMul"] = parse_matmul("adj_x", "adj_y");
    table["BatchMatMulV2"] = parse_matmul("adj_x", "adj_y");
    table["BatchMatMulV3"] = parse_matmul("adj_x", "adj_y");
}

}  // namespace kiln::tf_import
