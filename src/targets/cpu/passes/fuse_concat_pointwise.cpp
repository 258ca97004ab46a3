// See cpu_passes.hpp. The concat becomes value 0 of the program; the
// fused_pointwise's other inputs keep their order after the concat's pieces.
#include <algorithm>
#include <vector>

#include "kiln/module.hpp"
#include "ops/fused_concat_pointwise.hpp"
#include "ops/shape_ops.hpp"
#include "targets/cpu/kernels/cpu_kernels.hpp"
#include "targets/cpu/passes/cpu_passes.hpp"

namespace kiln {

namespace {

// The input of `ins` that is a concat read by it alone, once; or inputs().size().
std::size_t lone_concat_input(const instruction& ins) {
    const auto& inputs = ins.inputs();
    for (std::size_t q = 0; q < inputs.size(); ++q) {
        const auto& c = *inputs[q];
        if (c.get_operator().name() != "concat" || c.outputs().size() != 1) continue;
        if (std::count(inputs.begin(), inputs.end(), inputs[q]) != 1) continue;
        return q;
    }
    return inputs.size();
}

// The kernel the cpu target would build, with no constant inputs known.
bool kernel_runs(const operation& op, const std::vector<instruction_ref>& inputs, const shape& out) {
    std::vector<shape> shapes;
    for (auto i : inputs) shapes.push_back(i->get_shape());
    const std::vector<argument> constants(inputs.size());
    return make_concat_pointwise_kernel({op, shapes, out, constants, 0}) != nullptr;
}

}  // namespace

void fuse_concat_pointwise::apply(module& m) const {
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        // A fused_pointwise, or a single elementwise op as a program of one step.
        std::vector<op::pointwise_step> steps;
        if (const auto* program = ins->get_operator().get_if<op::fused_pointwise>()) {
            steps = program->steps;
        } else if (ins->get_operator().is_pointwise()) {
            op::pointwise_step single{ins->get_operator(), {}};
            for (std::size_t i = 0; i < ins->inputs().size(); ++i) single.args.push_back(i);
            steps.push_back(std::move(single));
        } else {
            continue;
        }
        const std::size_t q = lone_concat_input(*ins);
        if (q == ins->inputs().size()) continue;
        const auto joined = ins->inputs()[q];
        if (joined->get_shape().lens() != ins->get_shape().lens()) continue;

        op::fused_concat_pointwise fused;
        fused.axis = joined->get_operator().get_if<op::concat>()->axis;
        fused.pieces = static_cast<std::int64_t>(joined->inputs().size());
        fused.steps = std::move(steps);
        for (auto& step : fused.steps)
            for (auto& a : step.args)
                if (a == q)
                    a = 0;
                else if (a < q)
                    a += 1;  // inputs before the concat move up one; later ones and step results stay
        std::vector<instruction_ref> inputs = joined->inputs();
        for (std::size_t i = 0; i < ins->inputs().size(); ++i)
            if (i != q) inputs.push_back(ins->inputs()[i]);
        const operation op(fused);
        if (!kernel_runs(op, inputs, ins->get_shape())) continue;
        m.replace_instruction(ins, op, inputs);
        m.remove_instruction(joined);
    }
}

}  // namespace kiln
