// ONNX CumProd (the cumprod IR op, CumSum's sibling) and BitCast (the bitcast
// IR op, which keeps the bytes and changes only the dtype).
#include "onnx/onnx_tensor.hpp"
#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

args_t parse_cumprod(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    const auto axis = ctx.constant_ints(args[1], "the axis input");
    if (axis.size() != 1) ctx.fail(error_kind::invalid_argument, "the axis input must hold one value");
    return {ctx.add("cumprod", {args[0]},
                    value_map{{"axis", axis[0]},
                              {"exclusive", ctx.get_int("exclusive", 0) != 0},
                              {"reverse", ctx.get_int("reverse", 0) != 0}})};
}

args_t parse_bitcast(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    if (!ctx.has_attribute("to")) ctx.fail(error_kind::invalid_argument, "required attribute 'to' is missing");
    const dtype to = to_dtype(static_cast<std::int32_t>(ctx.get_int("to", 0)), "to");
    return {ctx.add("bitcast", {args[0]}, value_map{{"target_type", to_string(to)}})};
}

}  // namespace

void add_cumprod_bitcast_parsers(parser_table& table) {
    table["CumProd"] = parse_cumprod;
    table["BitCast"] = parse_bitcast;
}

}  // namespace kiln::onnx_import
