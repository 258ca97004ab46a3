// ONNX control flow: If, Loop and Scan, whose subgraphs become modules taken
// as arguments by the IR's if and loop ops (src/ops/control.hpp). Scan is a
// loop whose body first takes each scan input's slice at the iteration.
#include <limits>

#include "kiln/builtin_ops.hpp"
#include "kiln/op_registry.hpp"
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

// Unrolling copies the body once per iteration; longer loops stay loops.
constexpr std::int64_t max_unrolled_iterations = 256;

// The Loop's iterations inlined one after another, with the iteration number
// and the condition as constants; the condition each iteration computes must
// fold to a constant too.
args_t unroll_loop(const node_context& ctx, const onnx::GraphProto& body, const args_t& args, std::int64_t trip_count,
                   bool condition, std::size_t scan_outputs) {
    args_t state(args.begin() + 2, args.end());
    std::vector<args_t> rows(scan_outputs);
    std::int64_t i = 0;
    for (; i < trip_count && condition; ++i) {
        args_t inputs{ctx.add_scalar(dtype::int64_type, static_cast<double>(i)),
                      ctx.add_literal(literal(shape{dtype::bool_type}, std::vector<int>{1}))};
        inputs.insert(inputs.end(), state.begin(), state.end());
        auto outs = ctx.parse_inline(body, inputs);
        if (outs.size() != 1 + state.size() + scan_outputs)
            ctx.fail(error_kind::invalid_argument, "the body returned " + std::to_string(outs.size()) + " values");
        auto next = constant_flag(ctx, outs[0], "the body's condition output");
        if (!next)
            ctx.fail(error_kind::not_implemented,
                     "the body needs its iteration number at import time, so the Loop is unrolled, but the condition "
                     "it computes in iteration " +
                         std::to_string(i) + " is a run-time value");
        condition = *next;
        std::copy(outs.begin() + 1, outs.begin() + 1 + static_cast<std::ptrdiff_t>(state.size()), state.begin());
        for (std::size_t k = 0; k < scan_outputs; ++k)
            rows[k].push_back(ctx.add("unsqueeze", {outs[1 + state.size() + k]},
                                      value_map{{"axes", int_list(std::vector<std::int64_t>{0})}}));
    }
    if (scan_outputs > 0 && i == 0)
        ctx.fail(error_kind::not_implemented,
                 "the unrolled Loop runs no iteration, so the shapes of its scan outputs are unknown");
    args_t results = state;
    for (auto& r : rows) results.push_back(r.size() == 1 ? r[0] : ctx.add("concat", r, value_map{{"axis", 0}}));
    return results;
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
    std::optional<std::int64_t> constant_trip_count;
    if (ctx.has_input(args, 0)) {
        const shape& s = args[0]->get_shape();
        if (s.type() != dtype::int64_type || s.elements() != 1)
            ctx.fail(error_kind::type_error, "the trip count M must be one int64 value, got " + to_string(s));
        trip_count = args[0];
        if (auto m = ctx.constant(args[0])) constant_trip_count = m->to_vector<std::int64_t>()[0];
        if (scan_outputs > 0) {
            if (!constant_trip_count)
                ctx.fail_not_constant(args[0], "the trip count M",
                                      "the Loop has scan outputs, whose length is the number of iterations");
            iterations = std::max<std::int64_t>(0, *constant_trip_count);
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
    node_context::subgraphs sub;
    try {
        sub = ctx.parse_subgraphs({"body"}, {formal_inputs});
    } catch (const error& e) {
        // A body that needs the iteration number (or a value computed from
        // it) at import time, such as a Slice at the iteration, cannot run
        // as a module, where the iteration is a run-time value. A short loop
        // whose trip count and condition are known is unrolled instead.
        const bool needs_constant = e.kind() == error_kind::not_implemented &&
                                    std::string(e.what()).find("known at import time") != std::string::npos;
        if (!needs_constant || !constant_trip_count || !initial_condition ||
            *constant_trip_count > max_unrolled_iterations)
            throw;
        return unroll_loop(ctx, body, args, *constant_trip_count, *initial_condition, scan_outputs);
    }
    args_t inputs{trip_count, condition};
    inputs.insert(inputs.end(), args.begin() + 2, args.end());
    inputs.insert(inputs.end(), sub.captured.begin(), sub.captured.end());
    auto result = ctx.add_with_modules(
        "loop", inputs, value_map{{"carried", static_cast<std::int64_t>(carried)}, {"iterations", iterations}},
        sub.modules);
    return ctx.tuple_elements(result, carried + scan_outputs);
}

// One scan over static-length sequences, as a loop (shared by the Scan
// opsets: 9 and later scan whole inputs, 8 scans each batch entry).
struct scan_spec {
    std::vector<instruction_ref> states;       // initial state values
    std::vector<instruction_ref> scan_inputs;  // scanned along input_axes
    std::vector<std::size_t> input_axes;
    std::vector<bool> input_reversed;
    std::vector<std::int64_t> output_axes;  // as ONNX gives them (may be negative)
    std::vector<bool> output_reversed;
};

args_t scan_as_loop(const node_context& ctx, const onnx::GraphProto& body, const scan_spec& spec) {
    const std::size_t n_states = spec.states.size(), n_inputs = spec.scan_inputs.size();
    if (static_cast<std::size_t>(body.input_size()) != n_states + n_inputs)
        ctx.fail(error_kind::invalid_argument, "the body takes " + std::to_string(body.input_size()) +
                                                   " inputs, expected " + std::to_string(n_states) + " states + " +
                                                   std::to_string(n_inputs) + " scan inputs");
    if (static_cast<std::size_t>(body.output_size()) < n_states)
        ctx.fail(error_kind::invalid_argument, "the body returns " + std::to_string(body.output_size()) +
                                                   " values, fewer than the " + std::to_string(n_states) + " states");
    const std::size_t n_outputs = static_cast<std::size_t>(body.output_size()) - n_states;
    if (spec.output_axes.size() != n_outputs || spec.output_reversed.size() != n_outputs)
        ctx.fail(error_kind::invalid_argument, "scan_output_axes / scan_output_directions need " +
                                                   std::to_string(n_outputs) + " entries, one per scan output");
    if (n_inputs == 0) ctx.fail(error_kind::invalid_argument, "a Scan needs at least one scan input");
    std::size_t length = 0;
    for (std::size_t j = 0; j < n_inputs; ++j) {
        const shape& s = spec.scan_inputs[j]->get_shape();
        const std::size_t n = s.lens()[spec.input_axes[j]];
        if (j > 0 && n != length)
            ctx.fail(error_kind::invalid_argument, "scan input " + std::to_string(j) + " has " + std::to_string(n) +
                                                       " steps along its axis but scan input 0 has " +
                                                       std::to_string(length));
        length = n;
    }
    const auto steps = static_cast<std::int64_t>(length);

    // Loop body parameters: iteration, condition, states, whole scan inputs, then captured values.
    instruction_ref condition_param;
    auto formal_inputs = [&](module& m) {
        auto iteration = m.add_parameter("iteration", shape{dtype::int64_type});
        condition_param = m.add_parameter("condition", shape{dtype::bool_type});
        args_t bound;
        for (std::size_t k = 0; k < n_states; ++k)
            bound.push_back(m.add_parameter("state_" + std::to_string(k), spec.states[k]->get_shape().as_standard()));
        args_t whole;
        for (std::size_t j = 0; j < n_inputs; ++j)
            whole.push_back(
                m.add_parameter("scan_input_" + std::to_string(j), spec.scan_inputs[j]->get_shape().as_standard()));
        instruction_ref backwards = iteration;
        if (std::find(spec.input_reversed.begin(), spec.input_reversed.end(), true) != spec.input_reversed.end()) {
            auto last = m.add_literal(literal(shape{dtype::int64_type}, std::vector<std::int64_t>{steps - 1}));
            backwards = m.add_instruction(make_op("sub"), {last, iteration});
        }
        for (std::size_t j = 0; j < n_inputs; ++j) {
            auto axis = static_cast<std::int64_t>(spec.input_axes[j]);
            bound.push_back(m.add_instruction(make_op("gather", value_map{{"axis", axis}}),
                                              {whole[j], spec.input_reversed[j] ? backwards : iteration}));
        }
        return bound;
    };
    auto sub = ctx.parse_subgraphs({"body"}, {formal_inputs});
    // The loop body returns its condition first: always true, the trip count ends it.
    module& loop_body = *sub.modules.front();
    auto ret = loop_body.get_return();
    args_t returned{condition_param};
    returned.insert(returned.end(), ret->inputs().begin(), ret->inputs().end());
    loop_body.replace_instruction(ret, op::return_op{}, returned);

    args_t inputs{ctx.add_literal(literal(shape{dtype::int64_type}, std::vector<std::int64_t>{steps})),
                  ctx.add_literal(literal(shape{dtype::bool_type}, std::vector<int>{1}))};
    inputs.insert(inputs.end(), spec.states.begin(), spec.states.end());
    inputs.insert(inputs.end(), spec.scan_inputs.begin(), spec.scan_inputs.end());
    inputs.insert(inputs.end(), sub.captured.begin(), sub.captured.end());
    auto result = ctx.add_with_modules(
        "loop", inputs, value_map{{"carried", static_cast<std::int64_t>(n_states)}, {"iterations", steps}},
        sub.modules);
    args_t outputs = ctx.tuple_elements(result, n_states + n_outputs);

    // Scan outputs come stacked along a new axis 0 in iteration order.
    for (std::size_t k = 0; k < n_outputs; ++k) {
        instruction_ref& out = outputs[n_states + k];
        if (spec.output_reversed[k]) {
            std::vector<std::int64_t> order(length);
            for (std::size_t i = 0; i < length; ++i) order[i] = steps - 1 - static_cast<std::int64_t>(i);
            out = ctx.add("gather", {out, ctx.add_literal(literal(shape{dtype::int64_type, {length}}, order))},
                          value_map{{"axis", 0}});
        }
        const auto rank = static_cast<std::int64_t>(out->get_shape().ndim());
        std::int64_t axis = spec.output_axes[k];
        if (axis < -rank || axis >= rank)
            ctx.fail(error_kind::invalid_argument, "scan_output_axes[" + std::to_string(k) +
                                                       "] = " + std::to_string(axis) + " is out of range for rank " +
                                                       std::to_string(rank));
        if (axis < 0) axis += rank;
        if (axis == 0) continue;
        std::vector<std::int64_t> perm;
        for (std::int64_t d = 0; d < rank; ++d) perm.push_back(d < axis ? d + 1 : (d == axis ? 0 : d));
        out = ctx.add("transpose", {out}, value_map{{"permutation", int_list(perm)}});
    }
    return outputs;
}

std::vector<bool> directions(const node_context& ctx, const std::string& name, std::size_t n) {
    auto values = ctx.get_ints(name, std::vector<std::int64_t>(n, 0));
    if (values.size() != n)
        ctx.fail(error_kind::invalid_argument,
                 name + " has " + std::to_string(values.size()) + " entries, expected " + std::to_string(n));
    std::vector<bool> out;
    for (auto v : values) {
        if (v != 0 && v != 1)
            ctx.fail(error_kind::invalid_argument,
                     name + " entries must be 0 (forward) or 1 (reverse), got " + std::to_string(v));
        out.push_back(v == 1);
    }
    return out;
}

std::size_t scan_axis(const node_context& ctx, std::int64_t axis, const shape& s, std::size_t j) {
    const auto rank = static_cast<std::int64_t>(s.ndim());
    if (axis < -rank || axis >= rank)
        ctx.fail(error_kind::invalid_argument, "scan_input_axes[" + std::to_string(j) + "] = " + std::to_string(axis) +
                                                   " is out of range for scan input of rank " + std::to_string(rank));
    return static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
}

// Scan (opset 9 and later): states and scan inputs without a batch axis.
args_t parse_scan_9(const node_context& ctx, const args_t& args, std::size_t n_scan) {
    const std::size_t n_states = args.size() - n_scan;
    scan_spec spec;
    spec.states.assign(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(n_states));
    spec.scan_inputs.assign(args.begin() + static_cast<std::ptrdiff_t>(n_states), args.end());
    auto axes = ctx.get_ints("scan_input_axes", std::vector<std::int64_t>(n_scan, 0));
    if (axes.size() != n_scan)
        ctx.fail(error_kind::invalid_argument,
                 "scan_input_axes has " + std::to_string(axes.size()) + " entries, expected " + std::to_string(n_scan));
    for (std::size_t j = 0; j < n_scan; ++j)
        spec.input_axes.push_back(scan_axis(ctx, axes[j], spec.scan_inputs[j]->get_shape(), j));
    spec.input_reversed = directions(ctx, "scan_input_directions", n_scan);
    const auto& body = ctx.get_graph("body");
    const std::size_t n_outputs =
        static_cast<std::size_t>(std::max<int>(0, body.output_size() - static_cast<int>(n_states)));
    spec.output_axes = ctx.get_ints("scan_output_axes", std::vector<std::int64_t>(n_outputs, 0));
    spec.output_reversed = directions(ctx, "scan_output_directions", n_outputs);
    return scan_as_loop(ctx, body, spec);
}

// Scan opset 8: every input has a leading batch axis, the scan axis is 1 and
// an optional first input gives per-batch sequence lengths. Each batch entry
// is scanned on its own and the results are stacked again.
args_t parse_scan_8(const node_context& ctx, const args_t& args, std::size_t n_scan) {
    const std::size_t n_states = args.size() - 1 - n_scan;
    const args_t values(args.begin() + 1, args.end());
    const shape& first = values.at(n_states)->get_shape();
    if (first.ndim() < 2) ctx.fail(error_kind::invalid_argument, "scan inputs need a batch and a sequence axis");
    const std::size_t batch = first.lens()[0], length = first.lens()[1];
    for (const auto& v : values)
        if (v->get_shape().ndim() == 0 || v->get_shape().lens()[0] != batch)
            ctx.fail(error_kind::invalid_argument,
                     "every state and scan input must have the batch size " + std::to_string(batch) + " first");
    if (ctx.has_input(args, 0)) {
        auto lens = ctx.constant_ints(args[0], "sequence_lens");
        for (auto l : lens)
            if (l != static_cast<std::int64_t>(length))
                ctx.fail(error_kind::not_implemented,
                         "sequence_lens shorter than the sequence (" + std::to_string(length) + ") are not supported");
    }
    auto reversed = directions(ctx, "directions", n_scan);
    const auto& body = ctx.get_graph("body");
    const std::size_t n_outputs =
        static_cast<std::size_t>(std::max<int>(0, body.output_size() - static_cast<int>(n_states)));
    std::vector<args_t> per_batch;
    for (std::size_t b = 0; b < batch; ++b) {
        auto index = ctx.add_scalar(dtype::int64_type, static_cast<double>(b));
        scan_spec spec;
        for (std::size_t k = 0; k < values.size(); ++k) {
            auto entry = ctx.add("gather", {values[k], index}, value_map{{"axis", 0}});
            (k < n_states ? spec.states : spec.scan_inputs).push_back(entry);
        }
        spec.input_axes.assign(n_scan, 0);
        spec.input_reversed = reversed;
        spec.output_axes.assign(n_outputs, 0);
        spec.output_reversed.assign(n_outputs, false);
        per_batch.push_back(scan_as_loop(ctx, body, spec));
    }
    args_t outputs;
    for (std::size_t i = 0; i < n_states + n_outputs; ++i) {
        args_t rows;
        for (const auto& r : per_batch)
            rows.push_back(ctx.add("unsqueeze", {r[i]}, value_map{{"axes", int_list(std::vector<std::int64_t>{0})}}));
        outputs.push_back(rows.size() == 1 ? rows[0] : ctx.add("concat", rows, value_map{{"axis", 0}}));
    }
    return outputs;
}

args_t parse_scan(const node_context& ctx, const args_t& args) {
    const std::int64_t n_scan = ctx.get_int("num_scan_inputs", -1);
    const std::size_t leading = ctx.opset() < 9 ? 1 : 0;  // opset 8's sequence_lens
    if (n_scan < 1 || static_cast<std::size_t>(n_scan) + leading > args.size())
        ctx.fail(error_kind::invalid_argument,
                 "num_scan_inputs must be between 1 and the number of inputs, got " + std::to_string(n_scan));
    for (std::size_t i = leading; i < args.size(); ++i)
        if (!ctx.has_input(args, i)) ctx.fail(error_kind::invalid_argument, "input " + std::to_string(i) + " is empty");
    return ctx.opset() < 9 ? parse_scan_8(ctx, args, static_cast<std::size_t>(n_scan))
                           : parse_scan_9(ctx, args, static_cast<std::size_t>(n_scan));
}

}  // namespace

void add_control_parsers(parser_table& table) {
    table["If"] = parse_if;
    table["Loop"] = parse_loop;
    table["Scan"] = parse_scan;
}

}  // namespace kiln::onnx_import
