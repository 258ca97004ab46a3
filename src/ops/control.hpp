#pragma once
// Control flow: ops that take modules as arguments (if, loop) and
// get_tuple_elem, which takes their results apart.
//
// Several results as one value: if and loop return a tuple (shape::tuple)
// and get_tuple_elem views each element. One instruction per output, as
// split and topk do it, would run a branch or a whole loop once per output;
// the tuple runs it once, and as a tuple is a single buffer to executors and
// to memory planning, its elements cost no copies.
//
// Outer values: a module argument sees only its own parameters. What it needs
// from the enclosing module (ONNX subgraphs capture outer names) comes in as
// extra inputs of the instruction, bound to the module's parameters in their
// order. Data flow stays explicit, so DCE, CSE and memory planning see every
// use without looking inside modules.
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

// inputs: condition (bool, one element), then the captured values.
// modules: then, else. Each branch has one parameter per captured value
// (same dtype and lens, in order) and both return the same number of
// outputs with equal dtypes and lens (Kiln's shapes are static).
// result: tuple of the chosen branch's outputs.
struct if_op : op_base {
    std::string name() const { return "if"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
    shape compute_shape_with_modules(const std::vector<shape>& inputs, const std::vector<module_ref>& modules) const;
    void compute_with_modules(const argument& result, const std::vector<argument>& inputs,
                              const module_runner& run) const;
};

// ONNX Loop semantics with static shapes.
// inputs: max trip count (int64, one element), condition (bool, one
// element), `carried` initial loop-carried values, then captured values.
// module: body, with parameters (iteration number: int64 scalar, condition:
// bool scalar, carried..., captured...) and outputs (condition, carried...,
// scan outputs...). The carried values keep their dtype and lens.
// result: tuple of the final carried values and the scan outputs, each
// stacked along a new first axis of extent `iterations`.
// The body runs while the iteration number is below the trip count and the
// condition holds. A loop with scan outputs must run exactly `iterations`
// times, as its result shape says; a loop without them may stop anywhere.
struct loop : op_base {
    std::int64_t carried = 0;
    std::int64_t iterations = 0;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.carried, "carried");
        f(self.iterations, "iterations");
    }
    std::string name() const { return "loop"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
    shape compute_shape_with_modules(const std::vector<shape>& inputs, const std::vector<module_ref>& modules) const;
    void compute_with_modules(const argument& result, const std::vector<argument>& inputs,
                              const module_runner& run) const;
};

// Element `index` of a tuple, as a view into the tuple's buffer.
struct get_tuple_elem : op_base {
    std::int64_t index = 0;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.index, "index");
    }
    std::string name() const { return "get_tuple_elem"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
    int output_alias(const std::vector<shape>&) const { return 0; }
    argument compute_alias(const shape& out, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
