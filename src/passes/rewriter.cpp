#include "passes/rewriter.hpp"

#include <algorithm>
#include <deque>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/in_place_writes.hpp"
#include "kiln/op_registry.hpp"

namespace kiln {

namespace {

// Instructions waiting to be visited, each at most once at a time. Entries
// are keyed by address so that an erased instruction is never dereferenced:
// erasing drops it from `pending_` and its stale queue entry is skipped.
class worklist {
public:
    void push(instruction_ref ins) {
        if (pending_.emplace(&*ins, ins).second) order_.push_back(&*ins);
    }
    std::optional<instruction_ref> pop() {
        while (!order_.empty()) {
            const instruction* p = order_.front();
            order_.pop_front();
            auto it = pending_.find(p);
            if (it == pending_.end()) continue;
            instruction_ref ins = it->second;
            pending_.erase(it);
            return ins;
        }
        return std::nullopt;
    }
    void forget(const instruction* p) { pending_.erase(p); }

private:
    std::deque<const instruction*> order_;
    std::unordered_map<const instruction*, instruction_ref> pending_;
};

// Erases the candidates that are dead and, transitively, inputs that die
// with them; inputs that survive lost a use, so they are revisited.
std::size_t remove_dead_from(module& m, std::vector<instruction_ref> candidates, worklist& wl) {
    std::size_t count = 0;
    std::unordered_set<const instruction*> erased;
    while (!candidates.empty()) {
        instruction_ref c = candidates.back();
        candidates.pop_back();
        if (erased.count(&*c)) continue;
        if (!is_removable(*c) || !c->outputs().empty()) {
            wl.push(c);
            continue;
        }
        auto inputs = c->inputs();
        erased.insert(&*c);
        wl.forget(&*c);
        m.remove_instruction(c);
        ++count;
        candidates.insert(candidates.end(), inputs.begin(), inputs.end());
    }
    return count;
}

// The shapes `user`'s inputs would have with `old` of shape `now`.
std::vector<shape> input_shapes_with(instruction_ref user, instruction_ref old, const shape& now) {
    std::vector<shape> shapes = user->input_shapes();
    for (std::size_t i = 0; i < shapes.size(); ++i)
        if (user->inputs()[i] == old) shapes[i] = now;
    return shapes;
}

bool users_unaffected(instruction_ref old, const shape& new_shape) {
    for (const auto& user : old->outputs()) {
        if (user->is_return()) return false;
        try {
            if (user->get_operator().compute_shape(input_shapes_with(user, old, new_shape)) != user->get_shape())
                return false;
        } catch (const error&) {
            return false;
        }
    }
    return true;
}

// Whether every reader below `old` can take it with shape `now` (see
// replace_value_restrided).
bool restriding_possible(instruction_ref old, const shape& now) {
    for (const auto& user : old->outputs()) {
        if (user->is_return()) return false;
        const operation& op = user->get_operator();
        const std::vector<shape> shapes = input_shapes_with(user, old, now);
        shape result;
        try {
            result = op.compute_shape(shapes);
        } catch (const error&) {
            return false;
        }
        const bool was_view = op.output_alias(user->input_shapes()) >= 0;
        const bool is_view = op.output_alias(shapes) >= 0;
        if (was_view && !is_view) return false;
        if (result == user->get_shape()) continue;
        const shape& before = user->get_shape();
        if (!is_view || result.lens() != before.lens() || result.type() != before.type()) return false;
        if (!restriding_possible(user, result)) return false;
    }
    return true;
}

// Readers whose input changed strides: those whose shapes follow (views)
// take their new shapes, and their readers in turn.
void update_readers(module& m, const std::vector<instruction_ref>& readers) {
    for (auto reader : readers) {
        if (reader->recompute_shape() == reader->get_shape()) continue;
        m.update_result_strides(reader);
        update_readers(m, reader->outputs());
    }
}

}  // namespace

bool is_removable(const instruction& ins) {
    // A write into an input's memory is seen by the caller, read or not.
    return !ins.is_param() && !ins.is_return() && !writes_in_place(ins.get_operator());
}

std::size_t remove_dead_instructions(module& m) {
    // Inputs precede their users, so one backward sweep also catches inputs
    // whose last user was erased later in the sweep.
    std::size_t count = 0;
    if (m.size() == 0) return 0;
    auto it = std::prev(m.end());
    for (;;) {
        bool at_first = it == m.begin();
        auto prev = at_first ? it : std::prev(it);
        if (is_removable(*it) && it->outputs().empty()) {
            m.remove_instruction(it);
            ++count;
        }
        if (at_first) break;
        it = prev;
    }
    return count;
}

bool replace_value(module& m, instruction_ref old, instruction_ref replacement) {
    if (old == replacement) return false;
    const shape& was = old->get_shape();
    const shape& now = replacement->get_shape();
    if (was == now) {
        m.replace_all_uses(old, replacement);
        return true;
    }
    if (was.type() != now.type() || was.lens() != now.lens()) return false;
    if (users_unaffected(old, now)) {
        m.replace_all_uses(old, replacement);
        return true;
    }
    if (!was.standard()) return false;
    auto copy = m.insert_instruction(old, make_op("contiguous"), {replacement});
    m.replace_all_uses(old, copy);
    return true;
}

bool replace_value_restrided(module& m, instruction_ref old, instruction_ref replacement) {
    if (old == replacement) return false;
    const shape& was = old->get_shape();
    const shape& now = replacement->get_shape();
    if (was.type() != now.type() || was.lens() != now.lens()) return false;
    if (!restriding_possible(old, now)) return false;
    const auto readers = old->outputs();
    m.replace_all_uses(old, replacement);
    update_readers(m, readers);
    return true;
}

bool replace_with_new(module& m, instruction_ref old, const operation& op, const std::vector<instruction_ref>& inputs) {
    std::vector<shape> shapes;
    for (const auto& in : inputs) shapes.push_back(in->get_shape());
    shape result;
    try {
        result = op.compute_shape(shapes);
    } catch (const error&) {
        return false;
    }
    const shape& was = old->get_shape();
    if (result.type() != was.type() || result.lens() != was.lens()) return false;
    if (result != was && !was.standard() && !users_unaffected(old, result)) return false;
    return replace_value(m, old, m.insert_instruction(old, op, inputs));
}

instruction_ref insert_if_shape(module& m, instruction_ref pos, const operation& op,
                                const std::vector<instruction_ref>& inputs, const shape& expected) {
    std::vector<shape> shapes;
    for (const auto& in : inputs) shapes.push_back(in->get_shape());
    try {
        if (op.compute_shape(shapes) != expected) return m.end();
    } catch (const error&) {
        return m.end();
    }
    return m.insert_instruction(pos, op, inputs);
}

namespace {

// A rule that declines after inserting instructions (a view it then could
// not substitute) must leave the module as it was. What it inserted sits
// between `before` and the root, read by nothing; left there, another rule
// rewrote it (merge_reshapes on a dead reshape of a reshape) after every
// declined attempt, so the driver never reached a fixed point.
void discard_declined_attempt(module& m, std::optional<instruction_ref> before, instruction_ref root) {
    std::vector<instruction_ref> inserted;
    for (auto it = before ? std::next(*before) : m.begin(); it != root; ++it) inserted.push_back(it);
    for (auto it = inserted.rbegin(); it != inserted.rend(); ++it)
        if (is_removable(**it) && (*it)->outputs().empty()) m.remove_instruction(*it);
}

}  // namespace

rewrite_stats rewrite_to_fixed_point(module& m, const std::vector<rewrite_rule>& rules) {
    rewrite_stats stats;
    stats.removed += remove_dead_instructions(m);
    // Rules that undo each other would loop; real rewrites shrink or
    // canonicalize, so a generous multiple of the module size is plenty.
    const std::size_t limit = 16 * m.size() + 1024;
    for (;;) {
        ++stats.rounds;
        std::size_t applied_this_round = 0;
        worklist wl;
        for (auto it = m.begin(); it != m.end(); ++it) wl.push(it);
        while (auto ins = wl.pop()) {
            for (const auto& rule : rules) {
                auto match = match::find_match(*ins, rule.pattern);
                if (!match) continue;
                auto users = (*ins)->outputs();
                auto inputs = (*ins)->inputs();
                std::optional<instruction_ref> before;
                if (*ins != m.begin()) before = std::prev(*ins);
                const std::size_t size_before = m.size();
                bool applied = false;
                {
                    // What the rule inserts replaces the root: it carries the root's origin.
                    origin_scope origin(m, (*ins)->origin());
                    applied = rule.apply(m, *match);
                }
                if (!applied) {
                    // Rules insert right before the root and erase nothing when they decline.
                    if (m.size() != size_before) discard_declined_attempt(m, before, *ins);
                    continue;
                }
                ++stats.applied;
                ++applied_this_round;
                ++stats.applied_by_rule[rule.name];
                if (stats.applied > limit)
                    fail(error_kind::runtime, "rewrite rules do not reach a fixed point in module '" + m.name() +
                                                  "' (last rule applied: '" + rule.name + "')");
                // New instructions sit before the root; the root may have changed in place.
                for (auto it = before ? std::next(*before) : m.begin(); it != m.end(); ++it) {
                    wl.push(it);
                    if (it == *ins) break;
                }
                for (const auto& u : users) wl.push(u);
                std::vector<instruction_ref> candidates = inputs;
                candidates.push_back(*ins);
                stats.removed += remove_dead_from(m, std::move(candidates), wl);
                break;
            }
        }
        if (applied_this_round == 0) break;
    }
    stats.removed += remove_dead_instructions(m);
    return stats;
}

value lens_value(const std::vector<std::size_t>& lens) {
    value_list dims;
    for (auto l : lens) dims.emplace_back(static_cast<std::int64_t>(l));
    return dims;
}

}  // namespace kiln
