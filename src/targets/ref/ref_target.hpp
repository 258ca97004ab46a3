#pragma once
// The reference target: a plain interpreter over the IR that evaluates each
// instruction with its op's reference compute. The gold standard in tests.
#include <functional>

#include "kiln/target.hpp"

namespace kiln {

// Evaluates `m` on `inputs`, calling `observe(ins, value)` after each
// instruction when given. Returns the values of the return's inputs, each
// standard-strided and owning its memory.
std::vector<argument> evaluate_module(const module& m, const parameter_map& inputs,
                                      const std::function<void(const instruction&, const argument&)>& observe = {});

// The reference value of one instruction on `args`: its op's compute, with
// module arguments (control flow) run by evaluate_module.
argument evaluate_instruction(const instruction& ins, const std::vector<argument>& args);

class ref_target final : public target {
public:
    std::string name() const override { return "ref"; }
    pass_list get_passes(const compile_options& options) const override;
    std::shared_ptr<executable> lower(const module& m, const compile_options& options) const override;
};

}  // namespace kiln
