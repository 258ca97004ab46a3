// One forward sweep. Each instruction that can run blocked is rebuilt to
// read the blocked form of its inputs and is followed by a from_blocked that
// takes its place for everyone else. An input's blocked form is the operand
// of the from_blocked it comes from, when it comes from one, and a new
// to_blocked otherwise. Plain users keep reading the from_blocked; the ones
// that end up unused are removed at the end.
#include <set>
#include <vector>

#include "kiln/op_registry.hpp"
#include "ops/blocked_layout.hpp"
#include "ops/fused_convolution.hpp"
#include "passes/rewriter.hpp"
#include "targets/cpu/cpu_passes.hpp"

namespace kiln {

namespace {

// The blocked twin of a value that is itself a from_blocked, or end().
instruction_ref existing_blocked(module& m, instruction_ref v) {
    return v->name() == "from_blocked" ? v->inputs()[0] : m.end();
}

instruction_ref blocked_form(module& m, instruction_ref pos, instruction_ref v) {
    auto twin = existing_blocked(m, v);
    if (twin != m.end()) return twin;
    return m.insert_instruction(pos, make_op("to_blocked"), {v});
}

// Replaces `ins` by `blocked_op(inputs)` followed by from_blocked.
void rebuild_blocked(module& m, instruction_ref ins, const operation& blocked_op,
                     const std::vector<instruction_ref>& inputs) {
    auto blocked = m.insert_instruction(ins, blocked_op, inputs);
    auto plain = m.insert_instruction(ins, make_op("from_blocked"), {blocked});
    m.replace_all_uses(ins, plain);
}

bool blockable_convolution(const instruction& ins, const op::fused_convolution& conv) {
    if (conv.input_layout != op::tensor_layout::nchw || conv.output_layout != op::tensor_layout::nchw) return false;
    if (!ops::can_block(ins.get_shape()) || ins.inputs()[0]->get_shape().ndim() != 4) return false;
    // Binary post-op operands must be whole tensors to be read blocked.
    for (std::size_t i = conv.first_post_operand(); i < ins.inputs().size(); ++i)
        if (ins.inputs()[i]->get_shape().lens() != ins.get_shape().lens()) return false;
    return true;
}

void block_convolution(module& m, instruction_ref ins, op::fused_convolution conv) {
    std::vector<instruction_ref> inputs = ins->inputs();
    auto x = inputs[0];
    if (existing_blocked(m, x) != m.end() || ops::can_block(x->get_shape())) {
        inputs[0] = blocked_form(m, ins, x);
        conv.input_layout = op::tensor_layout::nchw8c;
    }  // else: few input channels (an image); oneDNN reads it plain and writes blocked
    for (std::size_t i = conv.first_post_operand(); i < inputs.size(); ++i) inputs[i] = blocked_form(m, ins, inputs[i]);
    conv.output_layout = op::tensor_layout::nchw8c;
    rebuild_blocked(m, ins, conv, inputs);
}

// Ops whose blocked form is the same op on the blocked tensors: elementwise
// ones on operands of one shape, and concat along channels.
const std::set<std::string>& layout_agnostic_ops() {
    static const std::set<std::string> names{"relu", "sigmoid", "tanh", "add", "mul", "sub", "max", "min"};
    return names;
}

bool all_inputs_blocked(module& m, const instruction& ins) {
    for (const auto& in : ins.inputs())
        if (existing_blocked(m, in) == m.end()) return false;
    return !ins.inputs().empty();
}

bool blockable_elementwise(module& m, const instruction& ins) {
    if (layout_agnostic_ops().count(ins.name()) == 0 || !all_inputs_blocked(m, ins)) return false;
    for (const auto& in : ins.inputs())
        if (in->get_shape().lens() != ins.get_shape().lens()) return false;
    return true;
}

bool blockable_concat(module& m, const instruction& ins) {
    if (ins.name() != "concat" || ins.get_shape().ndim() != 4 || !all_inputs_blocked(m, ins)) return false;
    const auto axis = ins.get_operator().attributes().find("axis")->as_int();
    return axis == 1 || axis == -3;
}

}  // namespace

void propagate_blocked_layout::apply(module& m) const {
    std::vector<instruction_ref> order;
    for (auto it = m.begin(); it != m.end(); ++it) order.push_back(it);
    for (auto ins : order) {
        if (const auto* conv = ins->get_operator().get_if<op::fused_convolution>()) {
            if (blockable_convolution(*ins, *conv)) block_convolution(m, ins, *conv);
            continue;
        }
        if (blockable_elementwise(m, *ins) || blockable_concat(m, *ins)) {
            std::vector<instruction_ref> inputs;
            for (const auto& in : ins->inputs()) inputs.push_back(existing_blocked(m, in));
            rebuild_blocked(m, ins, blockable_concat(m, *ins) ? make_op("concat", value_map{{"axis", std::int64_t{1}}})
                                                              : ins->get_operator(),
                            inputs);
        }
    }
    remove_dead_instructions(m);
}

}  // namespace kiln
