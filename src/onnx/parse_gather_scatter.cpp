// ONNX element-wise and n-dimensional gathers and scatters.
#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

args_t parse_gather_elements(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    return {ctx.add("gather_elements", {args[0], args[1]}, value_map{{"axis", ctx.get_int("axis", 0)}})};
}

args_t parse_gather_nd(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    return {ctx.add("gather_nd", {args[0], args[1]}, value_map{{"batch_dims", ctx.get_int("batch_dims", 0)}})};
}

// The reduction attribute arrived with opset 16 (max/min with 18); the IR op
// rejects names it does not know.
std::string reduction(const node_context& ctx) {
    return ctx.get_string("reduction", "none");
}

// ScatterElements, and the deprecated Scatter which is the same op.
args_t parse_scatter_elements(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 3);
    return {ctx.add("scatter_elements", {args[0], args[1], args[2]},
                    value_map{{"axis", ctx.get_int("axis", 0)}, {"reduction", reduction(ctx)}})};
}

args_t parse_scatter_nd(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 3);
    return {ctx.add("scatter_nd", {args[0], args[1], args[2]}, value_map{{"reduction", reduction(ctx)}})};
}

}  // namespace

void add_gather_scatter_parsers(parser_table& table) {
    table["GatherElements"] = parse_gather_elements;
    table["GatherND"] = parse_gather_nd;
    table["ScatterElements"] = parse_scatter_elements;
    table["Scatter"] = parse_scatter_elements;
    table["ScatterND"] = parse_scatter_nd;
}

}  // namespace kiln::onnx_import
