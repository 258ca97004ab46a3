#include "passes/pointwise_before_broadcasts.hpp"

#include <algorithm>

#include "kiln/op_registry.hpp"
#include "ops/op_helpers.hpp"

namespace kiln {

rewrite_rule pointwise_before_broadcasts() {
    auto pattern = match::any().where([](instruction_ref ins) {
        if (ins->is_param() || ins->is_literal() || ins->is_return() || !ins->module_inputs().empty() ||
            !ins->get_operator().is_pointwise())
            return false;
        return std::any_of(ins->inputs().begin(), ins->inputs().end(),
                           [](instruction_ref in) { return in->name() == "broadcast"; });
    });
    return {"pointwise_before_broadcasts", pattern, [](module& m, const match::match_result& r) {
                const shape& out = r.root->get_shape();
                std::vector<instruction_ref> sources;
                std::vector<shape> source_shapes;
                for (auto in : r.root->inputs()) {
                    sources.push_back(in->name() == "broadcast" ? in->inputs()[0] : in);
                    source_shapes.push_back(sources.back()->get_shape());
                }
                std::vector<std::size_t> lens;
                try {
                    lens = ops::broadcast_lens(r.root->name(), source_shapes);
                } catch (const error&) {
                    return false;  // a broadcast that aligns its input otherwise than numpy's rule
                }
                std::size_t elements = 1;
                for (auto l : lens) elements *= l;
                if (elements >= out.elements()) return false;
                auto computed = m.insert_instruction(r.root, r.root->get_operator(), sources);
                auto spread = m.insert_instruction(
                    r.root, make_op("broadcast", value_map{{"out_lens", lens_value(out.lens())}}), {computed});
                if (replace_value_restrided(m, r.root, spread)) return true;
                m.remove_instruction(spread);
                m.remove_instruction(computed);
                return false;
            }};
}

}  // namespace kiln
