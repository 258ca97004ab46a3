#include "passes/normalization_patterns.hpp"

#include <algorithm>
#include <vector>

#include "ops/op_helpers.hpp"
#include "ops/reduce.hpp"
#include "passes/constant_value.hpp"

namespace kiln {

namespace {

bool is(instruction_ref ins, const char* op) {
    return ins->name() == op;
}

}  // namespace

instruction_ref unbroadcast(instruction_ref ins) {
    return is(ins, "broadcast") ? ins->inputs()[0] : ins;
}

std::optional<std::size_t> trailing_mean_axis(instruction_ref ins) {
    const auto* r = ins->get_operator().get_if<op::reduce_mean>();
    if (r == nullptr || !r->keepdims || r->axes.empty()) return std::nullopt;
    const std::size_t rank = ins->inputs()[0]->get_shape().ndim();
    std::vector<std::size_t> axes;
    try {
        axes = ops::normalize_axes("reduce_mean", r->axes, rank);
    } catch (const error&) {
        return std::nullopt;
    }
    std::sort(axes.begin(), axes.end());
    for (std::size_t i = 0; i < axes.size(); ++i)
        if (axes[i] != rank - axes.size() + i) return std::nullopt;
    return axes.front();
}

bool is_square_of(instruction_ref ins, instruction_ref d) {
    if (is(ins, "pow")) return ins->inputs()[0] == d && scalar_constant(*ins->inputs()[1]) == 2.0;
    return is(ins, "mul") && ins->inputs()[0] == d && ins->inputs()[1] == d;
}

std::optional<instruction_ref> variance_plus_eps(instruction_ref root, instruction_ref d) {
    const auto& in = root->inputs();
    if (in.size() != 2) return std::nullopt;
    if (is(root, "div") && in[0] == d && is(unbroadcast(in[1]), "sqrt")) return unbroadcast(in[1])->inputs()[0];
    if (!is(root, "mul")) return std::nullopt;
    const instruction_ref other = unbroadcast(in[0] == d ? in[1] : in[1] == d ? in[0] : root);
    if (other == root) return std::nullopt;
    if (is(other, "rsqrt")) return other->inputs()[0];
    if (is(other, "reciprocal") && is(other->inputs()[0], "sqrt")) return other->inputs()[0]->inputs()[0];
    return std::nullopt;
}

}  // namespace kiln
