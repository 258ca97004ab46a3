// ONNX control flow: If and Loop, whose subgraphs become modules taken as
// arguments by the IR's if and loop ops (src/ops/control.hpp).
#include <limits>

#include "onnx/parse_families.hpp"

namespace kiln::onnx_import {

namespace {

using args_t = std::vector<instruction_ref>;

// A one-element bool value, or nullopt when it is not known at import time.
std::optional<bool> constant_flag(const node_context& ctx, instruction_ref ins, const std::string& what) {
    const shape& s = ins->get_shape();
    if (s.elements() != 1)
        ctx.fail(error_kind::invalid_argument, what + " must hold one value, got " + to_string(s.lens()));
    if (s.type() != dtype::bool_type)
        ctx.fail(error_kind::type_error, what + " must be bool, got " + to_string(s.type()));
    auto lit = ctx.constant(ins);
    if (!lit) return std::nullopt;
    return lit->get_argument().value_at(0) != 0;
}

// If: a constant condition inlines the branch it picks; otherwise both
// branches become modules of an if instruction.
args_t parse_if(const node_context& ctx, const args_t& args) {
    ctx.expect_inputs(args, 1, 1);
    const auto& then_graph = ctx.get_graph("then_branch");
    const auto& else_graph = ctx.get_graph("else_branch");
    if (then_graph.output_size() != else_graph.output_size())
        ctx.fail(error_kind::invalid_argument, "then_branch has " + std::to_string(then_graph.output_size()) +
                                                   " outputs but else_branch has " +
                                                   std::to_string(else_graph.output_size()));
    if (auto flag = constant_flag(ctx, args[0], "the condition"))
        return ctx.parse_inline(*flag ? then_graph : else_graph);

    auto no_inputs = [](module&) { return args_t{}; };
    auto branches = ctx.parse_subgraphs({"then_branch", "else_branch"}, {no_inputs, no_inputs});
    args_t inputs{args[0]};
    inputs.insert(inputs.end(), branches.captured.begin(), branches.captured.end());
    auto result = ctx.add_with_modules("if", inputs, {}, branches.modules);
    return ctx.tuple_elements(result, result->get_shape().sub_shapes().size());
}

// Loop(M, cond, v_initial...) with body (iteration_num, condition, v...) ->
// (condition, v..., scan_outputs...). Scan outputs have one row per
// iteration, so with them the trip count must be known at import (and a
// condition computed at run time must not stop the loop early, which the
// loop op checks when it runs). Without scan outputs the trip count and the
// condition may both be run-time values.
args_t parse_loop(const node_context& ctx, const args_t& args) {
    if (args.size() < 2)
        ctx.fail(error_kind::invalid_argument,
                 "expects at least 2 inputs (M and cond, each may be empty), has " + std::to_string(args.size()));
    const auto& body = ctx.get_graph("body");
    const std::size_t carried = args.size() - 2;
    if (static_cast<std::size_t>(body.input_size()) != 2 + carried)
        ctx.fail(error_kind::invalid_argument, "the body takes " + std::to_string(body.input_size()) +
                                                   " inputs, expected 2 + " + std::to_string(carried) +
                                                   " (iteration number, condition, loop-carried values)");
    if (static_cast<std::size_t>(body.output_size()) < 1 + carried)
        ctx.fail(error_kind::invalid_argument, "the body returns " + std::to_string(body.output_size()) +
                                                   " values, expected at least 1 + " + std::to_string(carried) +
                                                   " (condition, loop-carried values)");
    for (std::size_t i = 2; i < args.size(); ++i)
        if (!ctx.has_input(args, i))
            ctx.fail(error_kind::invalid_argument, "loop-carried input " + std::to_string(i) + " is empty");
    const std::size_t scan_outputs = static_cast<std::size_t>(body.output_size()) - 1 - carried;

    std::optional<bool> initial_condition = true;
    instruction_ref condition;
    if (ctx.has_input(args, 1)) {
        initial_condition = constant_flag(ctx, args[1], "the condition input");
        condition = args[1];
    } else {
        condition = ctx.add_literal(literal(shape{dtype::bool_type}, std::vector<int>{1}));
    }
    instruction_ref trip_count;
    std::int64_t iterations = 0;
    if (ctx.has_input(args, 0)) {
        const shape& s = args[0]->get_shape();
        if (s.type() != dtype::int64_type || s.elements() != 1)
            ctx.fail(error_kind::type_error, "the trip count M must be one int64 value, got " + to_string(s));
        trip_count = args[0];
        if (scan_outputs > 0) {
            auto m = ctx.constant(args[0]);
            if (!m)
                ctx.fail_not_constant(args[0], "the trip count M",
                                      "the Loop has scan outputs, whose length is the number of iterations");
            iterations = std::max<std::int64_t>(0, m->to_vector<std::int64_t>()[0]);
        }
    } else {
        if (scan_outputs > 0)
            ctx.fail(error_kind::not_implemented,
                     "a Loop without a trip count M has scan outputs whose length depends on when its condition "
                     "turns false; Kiln's shapes are static");
        trip_count = ctx.add_literal(
            literal(shape{dtype::int64_type}, std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::max()}));
    }
    if (initial_condition == false) iterations = 0;

    std::vector<shape> carried_shapes;
    for (std::size_t i = 0; i < carried; ++i) carried_shapes.push_back(args[2 + i]->get_shape().as_standard());
    auto formal_inputs = [&](module& m) {
        args_t params{m.add_parameter("iteration", shape{dtype::int64_type}),
                      m.add_parameter("condition", shape{dtype::bool_type})};
        for (std::size_t i = 0; i < carried; ++i)
            params.push_back(m.add_parameter("carried_" + std::to_string(i), carried_shapes[i]));
        return params;
    };
    auto sub = ctx.parse_subgraphs({"body"}, {formal_inputs});
    args_t inputs{trip_count, condition};
    inputs.insert(inputs.end(), args.begin() + 2, args.end());
    inputs.insert(inputs.end(), sub.captured.begin(), sub.captured.end());
    auto result = ctx.add_with_modules(
        "loop", inputs, value_map{{"carried", static_cast<std::int64_t>(carried)}, {"iterations", iterations}},
        sub.modules);
    return ctx.tuple_elements(result, carried + scan_outputs);
}

}  // namespace

void add_control_parsers(parser_table& table) {
    table["If"] = parse_if;
    table["Loop"] = parse_loop;
}

}  // namespace kiln::onnx_import
