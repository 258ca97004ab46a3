#pragma once
// Rewrite rules (a matcher plus what to do with a match) and the worklist
// driver that applies a set of them until none applies anywhere, removing
// whatever becomes dead along the way.
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "passes/matcher.hpp"

namespace kiln {

struct rewrite_rule {
    std::string name;
    match::matcher pattern;
    // Rewrites a match and returns true, or returns false to decline. It may
    // insert instructions (before the root, so the driver visits them) and
    // redirect uses, but never erases: the driver removes what becomes dead.
    std::function<bool(module&, const match::match_result&)> apply;
};

struct rewrite_stats {
    std::size_t applied = 0;  // successful rule applications
    std::size_t removed = 0;  // dead instructions erased
    std::size_t rounds = 0;   // full sweeps over the module (the last one changes nothing)
    std::map<std::string, std::size_t> applied_by_rule;
};

// Applies `rules` until a full sweep over the module applies none (a fixed
// point). A set of rules that keeps undoing each other raises an error
// naming the rule, instead of looping forever.
rewrite_stats rewrite_to_fixed_point(module& m, const std::vector<rewrite_rule>& rules);

// Params and the return are kept even when unused; everything else without
// users can go.
bool is_removable(const instruction& ins);
// Erases every unused removable instruction; returns how many went.
std::size_t remove_dead_instructions(module& m);

// Makes the users of `old` use `replacement`, which computes the same values.
// When the two shapes differ only in strides the users must not notice:
// an elementwise user does not, a view would, and the return's shapes must
// stay as they were; then a contiguous copy is inserted when `old` was
// standard, or the replacement is refused (returns false).
bool replace_value(module& m, instruction_ref old, instruction_ref replacement);

// Makes the readers of `old` read `replacement` instead: the same values and
// lens in other strides (a view where `old` was a copy, say), so that no
// copy is made. Readers whose result does not depend on their input's
// strides take it as it is; views of `old` (transpose, slice, ...) take new
// strides in place, and so on down, so that the strides reach the readers
// that take any. Returns false, changing nothing, when a reader
// somewhere down cannot take them: the return, an op whose result would
// change other than a view, or a view that would become a copy (a reshape
// whose input stops being standard).
bool replace_value_restrided(module& m, instruction_ref old, instruction_ref replacement);

// Replaces `old` by a new instruction `op(inputs)` inserted before it, under
// the rules of replace_value; inserts nothing and returns false when the
// new result's type or lens differ or the replacement is refused.
bool replace_with_new(module& m, instruction_ref old, const operation& op, const std::vector<instruction_ref>& inputs);

// Inserts `op` before `pos` if its result would have exactly shape `expected`
// (lens, type and strides); returns m.end() otherwise, inserting nothing.
// Lengths as an op attribute (a broadcast's out_lens, a reshape's dims).
value lens_value(const std::vector<std::size_t>& lens);

instruction_ref insert_if_shape(module& m, instruction_ref pos, const operation& op,
                                const std::vector<instruction_ref>& inputs, const shape& expected);

}  // namespace kiln
