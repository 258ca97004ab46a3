// One forward sweep. Each instruction that can run blocked (convolutions;
// where a blocked value already is: elementwise ops, with per-channel
// operands too, channel concat, pooling, reductions over H and W) is rebuilt
// to read the blocked form of its inputs and is followed by a from_blocked
// that takes its place for everyone else. An input's blocked form is the operand
// of the from_blocked it comes from, when it comes from one, and a new
// to_blocked otherwise. Plain users keep reading the from_blocked; the ones
// that end up unused are removed at the end.
//
// Values with C a multiple of 8 block; in 16-channel blocks one with C an odd
// multiple of 8 is padded with zero channels (ops/blocked_layout.hpp), so
// only ops that keep zeros zero run on it.
#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "kiln/op_registry.hpp"
#include "ops/blocked_layout.hpp"
#include "ops/fused_convolution.hpp"
#include "ops/pool.hpp"
#include "passes/rewriter.hpp"
#include "targets/cpu/passes/cpu_passes.hpp"

namespace kiln {

namespace {

// The blocked twin of a value that is itself a from_blocked, or end().
instruction_ref existing_blocked(module& m, instruction_ref v) {
    return v->name() == "from_blocked" ? v->inputs()[0] : m.end();
}

instruction_ref blocked_form(module& m, instruction_ref pos, instruction_ref v, std::size_t block) {
    auto twin = existing_blocked(m, v);
    if (twin != m.end()) return twin;
    return m.insert_instruction(pos, make_op("to_blocked", value_map{{"block", static_cast<std::int64_t>(block)}}),
                                {v});
}

// Whether a plain value can live in blocks: C a multiple of 8 (whole blocks
// of 8, or of 16 with padding).
bool fits_block(const shape& plain) { return ops::can_block(plain, ops::avx2_channel_block); }

bool padded(const shape& plain, std::size_t block) { return plain.lens()[1] % block != 0; }

// The from_blocked that gives `blocked` back as the plain value `like`.
instruction_ref unblock(module& m, instruction_ref pos, instruction_ref blocked, const shape& like) {
    const std::size_t block = blocked->get_shape().lens().back();
    if (!padded(like, block)) return m.insert_instruction(pos, make_op("from_blocked"), {blocked});
    const auto channels = static_cast<std::int64_t>(like.lens()[1]);
    return m.insert_instruction(pos, make_op("from_blocked", value_map{{"channels", channels}}), {blocked});
}

// Replaces `ins` by `blocked_op(inputs)` followed by from_blocked.
void rebuild_blocked(module& m, instruction_ref ins, const operation& blocked_op,
                     const std::vector<instruction_ref>& inputs) {
    auto blocked = m.insert_instruction(ins, blocked_op, inputs);
    m.replace_all_uses(ins, unblock(m, ins, blocked, ins->get_shape()));
}

// Elementwise ops whose blocked form is the same op on blocked operands.
const std::set<std::string>& layout_agnostic_ops() {
    static const std::set<std::string> names{"relu", "sigmoid", "tanh", "add", "mul", "sub",
                                             "div", "max",     "min",  "clip"};
    return names;
}

// Those of them that give zero where every operand is zero: the ones that may
// run on padded values (sigmoid's 0.5 or div's NaN would reach the next
// convolution through its zero weights).
const std::set<std::string>& zero_keeping_ops() {
    static const std::set<std::string> names{"relu", "tanh", "add", "mul", "sub", "max", "min"};
    return names;
}

bool all_inputs_blocked(module& m, const instruction& ins) {
    for (const auto& in : ins.inputs())
        if (existing_blocked(m, in) == m.end()) return false;
    return !ins.inputs().empty();
}

// Whether `operand` broadcasts along the channels of a [N, C, H, W] result
// only: [C, 1, 1] or [1, C, 1, 1] (a batch-norm scale, a bias).
bool per_channel(const shape& operand, const shape& plain_result) {
    const auto& lens = operand.lens();
    if (lens.size() < 3 || lens.size() > 4 || (lens.size() == 4 && lens[0] != 1)) return false;
    const std::size_t c = lens[lens.size() - 3];
    return c == plain_result.lens()[1] && lens[lens.size() - 2] == 1 && lens.back() == 1;
}

// Whether blocked_operand gives an operand of shape `s` a blocked form.
bool has_blocked_operand(const shape& s, const shape& plain_result) {
    return s.lens() == plain_result.lens() || (s.elements() == 1 && s.ndim() <= 5) || per_channel(s, plain_result);
}

value_list int_list(const std::vector<std::int64_t>& v) {
    value_list out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = value(v[i]);
    return out;
}

// An operand of an elementwise op run on blocked tensors: a full-size value
// in its blocked form; a per-channel one as [1, C/b, 1, 1, b] (zero-padded
// to whole blocks), which broadcasts over [N, C/b, H, W, b] as it did over
// the channels; a single value as it is. Nothing for other shapes.
std::optional<instruction_ref> blocked_operand(module& m, instruction_ref pos, instruction_ref v,
                                               const shape& plain_result, std::size_t block) {
    const shape& s = v->get_shape();
    if (s.lens() == plain_result.lens()) return blocked_form(m, pos, v, block);
    if (s.elements() == 1 && s.ndim() <= 5) return v;
    if (!per_channel(s, plain_result)) return std::nullopt;
    const auto channels = static_cast<std::int64_t>(plain_result.lens()[1]);
    const auto b = static_cast<std::int64_t>(block);
    const std::int64_t blocks = (channels + b - 1) / b;
    if (channels % b != 0) {
        v = m.insert_instruction(pos, make_op("reshape", value_map{{"dims", int_list({channels})}}), {v});
        v = m.insert_instruction(pos, make_op("pad", value_map{{"pads", int_list({0, blocks * b - channels})}}), {v});
    }
    return m.insert_instruction(pos, make_op("reshape", value_map{{"dims", int_list({1, blocks, 1, 1, b})}}), {v});
}

bool blockable_convolution(const instruction& ins, const op::fused_convolution& conv) {
    if (conv.input_layout != op::tensor_layout::nchw || conv.output_layout != op::tensor_layout::nchw) return false;
    if (!fits_block(ins.get_shape()) || ins.inputs()[0]->get_shape().ndim() != 4) return false;
    // Binary post-op operands must have a blocked form: whole tensors, single
    // values, per-channel values (a batch norm after the activation).
    for (std::size_t i = conv.first_post_operand(); i < ins.inputs().size(); ++i)
        if (!has_blocked_operand(ins.inputs()[i]->get_shape(), ins.get_shape())) return false;
    return true;
}

void block_convolution(module& m, instruction_ref ins, op::fused_convolution conv, std::size_t block) {
    std::vector<instruction_ref> inputs = ins->inputs();
    auto x = inputs[0];
    const auto layout = ops::blocked_layout("propagate_blocked_layout", block);
    if (existing_blocked(m, x) != m.end() || fits_block(x->get_shape())) {
        inputs[0] = blocked_form(m, ins, x, block);
        conv.input_layout = layout;
    }  // else: few input channels (an image); oneDNN reads it plain and writes blocked
    for (std::size_t i = conv.first_post_operand(); i < inputs.size(); ++i)
        inputs[i] = *blocked_operand(m, ins, inputs[i], ins->get_shape(), block);
    conv.output_layout = layout;
    rebuild_blocked(m, ins, conv, inputs);
}

bool blockable_elementwise(module& m, const instruction& ins, std::size_t block) {
    if (layout_agnostic_ops().count(ins.name()) == 0 || !fits_block(ins.get_shape())) return false;
    const bool keep_zeros = padded(ins.get_shape(), block);
    if (keep_zeros && zero_keeping_ops().count(ins.name()) == 0) return false;
    bool any_blocked = false;
    for (const auto& in : ins.inputs()) {
        const shape& s = in->get_shape();
        if (s.lens() == ins.get_shape().lens()) {
            any_blocked = any_blocked || existing_blocked(m, in) != m.end();
        } else if (!has_blocked_operand(s, ins.get_shape()) || (keep_zeros && s.elements() == 1 && ins.name() != "mul")) {
            return false;  // a single value would land in the padding too (x + 1)
        }
    }
    return any_blocked;  // only where a blocked value already is: no reorders for elementwise ops alone
}

// Blocks concatenate only when no input is padded.
bool blockable_concat(module& m, const instruction& ins) {
    if (ins.name() != "concat" || ins.get_shape().ndim() != 4 || !all_inputs_blocked(m, ins)) return false;
    for (const auto& in : ins.inputs())
        if (padded(in->get_shape(), existing_blocked(m, in)->get_shape().lens().back())) return false;
    const auto axis = ins.get_operator().attributes().find("axis")->as_int();
    return axis == 1 || axis == -3;
}

std::vector<std::int64_t> ints(const value& v) {
    std::vector<std::int64_t> out;
    for (const auto& x : v.as_list()) out.push_back(x.as_int());
    return out;
}

// Pooling over H and W of a blocked tensor is 3-D pooling of
// [N, C/8, H, W, 8] with a one-element window along the channels of a block:
// the op and its kernels need no notion of layout.
std::optional<operation> blocked_pooling(module& m, const instruction& ins) {
    // Only a pooling has an input to look at: most instructions reach here.
    const auto* pool = ins.get_operator().get_if<op::pooling>();
    if (pool == nullptr) return std::nullopt;
    const shape& x = ins.inputs()[0]->get_shape();
    if (x.ndim() != 4 || existing_blocked(m, ins.inputs()[0]) == m.end()) return std::nullopt;
    op::pooling p = *pool;
    if (p.global) {
        p.global = false;
        p.lengths = {static_cast<std::int64_t>(x.lens()[2]), static_cast<std::int64_t>(x.lens()[3])};
        p.stride = p.padding = p.dilation = {};
        p.ceil_mode = false;
    }
    auto with_unit = [](std::vector<std::int64_t> v, std::int64_t unit) {
        if (v.empty()) v = {unit, unit};
        v.push_back(unit);
        return v;
    };
    p.lengths = with_unit(p.lengths, 1);
    p.stride = with_unit(p.stride, 1);
    p.dilation = with_unit(p.dilation, 1);
    std::vector<std::int64_t> pads = p.padding;  // none, one per side of H and W, or symmetric ones
    if (pads.empty()) pads.assign(4, 0);
    if (pads.size() == 2) pads = {pads[0], pads[1], pads[0], pads[1]};
    if (pads.size() != 4) return std::nullopt;
    p.padding = {pads[0], pads[1], 0, pads[2], pads[3], 0};
    return operation(p);
}

// A mean, sum, max or min over H and W reduces the same axes of the blocked
// tensor; its [N, C/8, 1, 1, 8] result unblocks to [N, C, 1, 1].
std::optional<operation> blocked_spatial_reduce(module& m, const instruction& ins) {
    static const std::set<std::string> names{"reduce_mean", "reduce_sum", "reduce_max", "reduce_min"};
    const shape& x = ins.inputs().empty() ? ins.get_shape() : ins.inputs()[0]->get_shape();
    if (names.count(ins.name()) == 0 || x.ndim() != 4 || existing_blocked(m, ins.inputs()[0]) == m.end())
        return std::nullopt;
    auto axes = ints(*ins.get_operator().attributes().find("axes"));
    for (auto& a : axes) a = a < 0 ? a + 4 : a;
    std::sort(axes.begin(), axes.end());
    if (axes != std::vector<std::int64_t>{2, 3}) return std::nullopt;
    return make_op(ins.name(), value_map{{"axes", value_list{value(std::int64_t{2}), value(std::int64_t{3})}},
                                         {"keepdims", value(true)}});
}

}  // namespace

void propagate_blocked_layout::apply(module& m) const {
    const std::size_t block = preferred_block_;
    std::vector<instruction_ref> order;
    for (auto it = m.begin(); it != m.end(); ++it) order.push_back(it);
    for (auto ins : order) {
        if (const auto* conv = ins->get_operator().get_if<op::fused_convolution>()) {
            if (blockable_convolution(*ins, *conv)) block_convolution(m, ins, *conv, block);
            continue;
        }
        if (blockable_concat(m, *ins)) {
            std::vector<instruction_ref> inputs;
            for (const auto& in : ins->inputs()) inputs.push_back(existing_blocked(m, in));
            rebuild_blocked(m, ins, make_op("concat", value_map{{"axis", std::int64_t{1}}}), inputs);
        } else if (blockable_elementwise(m, *ins, block)) {
            std::vector<instruction_ref> inputs;
            for (const auto& in : ins->inputs())
                inputs.push_back(*blocked_operand(m, ins, in, ins->get_shape(), block));
            rebuild_blocked(m, ins, ins->get_operator(), inputs);
        } else if (auto pool = blocked_pooling(m, *ins)) {
            rebuild_blocked(m, ins, *pool, {existing_blocked(m, ins->inputs()[0])});
        } else if (auto reduce = blocked_spatial_reduce(m, *ins)) {
            const bool keepdims = ins->get_operator().attributes().find("keepdims")->as_bool();
            auto blocked = m.insert_instruction(ins, *reduce, {existing_blocked(m, ins->inputs()[0])});
            auto plain = unblock(m, ins, blocked, ins->inputs()[0]->get_shape());
            if (!keepdims) {
                value_list dims;
                for (auto l : ins->get_shape().lens()) dims.push_back(value(static_cast<std::int64_t>(l)));
                plain = m.insert_instruction(ins, make_op("reshape", value_map{{"dims", dims}}), {plain});
            }
            m.replace_all_uses(ins, plain);
        }
    }
    remove_dead_instructions(m);
}

}  // namespace kiln
