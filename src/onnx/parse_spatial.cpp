// ONNX ops that move data between channels and space (DepthToSpace,
// SpaceToDepth: reshape + transpose + reshape) and Lp pooling (the window sum
// of |x|^p as a depthwise convolution with a kernel of ones, then the p-th root).
#include <cmath>

#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;
using dims_t = std::vector<std::int64_t>;

dtype type_of(instruction_ref x) {
    return x->get_shape().type();
}

struct nchw {
    std::int64_t n, c, h, w;
};

nchw dims4(const node_context& ctx, instruction_ref x) {
    const auto& l = x->get_shape().lens();
    if (l.size() != 4) ctx.fail(error_kind::invalid_argument, "input must be [N, C, H, W], got " + to_string(l));
    return {static_cast<std::int64_t>(l[0]), static_cast<std::int64_t>(l[1]), static_cast<std::int64_t>(l[2]),
            static_cast<std::int64_t>(l[3])};
}

std::int64_t blocksize(const node_context& ctx) {
    std::int64_t b = ctx.get_int("blocksize", 0);
    if (b <= 0) ctx.fail(error_kind::invalid_argument, "attribute 'blocksize' must be positive");
    return b;
}

instruction_ref rearrange(const node_context& ctx, instruction_ref x, const dims_t& split, const dims_t& perm,
                          const dims_t& merged) {
    auto y = ctx.add("reshape", {x}, value_map{{"dims", int_list(split)}});
    y = ctx.add("transpose", {y}, value_map{{"permutation", int_list(perm)}});
    return ctx.add("reshape", {y}, value_map{{"dims", int_list(merged)}});
}

// DCR reads channels as [block row, block col, C'], CRD as [C', block row, block col].
args_t parse_depth_to_space(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    const auto d = dims4(ctx, args[0]);
    const std::int64_t b = blocksize(ctx);
    if (d.c % (b * b) != 0)
        ctx.fail(error_kind::invalid_argument, "channels " + std::to_string(d.c) + " are not divisible by blocksize^2");
    const std::int64_t c = d.c / (b * b);
    const dims_t merged{d.n, c, d.h * b, d.w * b};
    if (ctx.get_string("mode", "DCR") == "CRD")
        return {rearrange(ctx, args[0], {d.n, c, b, b, d.h, d.w}, {0, 1, 4, 2, 5, 3}, merged)};
    return {rearrange(ctx, args[0], {d.n, b, b, c, d.h, d.w}, {0, 3, 4, 1, 5, 2}, merged)};
}

args_t parse_space_to_depth(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    const auto d = dims4(ctx, args[0]);
    const std::int64_t b = blocksize(ctx);
    if (d.h % b != 0 || d.w % b != 0)
        ctx.fail(error_kind::invalid_argument, "height and width must be divisible by blocksize " + std::to_string(b));
    const dims_t split{d.n, d.c, d.h / b, b, d.w / b, b};
    const dims_t merged{d.n, d.c * b * b, d.h / b, d.w / b};
    // DCR (the default) puts the block offsets before the channels, CRD after them.
    if (ctx.get_string("mode", "DCR") == "CRD") return {rearrange(ctx, args[0], split, {0, 1, 3, 5, 2, 4}, merged)};
    return {rearrange(ctx, args[0], split, {0, 3, 5, 1, 2, 4}, merged)};
}

instruction_ref abs_power(const node_context& ctx, instruction_ref x, std::int64_t p) {
    if (p == 1) return ctx.add("abs", {x});
    if (p == 2) return ctx.add("mul", {x, x});
    return ctx.add("pow", {ctx.add("abs", {x}), ctx.add_scalar(type_of(x), static_cast<double>(p))});
}

instruction_ref root(const node_context& ctx, instruction_ref sum, std::int64_t p) {
    if (p == 1) return sum;
    if (p == 2) return ctx.add("sqrt", {sum});
    return ctx.add("pow", {sum, ctx.add_scalar(type_of(sum), 1.0 / static_cast<double>(p))});
}

std::int64_t exponent(const node_context& ctx) {
    std::int64_t p = ctx.get_int("p", 2);
    if (p < 1) ctx.fail(error_kind::invalid_argument, "p must be positive, got " + std::to_string(p));
    return p;
}

// Padding as pooling has it; ceil_mode becomes extra end padding, which adds
// zeros to the sums.
dims_t lp_pool_pads(const node_context& ctx, const std::vector<std::size_t>& lens, const dims_t& kernel,
                    const dims_t& stride, const dims_t& dilation) {
    const std::size_t rank = kernel.size();
    const std::string auto_pad = ctx.get_string("auto_pad", "NOTSET");
    dims_t pads(2 * rank, 0);
    if (auto_pad == "NOTSET")
        pads = ctx.get_ints("pads", pads);
    else if (auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
        ctx.fail(error_kind::invalid_argument,
                 "auto_pad '" + auto_pad + "' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER");
    if (pads.size() != 2 * rank) ctx.fail(error_kind::invalid_argument, "pads needs 2 values per spatial dim");
    // Checked here because the arithmetic below indexes and divides by them.
    if (lens.size() != rank + 2 || stride.size() != rank || dilation.size() != rank)
        ctx.fail(error_kind::invalid_argument, "input rank, kernel_shape, strides and dilations disagree");
    for (std::size_t i = 0; i < rank; ++i)
        if (stride[i] < 1 || dilation[i] < 1 || kernel[i] < 1)
            ctx.fail(error_kind::invalid_argument, "kernel_shape, strides and dilations must be at least 1");
    const bool ceil_mode = ctx.get_int("ceil_mode", 0) != 0;
    for (std::size_t i = 0; i < rank; ++i) {
        const auto in = static_cast<std::int64_t>(lens[i + 2]);
        const std::int64_t extent = (kernel[i] - 1) * dilation[i] + 1;
        if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
            const std::int64_t out = (in + stride[i] - 1) / stride[i];
            const std::int64_t total = std::max<std::int64_t>(0, (out - 1) * stride[i] + extent - in);
            pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
            pads[i + rank] = total - pads[i];
        }
        const std::int64_t span = in + pads[i] + pads[i + rank] - extent;
        if (!ceil_mode || span < 0 || span % stride[i] == 0) continue;
        std::int64_t out = span / stride[i] + 2;
        // A last window starting in the end padding is dropped, as for pooling.
        if ((out - 1) * stride[i] >= in + pads[i]) --out;
        pads[i + rank] += std::max<std::int64_t>(0, (out - 1) * stride[i] + extent - (in + pads[i] + pads[i + rank]));
    }
    return pads;
}

args_t parse_lp_pool(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto x = args[0];
    const auto& lens = x->get_shape().lens();
    if (lens.size() < 3) ctx.fail(error_kind::invalid_argument, "input must be [N, C, spatial...]");
    const std::size_t rank = lens.size() - 2;
    auto kernel = ctx.get_ints("kernel_shape");
    if (kernel.size() != rank)
        ctx.fail(error_kind::invalid_argument, "kernel_shape must give one extent per spatial dim");
    auto stride = ctx.get_ints("strides", dims_t(rank, 1));
    auto dilation = ctx.get_ints("dilations", dims_t(rank, 1));
    if (stride.size() != rank || dilation.size() != rank)
        ctx.fail(error_kind::invalid_argument, "strides and dilations need one value per spatial dim");
    auto pads = lp_pool_pads(ctx, lens, kernel, stride, dilation);
    // Depthwise kernel of ones [C, 1, kernel...].
    std::vector<std::size_t> wlens{lens[1], 1};
    std::size_t count = lens[1];
    for (auto k : kernel) {
        wlens.push_back(static_cast<std::size_t>(k));
        count *= static_cast<std::size_t>(k);
    }
    auto ones = ctx.add_literal(literal(shape{type_of(x), wlens}, std::vector<double>(count, 1.0)));
    value_map attrs{{"padding", int_list(pads)},
                    {"stride", int_list(stride)},
                    {"dilation", int_list(dilation)},
                    {"group", static_cast<std::int64_t>(lens[1])}};
    const std::int64_t p = exponent(ctx);
    return {root(ctx, ctx.add("convolution", {abs_power(ctx, x, p), ones}, attrs), p)};
}

args_t parse_global_lp_pool(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    const auto& lens = args[0]->get_shape().lens();
    if (lens.size() < 3) ctx.fail(error_kind::invalid_argument, "input must be [N, C, spatial...]");
    dims_t axes;
    for (std::size_t d = 2; d < lens.size(); ++d) axes.push_back(static_cast<std::int64_t>(d));
    const std::int64_t p = exponent(ctx);
    auto sum =
        ctx.add("reduce_sum", {abs_power(ctx, args[0], p)}, value_map{{"axes", int_list(axes)}, {"keepdims", true}});
    return {root(ctx, sum, p)};
}

}  // namespace

void add_spatial_parsers(parser_table& table) {
    table["DepthToSpace"] = parse_depth_to_space;
    table["SpaceToDepth"] = parse_space_to_depth;
    table["LpPool"] = parse_lp_pool;
    table["GlobalLpPool"] = parse_global_lp_pool;
}

}  // namespace kiln::onnx_import
