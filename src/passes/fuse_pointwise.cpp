// Pointwise fusion: groups of elementwise instructions become one
// fused_pointwise, so that a kernel reads the group's inputs and writes its
// result once instead of materializing every intermediate.
//
// Groups have one output. Walking backwards, an unfused elementwise
// instruction starts a group, which then takes in each elementwise producer
// of a member whose every user is already a member, until none qualifies.
// A value read outside the group therefore ends it (it is not recomputed:
// the intermediate would be written anyway). Producers must have the
// group's lens: a smaller operand (a per-channel scale computed from a
// constant, a mask) stays outside instead of being recomputed for every
// output element. Only float32 and bool values are fused: those are what
// the cpu kernel runs, and a group of any other type would be evaluated by
// the reference step by step, each intermediate in a buffer of its own,
// which is slower than the separate instructions. With fuse_16bit_floats
// (the gpu target, whose kernel computes half / bfloat16 natively) groups
// of float16 or bfloat16 values fuse as well; a group never mixes two float
// types, only one of them with bool. A group of one instruction stays as it
// is.
#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "kiln/passes.hpp"
#include "ops/fused_pointwise.hpp"

namespace kiln {

namespace {

bool is_16bit_float(dtype t) { return t == dtype::half_type || t == dtype::bf16_type; }

bool fusable_type(dtype t, bool sixteen_bit) {
    return t == dtype::float_type || t == dtype::bool_type || (sixteen_bit && is_16bit_float(t));
}

// The one float type among the instruction's result and inputs (nullopt when
// all are bool); `mixed` is set when there are two.
std::optional<dtype> float_type_of(const instruction& ins, bool& mixed) {
    std::optional<dtype> found;
    auto see = [&](dtype t) {
        if (t == dtype::bool_type) return;
        if (found && *found != t) mixed = true;
        found = t;
    };
    see(ins.get_shape().type());
    for (const auto& in : ins.inputs()) see(in->get_shape().type());
    return found;
}

bool fusable(const instruction& ins, bool sixteen_bit) {
    if (ins.is_param() || ins.is_literal() || ins.is_return() || !ins.module_inputs().empty()) return false;
    if (!ins.get_operator().is_pointwise() || ins.get_shape().elements() == 0) return false;
    if (!fusable_type(ins.get_shape().type(), sixteen_bit)) return false;
    if (!std::all_of(ins.inputs().begin(), ins.inputs().end(), [&](const instruction_ref& in) {
            return fusable_type(in->get_shape().type(), sixteen_bit);
        }))
        return false;
    bool mixed = false;
    float_type_of(ins, mixed);
    return !mixed;
}

using member_set = std::unordered_set<const instruction*>;

// The instructions fused with `root`, which starts the group.
member_set grow_group(instruction_ref root, const member_set& taken, bool sixteen_bit) {
    member_set group{&*root};
    std::vector<instruction_ref> members{root};
    const auto& lens = root->get_shape().lens();
    bool mixed = false;
    std::optional<dtype> group_type = float_type_of(*root, mixed);
    bool changed = true;
    while (changed) {
        changed = false;
        for (std::size_t i = 0; i < members.size(); ++i) {
            for (const auto& p : members[i]->inputs()) {
                if (group.count(&*p) || taken.count(&*p) || !fusable(*p, sixteen_bit) || p->get_shape().lens() != lens)
                    continue;
                const std::optional<dtype> p_type = float_type_of(*p, mixed);
                if (p_type && group_type && *p_type != *group_type) continue;  // one float type per group
                const auto& users = p->outputs();
                if (!std::all_of(users.begin(), users.end(),
                                 [&](const instruction_ref& u) { return group.count(&*u) > 0; }))
                    continue;
                if (p_type) group_type = p_type;
                group.insert(&*p);
                members.push_back(p);
                changed = true;
            }
        }
    }
    return group;
}

// Replaces the group (members in module order, root last) by one fused_pointwise.
void fuse_group(module& m, const std::vector<instruction_ref>& members) {
    std::unordered_map<const instruction*, std::size_t> step_of;
    std::vector<instruction_ref> inputs;
    std::unordered_map<const instruction*, std::size_t> input_of;
    for (std::size_t k = 0; k < members.size(); ++k) step_of[&*members[k]] = k;
    for (const auto& ins : members)
        for (const auto& in : ins->inputs())
            if (!step_of.count(&*in) && input_of.emplace(&*in, inputs.size()).second) inputs.push_back(in);

    op::fused_pointwise fused;
    for (const auto& ins : members) {
        op::pointwise_step step{ins->get_operator(), {}};
        for (const auto& in : ins->inputs()) {
            auto s = step_of.find(&*in);
            step.args.push_back(s != step_of.end() ? inputs.size() + s->second : input_of.at(&*in));
        }
        fused.steps.push_back(std::move(step));
    }
    instruction_ref root = members.back();
    auto replacement = m.insert_instruction(root, fused, inputs);
    m.replace_all_uses(root, replacement);
    for (auto it = members.rbegin(); it != members.rend(); ++it) m.remove_instruction(*it);
}

}  // namespace

void fuse_pointwise::apply(module& m) const {
    std::unordered_map<const instruction*, std::size_t> position;
    std::vector<instruction_ref> order;
    for (auto it = m.begin(); it != m.end(); ++it) {
        position[&*it] = order.size();
        order.push_back(it);
    }
    member_set taken;
    std::vector<std::vector<instruction_ref>> groups;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        instruction_ref root = *it;
        if (taken.count(&*root) || !fusable(*root, fuse_16bit_floats)) continue;
        member_set group = grow_group(root, taken, fuse_16bit_floats);
        taken.insert(group.begin(), group.end());
        if (group.size() < 2) continue;
        std::vector<instruction_ref> members;
        for (const instruction* p : group) members.push_back(order[position.at(p)]);
        std::sort(members.begin(), members.end(), [&](const instruction_ref& a, const instruction_ref& b) {
            return position.at(&*a) < position.at(&*b);
        });
        groups.push_back(std::move(members));
    }
    for (const auto& members : groups) fuse_group(m, members);
}

}  // namespace kiln
