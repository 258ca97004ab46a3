// Ops whose result is known at import time (Constant, Shape, Size,
// ConstantOfShape) and pass-throughs (Identity, inference-mode Dropout).
#include <algorithm>
#include <cstring>

#include "onnx/onnx_tensor.hpp"
#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

args_t parse_constant(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 0, 0);
    const auto& attrs = ctx.node().attribute();
    if (attrs.size() != 1)
        ctx.fail(error_kind::invalid_argument, "must have exactly one value attribute, has " +
                                                   std::to_string(attrs.size()));
    const std::string& name = attrs.Get(0).name();
    if (name == "value") return {ctx.add_literal(ctx.get_tensor("value"))};
    if (name == "value_float")
        return {ctx.add_literal(literal(shape{dtype::float_type}, std::vector<double>{ctx.get_float(name, 0)}))};
    if (name == "value_int")
        return {ctx.add_literal(literal(shape{dtype::int64_type}, std::vector<std::int64_t>{ctx.get_int(name, 0)}))};
    if (name == "value_floats") {
        auto v = ctx.get_floats(name);
        return {ctx.add_literal(literal(shape{dtype::float_type, {v.size()}}, v))};
    }
    if (name == "value_ints") {
        auto v = ctx.get_ints(name);
        return {ctx.add_literal(literal(shape{dtype::int64_type, {v.size()}}, v))};
    }
    ctx.fail(error_kind::not_implemented, "attribute '" + name + "' is not supported (strings and sparse tensors)");
}

// Shapes are static, so Shape is a constant; start/end (opset 15) select dims.
args_t parse_shape(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    const auto& lens = args[0]->get_shape().lens();
    const auto rank = static_cast<std::int64_t>(lens.size());
    auto clamp_dim = [&](std::int64_t d) { return std::clamp(d < 0 ? d + rank : d, std::int64_t{0}, rank); };
    std::int64_t start = clamp_dim(ctx.get_int("start", 0));
    std::int64_t end = clamp_dim(ctx.get_int("end", rank));
    std::vector<std::int64_t> dims;
    for (std::int64_t i = start; i < end; ++i) dims.push_back(static_cast<std::int64_t>(lens[static_cast<std::size_t>(i)]));
    return {ctx.add_literal(literal(shape{dtype::int64_type, {dims.size()}}, dims))};
}

args_t parse_size(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto n = static_cast<std::int64_t>(args[0]->get_shape().elements());
    return {ctx.add_literal(literal(shape{dtype::int64_type}, std::vector<std::int64_t>{n}))};
}

// A small result becomes a literal; a large one a broadcast of one value.
args_t parse_constant_of_shape(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    auto dims = ctx.constant_ints(args[0], "the shape input");
    literal fill = ctx.has_attribute("value") ? ctx.get_tensor("value")
                                              : literal(shape{dtype::float_type}, std::vector<float>{0.0f});
    if (fill.get_shape().elements() != 1)
        ctx.fail(error_kind::invalid_argument, "attribute 'value' must hold one element");
    shape out = checked_shape(fill.get_shape().type(), dims, "output");
    constexpr std::size_t max_literal_elements = std::size_t{1} << 16;
    if (out.elements() <= max_literal_elements) {
        argument data(out);
        const std::size_t size = out.element_size();
        for (std::size_t i = 0; i < out.elements(); ++i)
            std::memcpy(data.data() + i * size, fill.get_argument().data(), size);
        return {ctx.add_literal(literal(data))};
    }
    auto scalar = ctx.add_literal(literal(fill.get_argument().reshaped(shape{fill.get_shape().type()})));
    return {ctx.add("broadcast", {scalar}, value_map{{"out_lens", int_list(out.lens())}})};
}

args_t parse_identity(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    return {args[0]};
}

// Inference only: Dropout passes its input through (ratio and mode are ignored).
args_t parse_dropout(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 3);
    if (ctx.has_input(args, 2)) {
        auto training = ctx.constant(args[2]);
        if (!training || training->to_vector<double>().at(0) != 0.0)
            ctx.fail(error_kind::not_implemented, "training-mode Dropout is not supported");
    }
    if (ctx.node().output_size() < 2 || ctx.node().output(1).empty()) return {args[0]};
    // Inference drops nothing, so the mask keeps every element.
    auto keep = ctx.add_scalar(dtype::bool_type, 1);
    auto mask = ctx.add("broadcast", {keep}, value_map{{"out_lens", int_list(args[0]->get_shape().lens())}});
    return {args[0], mask};
}

}  // namespace

void add_constant_parsers(parser_table& table) {
    table["Constant"] = parse_constant;
    table["Shape"] = parse_shape;
    table["Size"] = parse_size;
    table["ConstantOfShape"] = parse_constant_of_shape;
    table["Identity"] = parse_identity;
    table["Dropout"] = parse_dropout;
}

}  // namespace kiln::onnx_import
