// ONNX indexing ops.
#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

args_t parse_gather(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    return {ctx.add("gather", {args[0], args[1]}, value_map{{"axis", ctx.get_int("axis", 0)}})};
}

}  // namespace

void add_index_parsers(parser_table& table) { table["Gather"] = parse_gather; }

}  // namespace kiln::onnx_import
