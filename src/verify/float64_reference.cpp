// Evaluating a module in float64 and judging float32 results against it.
#include "verify/float64_reference.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <unordered_map>

#include "kiln/op_registry.hpp"

namespace kiln {

namespace {

bool narrow_float(dtype t) {
    return t == dtype::float_type || t == dtype::half_type || t == dtype::bf16_type;
}

}  // namespace

std::unique_ptr<module> widened_to_float64(const module& m) {
    auto owned = std::make_unique<module>(m.name());
    module& out = *owned;
    const operation widen = make_op("convert", value_map{{"target_type", to_string(dtype::double_type)}});
    std::unordered_map<const instruction*, instruction_ref> mapped;
    auto inputs_of = [&](const instruction& ins) {
        std::vector<instruction_ref> inputs;
        for (auto in : ins.inputs()) inputs.push_back(mapped.at(&*in));
        return inputs;
    };
    for (const instruction& ins : m) {
        if (!ins.module_inputs().empty())
            fail("float64 evaluation: '" + ins.name() + "' runs submodules, which are not widened");
        if (ins.is_return()) {
            out.add_return(inputs_of(ins));
            continue;
        }
        instruction_ref added = ins.is_param()     ? out.add_parameter(ins.param_name(), ins.get_shape())
                                : ins.is_literal() ? out.add_literal(ins.get_literal())
                                                   : out.add_instruction(ins.get_operator(), inputs_of(ins));
        const shape& s = added->get_shape();
        if (!s.is_tuple() && narrow_float(s.type())) added = out.add_instruction(widen, {added});
        mapped[&ins] = added;
    }
    return owned;
}

float64_judgement judge_against_float64(const argument& got, const argument& ref, const argument& exact,
                                        const tolerance& tol) {
    float64_judgement j;
    const shape& s = got.get_shape();
    if (s.is_tuple() || ref.get_shape().lens() != s.lens() || exact.get_shape().is_tuple() ||
        exact.get_shape().lens() != s.lens()) {
        j.unavailable = "the float64 result has another shape";
        return j;
    }
    j.evaluated = true;
    const std::size_t n = s.elements();
    for (std::size_t i = 0; i < n; ++i) {
        const double a = got.value_at(i), b = ref.value_at(i), e = exact.value_at(i);
        const double slack = tol.atol + tol.rtol * std::fabs(e);
        // The element compare_values accepted needs no judgement (NaN matching
        // NaN and equal infinities included).
        if ((std::isnan(a) && std::isnan(b)) || a == b) continue;
        if (!std::isnan(a) && !std::isnan(b) && std::fabs(a - b) <= tol.atol + tol.rtol * std::fabs(b)) continue;
        ++j.judged;
        const double target_error = std::fabs(a - e), ref_error = std::fabs(b - e);
        const bool accepted = !std::isnan(target_error) && !std::isnan(ref_error) && target_error <= ref_error + slack;
        j.worst_target_error = std::isnan(target_error) ? target_error : std::max(j.worst_target_error, target_error);
        j.worst_ref_error = std::max(j.worst_ref_error, ref_error);
        if (!accepted && j.rejected++ == 0) j.first_rejected = i;
    }
    return j;
}

}  // namespace kiln
