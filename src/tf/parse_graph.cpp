// Graph plumbing: Placeholder (a parameter), Const (a literal), Identity and
// friends (the value itself), NoOp (nothing).
#include "onnx/onnx_tensor.hpp"  // checked_shape
#include "tf/tf_parser.hpp"

namespace kiln::tf_import {

namespace {

args_t parse_placeholder(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 0, 0);
    const std::string& name = ctx.node().name();
    dtype type = ctx.get_type("dtype");
    std::vector<std::size_t> lens;
    if (auto given = ctx.options().map_input_dims.find(name); given != ctx.options().map_input_dims.end()) {
        lens = given->second;
    } else {
        if (!ctx.has_attribute("shape") || ctx.get_attribute("shape").value_case() != tf::AttrValue::kShape)
            ctx.fail(error_kind::invalid_argument, "the placeholder has no shape; give its dims in map_input_dims");
        const auto& s = ctx.get_attribute("shape").shape();
        if (s.unknown_rank())
            ctx.fail(error_kind::invalid_argument,
                     "the placeholder's rank is unknown; give its dims in map_input_dims");
        for (int i = 0; i < s.dim_size(); ++i) {
            std::int64_t d = s.dim(i).size();
            if (d >= 0) {
                lens.push_back(static_cast<std::size_t>(d));
            } else if (i == 0) {
                lens.push_back(ctx.options().batch_size);
            } else {
                ctx.fail(error_kind::invalid_argument, "dim " + std::to_string(i) +
                                                           " of the placeholder is unknown; give its dims in "
                                                           "map_input_dims");
            }
        }
    }
    return {ctx.mod().add_parameter(
        name, onnx_import::checked_shape(type, std::vector<std::int64_t>(lens.begin(), lens.end()), "placeholder"))};
}

args_t parse_const(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 0, 0);
    const auto& v = ctx.get_attribute("value");
    if (v.value_case() != tf::AttrValue::kTensor)
        ctx.fail(error_kind::type_error, "attribute 'value' must be a tensor");
    return {ctx.add_literal(tensor_to_literal(v.tensor()))};
}

args_t parse_identity(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    return {args[0]};
}

// PlaceholderWithDefault: the default (inputs are the program's parameters only).
args_t parse_identity_n(const node_context&, const args_t& args) {
    return args;
}

args_t parse_noop(const node_context&, const args_t&) {
    return {};
}

}  // namespace

void add_graph_parsers(parser_table& table) {
    table["Placeholder"] = parse_placeholder;
    table["Const"] = parse_const;
    table["Identity"] = parse_identity;
    table["StopGradient"] = parse_identity;
    table["Snapshot"] = parse_identity;
    table["PlaceholderWithDefault"] = parse_identity;
    table["IdentityN"] = parse_identity_n;
    table["NoOp"] = parse_noop;
}

}  // namespace kiln::tf_import
