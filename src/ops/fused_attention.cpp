#include "ops/fused_attention.hpp"

#include "ops/elementwise.hpp"
#include "ops/linalg.hpp"
#include "ops/norm.hpp"
#include "ops/op_helpers.hpp"
#include "ops/post_ops.hpp"

#include <cmath>
#include <limits>

namespace kiln::op {

namespace {

// Rows of `scores` (standard layout, float32 or float64) whose every entry is
// -inf get probabilities 0.
void zero_masked_rows(const argument& scores, const argument& probabilities) {
    const std::size_t length = scores.get_shape().lens().back();
    const std::size_t rows = length == 0 ? 0 : scores.get_shape().elements() / length;
    visit_type(scores.get_shape().type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_floating_point_v<T>) {
            const T* s = scores.data_as<T>();
            T* p = probabilities.data_as<T>();
            for (std::size_t r = 0; r < rows; ++r) {
                bool masked = true;
                for (std::size_t k = 0; k < length && masked; ++k)
                    masked = s[r * length + k] == -std::numeric_limits<T>::infinity();
                if (masked) std::fill(p + r * length, p + (r + 1) * length, T(0));
            }
        }
    });
}

// Scores [.., Sq, Sk] (standard layout, float32 or float64) with the key
// columns past i + Sk - Sq of row i set to -inf.
void mask_causally(const argument& scores) {
    const auto& lens = scores.get_shape().lens();
    const std::size_t sq = lens[lens.size() - 2], sk = lens.back();
    const std::size_t matrices = sq * sk == 0 ? 0 : scores.get_shape().elements() / (sq * sk);
    visit_type(scores.get_shape().type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_floating_point_v<T>) {
            T* s = scores.data_as<T>();
            for (std::size_t b = 0; b < matrices; ++b)
                for (std::size_t i = 0; i < sq; ++i)
                    for (std::size_t j = i + sk - sq + 1; j < sk; ++j)
                        s[(b * sq + i) * sk + j] = -std::numeric_limits<T>::infinity();
        }
    });
}

}  // namespace

shape fused_attention::scores_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, has_mask ? 4 : 3);
    const char* names[] = {"q", "kt", "v", "mask"};
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        ops::expect_floating(name(), inputs[i], names[i]);
        if (inputs[i].type() != inputs[0].type())
            fail(error_kind::type_error, name() + ": " + names[i] + " has dtype " + to_string(inputs[i].type()) +
                                             " but q has " + to_string(inputs[0].type()));
    }
    for (std::size_t i = 0; i < 3; ++i)
        if (inputs[i].ndim() < 2)
            fail(name() + ": " + names[i] + " must have at least 2 dimensions, got " + to_string(inputs[i].lens()));
    shape scores;
    try {
        scores = dot{}.compute_shape({inputs[0], inputs[1]});
    } catch (const error& e) {
        throw error(e.kind(), name() + ": q @ kt: " + e.what());
    }
    const auto& lens = scores.lens();
    if (causal && lens[lens.size() - 1] < lens[lens.size() - 2])
        fail(name() + ": causal attention needs at least as many keys as queries, got scores " + to_string(lens));
    return scores;
}

shape fused_attention::compute_shape(const std::vector<shape>& inputs) const {
    const shape scores = scores_shape(inputs);
    if (has_mask && ops::broadcast_lens(name(), {scores, inputs[3]}) != scores.lens())
        fail(name() + ": the mask " + to_string(inputs[3].lens()) + " does not broadcast to the scores " +
             to_string(scores.lens()));
    shape result;
    try {
        result = dot{}.compute_shape({scores, inputs[2]});
    } catch (const error& e) {
        throw error(e.kind(), name() + ": probabilities @ v: " + e.what());
    }
    if (output_order.empty()) return result;
    const std::size_t rank = result.ndim();
    std::vector<bool> seen(rank, false);
    if (output_order.size() != rank)
        fail(name() + ": output_order has " + std::to_string(output_order.size()) + " entries but the result " +
             to_string(result.lens()) + " has " + std::to_string(rank) + " dims");
    for (auto d : output_order) {
        if (d < 0 || static_cast<std::size_t>(d) >= rank || seen[static_cast<std::size_t>(d)])
            fail(name() + ": output_order is not a permutation of the result's " + std::to_string(rank) + " dims");
        seen[static_cast<std::size_t>(d)] = true;
    }
    // Standard strides over the dims in memory order, given back to each dim.
    std::vector<std::size_t> strides(rank);
    std::size_t step = 1;
    for (std::size_t i = rank; i-- > 0;) {
        const auto d = static_cast<std::size_t>(output_order[i]);
        strides[d] = step;
        step *= result.lens()[d];
    }
    return {result.type(), result.lens(), strides};
}

void fused_attention::compute(const argument& result, const std::vector<argument>& inputs) const {
    ops::compute_in_float32(result, inputs, [this](const argument& r, const std::vector<argument>& in) {
        compute_unwidened(r, in);
    });
}

void fused_attention::compute_unwidened(const argument& result, const std::vector<argument>& inputs) const {
    std::vector<shape> shapes;
    for (const auto& in : inputs) shapes.push_back(in.get_shape());
    const shape s = scores_shape(shapes);
    auto apply = [&](const operation& op, const std::vector<argument>& args) {
        argument out(s);
        op.compute(out, args);
        return out;
    };
    argument scores = apply(dot{}, {inputs[0], inputs[1]});
    if (scale != 1) {
        literal factor(shape{s.type(), {}}, std::vector<double>{scale});
        scores = apply(mul{}, {scores, factor.get_argument()});
    }
    if (has_mask) scores = apply(add{}, {scores, inputs[3]});
    if (causal) mask_causally(scores);
    softmax normalize;
    normalize.axis = -1;
    argument probabilities = apply(normalize, {scores});
    if (masked_rows_to_zero) zero_masked_rows(scores, probabilities);
    if (nan_to_zero) {
        argument is_number(s.with_type(dtype::bool_type));
        equal{}.compute(is_number, {probabilities, probabilities});
        literal zero(shape{s.type(), {}}, std::vector<double>{0});
        probabilities = apply(where{}, {is_number, probabilities, zero.get_argument()});
    }
    if (output_order.empty()) {
        dot{}.compute(result, {probabilities, inputs[2]});
        return;
    }
    argument row_major(shape{result.get_shape().type(), result.get_shape().lens()});
    dot{}.compute(row_major, {probabilities, inputs[2]});
    copy_values(row_major, result);
}

}  // namespace kiln::op
