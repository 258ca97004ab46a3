#pragma once
// A chain or tree of elementwise ops evaluated as one op: what the
// fuse_pointwise pass turns groups of elementwise instructions into, so that
// a fast kernel makes one pass over memory instead of one per op.
//
// The op carries a small program. Values are numbered: 0..n-1 are the fused
// op's n inputs, n+k is the result of step k. Each step is an elementwise op
// (is_pointwise(), with its attributes) applied to earlier values with numpy
// broadcasting; the last step's result is the op's result. When any value is
// float16 / bfloat16, the program runs in float32: 16-bit inputs and step
// results are widened to float32, each step computes on float32 values, and
// the last value is rounded to the result's type once at the end (so a
// 16-bit chain does not round after every step). Printed:
//   fused_pointwise[steps={{"div", {0, 1}}, {"erf", {3}}, {"add", {4, 2}}}]
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

struct pointwise_step {
    operation op;
    std::vector<std::size_t> args;  // value numbers (see above)

    friend bool operator==(const pointwise_step& a, const pointwise_step& b) {
        return a.op == b.op && a.args == b.args;
    }
};

// The value form, {"name", {args...}} or {"name", {args...}, {attr=...}};
// found by argument-dependent lookup from reflect.hpp.
value attribute_to_value(const pointwise_step& step);
void attribute_from_value(const value& v, pointwise_step& step);

struct fused_pointwise : op_base {
    std::vector<pointwise_step> steps;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.steps, "steps");
    }
    std::string name() const { return "fused_pointwise"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    // Evaluates the steps one by one with each op's reference compute.
    void compute(const argument& result, const std::vector<argument>& inputs) const;
    // compute when some value is float16 / bfloat16 (see above).
    void compute_widened(const argument& result, const std::vector<argument>& inputs) const;

    // The shape of every value (inputs, then one per step); checks the program.
    std::vector<shape> value_shapes(const std::vector<shape>& inputs) const;
};

}  // namespace kiln::op
