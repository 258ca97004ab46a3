// ONNX Einsum: its equation attribute, lowered by einsum_lowering.cpp.
#include "onnx/einsum_lowering.hpp"
#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

std::vector<instruction_ref> parse_einsum(const node_context& ctx, const std::vector<instruction_ref>& args) {
    return {lower_einsum(context_emitter<node_context>(ctx), ctx.get_string("equation", ""), args)};
}

}  // namespace

void add_einsum_parsers(parser_table& table) {
    table["Einsum"] = parse_einsum;
}

}  // namespace kiln::onnx_import
