// ONNX DFT, mapped to the dft IR op. The axis was an attribute until opset
// 20 and is an input after; dft_length must be known at import.
#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

std::int64_t scalar_input(const node_context& ctx, instruction_ref ins, const std::string& what) {
    const auto v = ctx.constant_ints(ins, what);
    if (v.size() != 1) ctx.fail(error_kind::invalid_argument, what + " must hold one value");
    return v[0];
}

args_t parse_dft(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, ctx.opset() < 20 ? 2 : 3);
    const shape& in = args[0]->get_shape();
    std::int64_t axis = ctx.opset() < 20 ? ctx.get_int("axis", 1) : -2;
    if (ctx.has_input(args, 2)) axis = scalar_input(ctx, args[2], "the axis input");
    const auto rank = static_cast<std::int64_t>(in.ndim());
    if (axis < -rank || axis >= rank)
        ctx.fail(error_kind::invalid_argument, "axis " + std::to_string(axis) + " is out of range");
    if (axis < 0) axis += rank;
    const bool inverse = ctx.get_int("inverse", 0) != 0;
    const bool onesided = ctx.get_int("onesided", 0) != 0;
    const auto extent = static_cast<std::int64_t>(in.lens()[static_cast<std::size_t>(axis)]);
    // An inverse one-sided transform reads n / 2 + 1 bins of an even-length signal by default.
    std::int64_t length = inverse && onesided ? 2 * (extent - 1) : extent;
    if (ctx.has_input(args, 1)) length = scalar_input(ctx, args[1], "the dft_length input");
    if (length < 1)
        ctx.fail(error_kind::invalid_argument, "dft_length must be positive, got " + std::to_string(length));
    return {ctx.add("dft", {args[0]},
                    value_map{{"axis", axis}, {"length", length}, {"inverse", inverse}, {"onesided", onesided}})};
}

}  // namespace

void add_dft_parsers(parser_table& table) {
    table["DFT"] = parse_dft;
}

}  // namespace kiln::onnx_import
