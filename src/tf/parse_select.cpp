// Comparisons, logic, Select, AddN and the index ops (Slice, GatherV2,
// ArgMax, Unpack) and the constant makers Fill and Range.
#include "tf/tf_parser.hpp"

namespace kiln::tf_import {

namespace {

using ints = std::vector<std::int64_t>;

parse_function compare(std::string op, bool negate) {
    return [op, negate](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, 2, 2);
        auto y = ctx.add(op, {args[0], args[1]});
        return {negate ? ctx.add("not", {y}) : y};
    };
}

parse_function logic(std::string op, std::size_t arity) {
    return [op, arity](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, arity, arity);
        return {ctx.add(op, args)};
    };
}

// Select's rank-1 condition picks whole rows; SelectV2 broadcasts.
args_t parse_select(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 3);
    auto cond = args[0];
    const auto& cl = cond->get_shape().lens();
    const auto rank = args[1]->get_shape().lens().size();
    if (ctx.op_type() == "Select" && cl.size() == 1 && rank > 1) {
        ints dims{-1};
        dims.insert(dims.end(), rank - 1, 1);
        cond = ctx.add("reshape", {cond}, value_map{{"dims", int_list(dims)}});
    }
    return {ctx.add("where", {cond, args[1], args[2]})};
}

args_t parse_add_n(const node_context& ctx, const args_t& args) {
    if (args.empty()) ctx.fail(error_kind::invalid_argument, "expects at least one input");
    auto sum = args[0];
    for (std::size_t i = 1; i < args.size(); ++i) sum = ctx.add("add", {sum, args[i]});
    return {sum};
}

args_t parse_slice(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 3);
    auto begin = ctx.constant_ints(args[1], "begin");
    auto size = ctx.constant_ints(args[2], "size");
    const auto& lens = args[0]->get_shape().lens();
    if (begin.size() != lens.size() || size.size() != lens.size())
        ctx.fail(error_kind::invalid_argument, "begin and size must have one value per dim of the input");
    ints axes, starts, ends;
    for (std::size_t i = 0; i < lens.size(); ++i) {
        auto extent = static_cast<std::int64_t>(lens[i]);
        std::int64_t end = size[i] == -1 ? extent : begin[i] + size[i];
        if (begin[i] < 0 || size[i] < -1 || end > extent)
            ctx.fail(error_kind::out_of_range, "slice [" + std::to_string(begin[i]) + ", " + std::to_string(end) +
                                                   ") is outside dim " + std::to_string(i) + " of extent " +
                                                   std::to_string(extent));
        axes.push_back(static_cast<std::int64_t>(i));
        starts.push_back(begin[i]);
        ends.push_back(end);
    }
    return {ctx.add("slice", {args[0]},
                    value_map{{"axes", int_list(axes)}, {"starts", int_list(starts)}, {"ends", int_list(ends)}})};
}

args_t parse_gather(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 3);
    if (ctx.get_int("batch_dims", 0) != 0) ctx.fail(error_kind::not_implemented, "batch_dims other than 0");
    auto axis = ctx.constant_ints(args[2], "axis");
    if (axis.size() != 1) ctx.fail(error_kind::invalid_argument, "the axis input must hold one value");
    return {ctx.add("gather", {args[0], args[1]}, value_map{{"axis", axis[0]}})};
}

args_t parse_argmax(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    auto axis = ctx.constant_ints(args[1], "dimension");
    if (axis.size() != 1) ctx.fail(error_kind::invalid_argument, "the dimension input must hold one value");
    auto y = ctx.add(ctx.op_type() == "ArgMax" ? "argmax" : "argmin", {args[0]},
                     value_map{{"axis", axis[0]}, {"keepdims", false}});
    dtype out = ctx.has_attribute("output_type") ? ctx.get_type("output_type") : dtype::int64_type;
    if (y->get_shape().type() != out) y = ctx.add("convert", {y}, value_map{{"target_type", to_string(out)}});
    return {y};
}

args_t parse_unpack(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    const auto& lens = args[0]->get_shape().lens();
    auto rank = static_cast<std::int64_t>(lens.size());
    std::int64_t axis = ctx.get_int("axis", 0);
    if (axis < -rank || axis >= rank) ctx.fail(error_kind::invalid_argument, "axis is out of range");
    if (axis < 0) axis += rank;
    args_t parts;
    for (std::size_t i = 0; i < lens[static_cast<std::size_t>(axis)]; ++i) {
        auto k = static_cast<std::int64_t>(i);
        auto part = ctx.add(
            "slice", {args[0]},
            value_map{{"axes", int_list(ints{axis})}, {"starts", int_list(ints{k})}, {"ends", int_list(ints{k + 1})}});
        parts.push_back(ctx.add("squeeze", {part}, value_map{{"axes", int_list(ints{axis})}}));
    }
    return parts;
}

// Fill and Range with constant operands become literals.
args_t parse_fill(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 2, 2);
    auto dims = ctx.constant_ints(args[0], "dims");
    if (!args[1]->is_literal() || args[1]->get_shape().elements() != 1)
        ctx.fail(error_kind::not_implemented, "the value must be a constant scalar");
    std::vector<std::size_t> lens;
    std::size_t n = 1;
    for (auto d : dims) {
        if (d < 0 || d > (std::int64_t{1} << 31)) ctx.fail(error_kind::invalid_argument, "bad dims");
        lens.push_back(static_cast<std::size_t>(d));
        n *= lens.back();
    }
    if (n > (std::size_t{1} << 26)) ctx.fail(error_kind::not_implemented, "Fill of more than 2^26 elements");
    double v = args[1]->get_literal().to_vector<double>()[0];
    return {ctx.add_literal(literal(shape(args[1]->get_shape().type(), lens), std::vector<double>(n, v)))};
}

args_t parse_range(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 3, 3);
    std::vector<double> v;
    for (std::size_t i = 0; i < 3; ++i) {
        if (!args[i]->is_literal() || args[i]->get_shape().elements() != 1)
            ctx.fail(error_kind::not_implemented, "start, limit and delta must be constant scalars");
        v.push_back(args[i]->get_literal().to_vector<double>()[0]);
    }
    if (v[2] == 0) ctx.fail(error_kind::invalid_argument, "delta is 0");
    std::vector<double> values;
    for (double x = v[0]; v[2] > 0 ? x < v[1] : x > v[1]; x += v[2]) {
        values.push_back(x);
        if (values.size() > (std::size_t{1} << 26))
            ctx.fail(error_kind::not_implemented, "Range of more than 2^26 values");
    }
    return {ctx.add_literal(literal(shape(args[0]->get_shape().type(), {values.size()}), values))};
}

// Any / All: max / min of the values as 0 and 1.
parse_function parse_any_all(std::string op) {
    return [op](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, 2, 2);
        auto axes = ctx.constant_ints(args[1], "the reduction indices");
        if (axes.empty()) return {args[0]};
        auto as_float = ctx.add("convert", {args[0]}, value_map{{"target_type", to_string(dtype::float_type)}});
        auto r = ctx.add(op, {as_float},
                         value_map{{"axes", int_list(axes)}, {"keepdims", ctx.get_bool("keep_dims", false)}});
        return {ctx.add("greater", {r, ctx.add_scalar(dtype::float_type, 0.0)})};
    };
}

}  // namespace

void add_select_parsers(parser_table& table) {
    table["Equal"] = compare("equal", false);
    table["NotEqual"] = compare("equal", true);
    table["Less"] = compare("less", false);
    table["Greater"] = compare("greater", false);
    table["LessEqual"] = compare("greater", true);
    table["GreaterEqual"] = compare("less", true);
    table["LogicalAnd"] = logic("and", 2);
    table["LogicalOr"] = logic("or", 2);
    table["LogicalNot"] = logic("not", 1);
    table["Select"] = parse_select;
    table["SelectV2"] = parse_select;
    table["AddN"] = parse_add_n;
    table["Slice"] = parse_slice;
    table["GatherV2"] = parse_gather;
    table["ArgMax"] = parse_argmax;
    table["ArgMin"] = parse_argmax;
    table["Unpack"] = parse_unpack;
    table["Any"] = parse_any_all("reduce_max");
    table["All"] = parse_any_all("reduce_min");
    table["Fill"] = parse_fill;
    table["Range"] = parse_range;
}

}  // namespace kiln::tf_import
