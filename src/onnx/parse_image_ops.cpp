// ONNX image / signal ops built from existing IR ops:
//  - HannWindow, HammingWindow, BlackmanWindow: the window length must be a
//    constant, so the window is folded into a literal (computed in double);
//  - Col2Im: a scatter-add of every block element into the zero-padded image
//    (flattened per channel), then a slice that drops the padding;
//  - AffineGrid: a constant base grid of normalized coordinates (x, y[, z], 1)
//    multiplied by the transposed theta;
//  - TensorScatter: scatter_elements of the update along the sequence axis at
//    write_indices[b] + i (modulo the cache length in circular mode);
//  - RoiAlign and DeformConv: the roi_align and deform_conv IR ops.
#include <cmath>
#include <numbers>

#include "onnx/onnx_tensor.hpp"
#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

instruction_ref reshape_to(const node_context& ctx, instruction_ref x, const std::vector<std::int64_t>& dims) {
    return ctx.add("reshape", {x}, value_map{{"dims", int_list(dims)}});
}

std::int64_t product(const std::vector<std::int64_t>& v) {
    std::int64_t p = 1;
    for (auto x : v) p *= x;
    return p;
}

// --- windows -----------------------------------------------------------------

// Generalized cosine window sum_j a_j cos(2 pi j k / D), alternating sign,
// with D = N (periodic) or N - 1 (symmetric).
args_t parse_window(const node_context& ctx, const args_t& args, const std::vector<double>& coeffs) {
    ctx.expect_inputs(args, 1, 1);
    const auto size = ctx.constant_ints(args[0], "the window size input");
    if (size.size() != 1) ctx.fail(error_kind::invalid_argument, "the window size must be a scalar");
    if (size[0] < 0) ctx.fail(error_kind::invalid_argument, "the window size must be non-negative");
    const auto n = size[0];
    const bool periodic = ctx.get_int("periodic", 1) != 0;
    const dtype t = to_dtype(static_cast<std::int32_t>(ctx.get_int("output_datatype", 1)), "output_datatype");
    const double denom = periodic ? static_cast<double>(n) : static_cast<double>(n - 1);
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::int64_t k = 0; k < n; ++k) {
        double s = 0;
        for (std::size_t j = 0; j < coeffs.size(); ++j) {
            const double angle = denom > 0 ? 2.0 * std::numbers::pi * static_cast<double>(j * k) / denom : 0.0;
            s += (j % 2 == 0 ? 1.0 : -1.0) * coeffs[j] * std::cos(angle);
        }
        v[static_cast<std::size_t>(k)] = s;
    }
    return {ctx.add_literal(literal(shape{t, {v.size()}}, v))};
}

args_t parse_hann(const node_context& ctx, const args_t& args) { return parse_window(ctx, args, {0.5, 0.5}); }
args_t parse_hamming(const node_context& ctx, const args_t& args) {
    return parse_window(ctx, args, {25.0 / 46.0, 21.0 / 46.0});
}
args_t parse_blackman(const node_context& ctx, const args_t& args) {
    return parse_window(ctx, args, {0.42, 0.5, 0.08});
}

// --- Col2Im ------------------------------------------------------------------

args_t parse_col2im(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 3);
    const auto image = ctx.constant_ints(args[1], "image_shape");
    const auto block = ctx.constant_ints(args[2], "block_shape");
    const std::size_t r = image.size();
    if (r == 0 || block.size() != r)
        ctx.fail(error_kind::invalid_argument, "image_shape and block_shape must have the same non-zero length");
    const auto dil = ctx.get_ints("dilations", std::vector<std::int64_t>(r, 1));
    const auto strides = ctx.get_ints("strides", std::vector<std::int64_t>(r, 1));
    const auto pads = ctx.get_ints("pads", std::vector<std::int64_t>(2 * r, 0));
    if (dil.size() != r || strides.size() != r || pads.size() != 2 * r)
        ctx.fail(error_kind::invalid_argument, "dilations, strides and pads must match the image rank");
    const auto& in = args[0]->get_shape().lens();
    if (in.size() != 3) ctx.fail(error_kind::invalid_argument, "input must be [N, C * prod(block_shape), L]");
    const auto n = static_cast<std::int64_t>(in[0]);
    const std::int64_t k = product(block);
    if (k <= 0 || static_cast<std::int64_t>(in[1]) % k != 0)
        ctx.fail(error_kind::invalid_argument, "input dim 1 must be a multiple of prod(block_shape)");
    const std::int64_t c = static_cast<std::int64_t>(in[1]) / k;
    std::vector<std::int64_t> padded(r), blocks(r);
    for (std::size_t d = 0; d < r; ++d) {
        if (dil[d] < 1 || strides[d] < 1 || block[d] < 1 || pads[d] < 0 || pads[d + r] < 0)
            ctx.fail(error_kind::invalid_argument, "block_shape, dilations and strides must be positive, pads >= 0");
        padded[d] = image[d] + pads[d] + pads[d + r];
        const std::int64_t extent = dil[d] * (block[d] - 1) + 1;
        if (padded[d] < extent) ctx.fail(error_kind::invalid_argument, "the block does not fit the padded image");
        blocks[d] = (padded[d] - extent) / strides[d] + 1;
    }
    const std::int64_t l = product(blocks);
    if (l != static_cast<std::int64_t>(in[2]))
        ctx.fail(error_kind::invalid_argument, "input dim 2 is " + std::to_string(in[2]) + " but the blocks number " +
                                                   std::to_string(l));
    // Padded-image flat position of every (kernel offset, block) pair.
    std::vector<std::int64_t> idx(static_cast<std::size_t>(k * l));
    std::vector<std::int64_t> kk(r, 0);
    for (std::int64_t ki = 0; ki < k; ++ki) {
        std::int64_t rem = ki;
        for (std::size_t d = r; d-- > 0;) {
            kk[d] = rem % block[d];
            rem /= block[d];
        }
        for (std::int64_t li = 0; li < l; ++li) {
            std::int64_t lrem = li, pos = 0, scale = 1;
            for (std::size_t d = r; d-- > 0;) {
                const std::int64_t b = lrem % blocks[d];
                lrem /= blocks[d];
                pos += (b * strides[d] + kk[d] * dil[d]) * scale;
                scale *= padded[d];
            }
            idx[static_cast<std::size_t>(ki * l + li)] = pos;
        }
    }
    const std::int64_t p = product(padded);
    const dtype t = args[0]->get_shape().type();
    auto updates = reshape_to(ctx, args[0], {n, c, k * l});
    auto indices = ctx.add_literal(literal(shape{dtype::int64_type, {1, 1, idx.size()}}, idx));
    indices = ctx.add("broadcast", {indices}, value_map{{"out_lens", int_list(std::vector<std::int64_t>{n, c, k * l})}});
    auto zeros = ctx.add("broadcast", {ctx.add_scalar(t, 0.0)},
                         value_map{{"out_lens", int_list(std::vector<std::int64_t>{n, c, p})}});
    auto y = ctx.add("scatter_elements", {zeros, indices, updates}, value_map{{"axis", 2}, {"reduction", "add"}});
    std::vector<std::int64_t> dims{n, c};
    dims.insert(dims.end(), padded.begin(), padded.end());
    y = reshape_to(ctx, y, dims);
    bool any_pad = false;
    for (auto v : pads) any_pad = any_pad || v != 0;
    if (!any_pad) return {y};
    std::vector<std::int64_t> axes, starts, ends;
    for (std::size_t d = 0; d < r; ++d) {
        axes.push_back(static_cast<std::int64_t>(d + 2));
        starts.push_back(pads[d]);
        ends.push_back(pads[d] + image[d]);
    }
    return {ctx.add("slice", {y}, value_map{{"axes", int_list(axes)}, {"starts", int_list(starts)},
                                            {"ends", int_list(ends)}})};
}

// --- AffineGrid --------------------------------------------------------------

args_t parse_affine_grid(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    const auto size = ctx.constant_ints(args[1], "the size input");
    const auto& th = args[0]->get_shape().lens();
    if (size.size() != 4 && size.size() != 5)
        ctx.fail(error_kind::invalid_argument, "size must be [N, C, H, W] or [N, C, D, H, W]");
    const std::size_t r = size.size() - 2;
    if (th.size() != 3 || th[1] != r || th[2] != r + 1 || static_cast<std::int64_t>(th[0]) != size[0])
        ctx.fail(error_kind::invalid_argument, "theta must be [N, " + std::to_string(r) + ", " +
                                                   std::to_string(r + 1) + "] matching size");
    const bool align = ctx.get_int("align_corners", 0) != 0;
    // spatial extents in ONNX order (D,) H, W; coordinate columns x (W), y (H), z (D), 1.
    std::vector<std::int64_t> ext(size.begin() + 2, size.end());
    for (auto e : ext)
        if (e < 1) ctx.fail(error_kind::invalid_argument, "spatial sizes must be positive");
    auto coord = [&](std::int64_t i, std::int64_t s) {
        if (align) return s == 1 ? 0.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(s - 1);
        return (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(s) - 1.0;
    };
    const std::int64_t points = product(ext);
    std::vector<double> base(static_cast<std::size_t>(points) * (r + 1));
    std::vector<std::int64_t> at(r);
    for (std::int64_t pi = 0; pi < points; ++pi) {
        std::int64_t rem = pi;
        for (std::size_t d = r; d-- > 0;) {
            at[d] = rem % ext[d];
            rem /= ext[d];
        }
        double* row = &base[static_cast<std::size_t>(pi) * (r + 1)];
        for (std::size_t j = 0; j < r; ++j) row[j] = coord(at[r - 1 - j], ext[r - 1 - j]);
        row[r] = 1.0;
    }
    const dtype t = args[0]->get_shape().type();
    auto grid = ctx.add_literal(literal(shape{t, {static_cast<std::size_t>(points), r + 1}}, base));
    auto theta_t = ctx.add("transpose", {args[0]}, value_map{{"permutation", int_list(std::vector<std::int64_t>{0, 2, 1})}});
    auto y = ctx.add("dot", {grid, theta_t});
    std::vector<std::int64_t> dims{size[0]};
    dims.insert(dims.end(), ext.begin(), ext.end());
    dims.push_back(static_cast<std::int64_t>(r));
    return {reshape_to(ctx, y, dims)};
}

// --- TensorScatter -----------------------------------------------------------

args_t parse_tensor_scatter(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 3);
    const auto& cache = args[0]->get_shape().lens();
    const auto& upd = args[1]->get_shape().lens();
    const auto rank = static_cast<std::int64_t>(cache.size());
    if (rank < 2 || upd.size() != cache.size())
        ctx.fail(error_kind::invalid_argument, "past_cache and update must have the same rank (at least 2)");
    std::int64_t axis = ctx.get_int("axis", -2);
    if (axis < -rank || axis >= rank) ctx.fail(error_kind::invalid_argument, "axis is out of range");
    if (axis < 0) axis += rank;
    if (axis == 0) ctx.fail(error_kind::invalid_argument, "axis must not be the batch axis");
    const auto a = static_cast<std::size_t>(axis);
    for (std::size_t d = 0; d < cache.size(); ++d)
        if (d != a && upd[d] != cache[d])
            ctx.fail(error_kind::invalid_argument, "update must match past_cache except along axis");
    if (upd[a] > cache[a]) ctx.fail(error_kind::invalid_argument, "update is longer than the cache along axis");
    const std::string mode = ctx.get_string("mode", "linear");
    if (mode != "linear" && mode != "circular")
        ctx.fail(error_kind::invalid_argument, "mode must be linear or circular, not \"" + mode + "\"");
    std::vector<std::size_t> iota_lens(cache.size(), 1);
    iota_lens[a] = upd[a];
    std::vector<std::int64_t> iota(upd[a]);
    for (std::size_t i = 0; i < iota.size(); ++i) iota[i] = static_cast<std::int64_t>(i);
    auto idx = ctx.add_literal(literal(shape{dtype::int64_type, iota_lens}, iota));
    if (ctx.has_input(args, 2)) {
        const auto& wl = args[2]->get_shape().lens();
        if (wl.size() != 1 || wl[0] != cache[0])
            ctx.fail(error_kind::invalid_argument, "write_indices must be [batch]");
        std::vector<std::int64_t> wdims(cache.size(), 1);
        wdims[0] = static_cast<std::int64_t>(cache[0]);
        auto w = args[2];
        if (w->get_shape().type() != dtype::int64_type)
            w = ctx.add("convert", {w}, value_map{{"target_type", to_string(dtype::int64_type)}});
        idx = ctx.add("add", {reshape_to(ctx, w, wdims), idx});
        if (mode == "circular")
            idx = ctx.add("mod", {idx, ctx.add_scalar(dtype::int64_type, static_cast<double>(cache[a]))});
    }
    idx = ctx.add("broadcast", {idx}, value_map{{"out_lens", int_list(upd)}});
    return {ctx.add("scatter_elements", {args[0], idx, args[1]}, value_map{{"axis", axis}, {"reduction", "none"}})};
}

// --- RoiAlign ----------------------------------------------------------------

args_t parse_roi_align(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 3);
    // Before opset 16 there was no coordinate_transformation_mode: corners were not shifted.
    const std::string coords = ctx.get_string("coordinate_transformation_mode",
                                              ctx.opset() < 16 ? "output_half_pixel" : "half_pixel");
    if (coords != "half_pixel" && coords != "output_half_pixel")
        ctx.fail(error_kind::invalid_argument,
                 "coordinate_transformation_mode must be half_pixel or output_half_pixel, not \"" + coords + "\"");
    const std::string mode = ctx.get_string("mode", "avg");
    if (mode != "avg" && mode != "max")
        ctx.fail(error_kind::invalid_argument, "mode must be avg or max, not \"" + mode + "\"");
    return {ctx.add("roi_align", {args[0], args[1], args[2]},
                    value_map{{"mode", mode},
                              {"half_pixel", coords == "half_pixel"},
                              {"output_height", ctx.get_int("output_height", 1)},
                              {"output_width", ctx.get_int("output_width", 1)},
                              {"sampling_ratio", ctx.get_int("sampling_ratio", 0)},
                              {"spatial_scale", ctx.get_float("spatial_scale", 1.0)}})};
}

// --- DeformConv --------------------------------------------------------------

args_t parse_deform_conv(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 5);
    if (args[0]->get_shape().ndim() != 4)
        ctx.fail(error_kind::not_implemented, "only 2-D DeformConv (4-D X) is supported");
    const auto& wl = args[1]->get_shape().lens();
    if (wl.size() != 4)
        ctx.fail(error_kind::invalid_argument,
                 "W must be 4-D [M, C/group, kH, kW], not of rank " + std::to_string(wl.size()));
    auto kernel = ctx.get_ints("kernel_shape");
    if (!kernel.empty() && (kernel.size() != 2 || static_cast<std::size_t>(kernel[0]) != wl.at(2) ||
                            static_cast<std::size_t>(kernel[1]) != wl.at(3)))
        ctx.fail(error_kind::invalid_argument, "kernel_shape does not match W");
    args_t inputs{args[0], args[1], args[2]};
    const bool bias = ctx.has_input(args, 3), mask = ctx.has_input(args, 4);
    if (bias) inputs.push_back(args[3]);
    if (mask) inputs.push_back(args[4]);
    return {ctx.add("deform_conv", inputs,
                    value_map{{"strides", int_list(ctx.get_ints("strides", {1, 1}))},
                              {"pads", int_list(ctx.get_ints("pads", {0, 0, 0, 0}))},
                              {"dilations", int_list(ctx.get_ints("dilations", {1, 1}))},
                              {"group", ctx.get_int("group", 1)},
                              {"offset_group", ctx.get_int("offset_group", 1)},
                              {"has_bias", bias},
                              {"has_mask", mask}})};
}

}  // namespace

void add_image_ops_parsers(parser_table& table) {
    table["HannWindow"] = parse_hann;
    table["HammingWindow"] = parse_hamming;
    table["BlackmanWindow"] = parse_blackman;
    table["Col2Im"] = parse_col2im;
    table["AffineGrid"] = parse_affine_grid;
    table["TensorScatter"] = parse_tensor_scatter;
    table["RoiAlign"] = parse_roi_align;
    table["DeformConv"] = parse_deform_conv;
}

}  // namespace kiln::onnx_import
