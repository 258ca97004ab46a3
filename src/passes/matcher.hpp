#pragma once
// A small matcher DSL for local rewrites. A matcher tests one instruction and,
// through its argument matchers, the instructions feeding it; matches can bind
// names to the instructions they saw so that a rewrite can pick them up:
//
//   auto pattern = match::name("add").args(match::any().bind("x"), match::is_constant().bind("c"));
//   if (auto r = match::find_match(ins, pattern)) use(r->at("x"), r->at("c"));
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/module.hpp"

namespace kiln::match {

struct match_result {
    instruction_ref root;
    std::map<std::string, instruction_ref> bindings;

    // The instruction bound to `name`; an error when nothing was bound to it.
    instruction_ref at(const std::string& name) const;
    bool has(const std::string& name) const { return bindings.count(name) > 0; }
};

class matcher {
public:
    using test_fn = std::function<bool(instruction_ref, match_result&)>;
    explicit matcher(test_fn test) : test_(std::move(test)) {}

    // Tests `ins`; on failure `result` is left as it was (no partial bindings).
    bool match(instruction_ref ins, match_result& result) const;

    // Each of these returns a matcher that also requires the extra condition.
    // Binding a name twice requires both places to be the same instruction,
    // so add(x, x) is written with two `any().bind("x")`.
    matcher bind(std::string name) const;
    // The inputs, positionally; the count must be exactly the number given.
    matcher args(std::vector<matcher> inputs) const;
    template <class... Ms>
    matcher args(Ms... inputs) const {
        return args(std::vector<matcher>{std::move(inputs)...});
    }
    // Two inputs in either order (for commutative ops).
    matcher args_any_order(matcher first, matcher second) const;
    matcher used_once() const;
    matcher is_constant() const;
    matcher shape_is(std::function<bool(const shape&)> predicate) const;
    matcher where(std::function<bool(instruction_ref)> predicate) const;

private:
    test_fn test_;
};

// Leaf matchers.
matcher any();
// The op is called `op_name`.
matcher name(const std::string& op_name);
// The op is called one of `op_names`.
matcher any_of_names(std::vector<std::string> op_names);
// Exactly one use (the return counts as a use; add(x, x) uses x twice).
matcher used_once();
// A literal, or computed by deterministic ops from literals only.
matcher is_constant();
matcher is_literal();
matcher shape_is(std::function<bool(const shape&)> predicate);
matcher standard_shape();
matcher where(std::function<bool(instruction_ref)> predicate);

// Combinators. any_of tries the alternatives in order and keeps the first match.
matcher all_of(std::vector<matcher> matchers);
matcher any_of(std::vector<matcher> matchers);
matcher none_of(std::vector<matcher> matchers);

std::optional<match_result> find_match(instruction_ref ins, const matcher& m);

// Whether `ins` is a literal or computed only from literals by ops whose
// result depends on nothing else (no parameters, no sub-modules, no randomness).
bool is_constant_instruction(const instruction& ins);
// Ops whose result may differ between runs on equal inputs.
bool is_nondeterministic(const operation& op);

}  // namespace kiln::match
