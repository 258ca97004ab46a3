// ONNX reductions. Their axes moved from an attribute to an optional input:
// ReduceSum at opset 13, the others at opset 18.
#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

// The axes to reduce (empty: all); nullopt means "return the input
// unchanged" (noop_with_empty_axes).
std::optional<std::vector<std::int64_t>> reduce_axes(const node_context& ctx, const args_t& args,
                                                     std::int64_t axes_input_opset) {
    std::vector<std::int64_t> axes;
    if (ctx.opset() >= axes_input_opset) {
        ctx.expect_inputs(args, 1, 2);
        if (ctx.has_input(args, 1)) axes = ctx.constant_ints(args[1], "the axes input");
        if (axes.empty() && ctx.get_int("noop_with_empty_axes", 0) != 0) return std::nullopt;
    } else {
        ctx.expect_inputs(args, 1, 1);
        axes = ctx.get_ints("axes");
    }
    return axes;
}

instruction_ref reduce(const node_context& ctx, const std::string& op, instruction_ref x,
                       const std::vector<std::int64_t>& axes) {
    bool keepdims = ctx.get_int("keepdims", 1) != 0;
    return ctx.add(op, {x}, value_map{{"axes", int_list(axes)}, {"keepdims", keepdims}});
}

parse_function plain_reduce(std::string op, std::int64_t axes_input_opset) {
    return [op, axes_input_opset](const node_context& ctx, const args_t& args) -> args_t {
        auto axes = reduce_axes(ctx, args, axes_input_opset);
        if (!axes) return {args[0]};
        // ReduceMax / ReduceMin of bool (opset 20) are any / all: max / min of
        // 0 and 1, and the empty set gives false / true as uint8's 0 / 255 do.
        bool as_bytes = args[0]->get_shape().type() == dtype::bool_type && (op == "reduce_max" || op == "reduce_min");
        if (!as_bytes) return {reduce(ctx, op, args[0], *axes)};
        auto bytes = ctx.add("convert", {args[0]}, value_map{{"target_type", "uint8_type"}});
        return {ctx.add("convert", {reduce(ctx, op, bytes, *axes)}, value_map{{"target_type", "bool_type"}})};
    };
}

// Reductions composed as after(reduce_sum(before(x))).
enum class composite { l1, l2, sum_square, log_sum, log_sum_exp };

parse_function composite_reduce(composite kind) {
    return [kind](const node_context& ctx, const args_t& args) -> args_t {
        auto axes = reduce_axes(ctx, args, 18);
        auto x = args[0];
        if (!axes) return {x};
        instruction_ref before = x;
        if (kind == composite::l1) before = ctx.add("abs", {x});
        if (kind == composite::l2 || kind == composite::sum_square) before = ctx.add("mul", {x, x});
        if (kind == composite::log_sum_exp) before = ctx.add("exp", {x});
        auto sum = reduce(ctx, "reduce_sum", before, *axes);
        if (kind == composite::l2) return {ctx.add("sqrt", {sum})};
        if (kind == composite::log_sum || kind == composite::log_sum_exp) return {ctx.add("log", {sum})};
        return {sum};
    };
}

parse_function arg_reduce(std::string op) {
    return [op](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, 1, 1);
        value_map attrs{{"axis", ctx.get_int("axis", 0)},
                        {"keepdims", ctx.get_int("keepdims", 1) != 0},
                        {"select_last_index", ctx.get_int("select_last_index", 0) != 0}};
        return {ctx.add(op, {args[0]}, attrs)};
    };
}

}  // namespace

void add_reduce_parsers(parser_table& table) {
    table["ReduceSum"] = plain_reduce("reduce_sum", 13);
    table["ReduceMean"] = plain_reduce("reduce_mean", 18);
    table["ReduceMax"] = plain_reduce("reduce_max", 18);
    table["ReduceMin"] = plain_reduce("reduce_min", 18);
    table["ReduceProd"] = plain_reduce("reduce_prod", 18);
    table["ReduceL1"] = composite_reduce(composite::l1);
    table["ReduceL2"] = composite_reduce(composite::l2);
    table["ReduceSumSquare"] = composite_reduce(composite::sum_square);
    table["ReduceLogSum"] = composite_reduce(composite::log_sum);
    table["ReduceLogSumExp"] = composite_reduce(composite::log_sum_exp);
    table["ArgMax"] = arg_reduce("argmax");
    table["ArgMin"] = arg_reduce("argmin");
}

}  // namespace kiln::onnx_import
