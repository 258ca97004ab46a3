#include "ops/post_ops.hpp"

#include <algorithm>
#include <cmath>

#include "ops/elementwise.hpp"
#include "ops/narrow_weights.hpp"
#include "ops/op_helpers.hpp"

namespace kiln::op {

bool is_binary(post_op_kind kind) { return kind == post_op_kind::add || kind == post_op_kind::mul; }

std::size_t post_op_chain::binary_count() const {
    return static_cast<std::size_t>(std::count_if(kinds.begin(), kinds.end(), is_binary));
}

void post_op_chain::append(post_op_kind kind, double a, double b) {
    kinds.push_back(kind);
    alpha.push_back(a);
    beta.push_back(b);
}

double apply_unary(post_op_kind kind, double x, double alpha, double beta) {
    switch (kind) {
    case post_op_kind::relu: return x > 0 ? x : 0.0;
    case post_op_kind::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case post_op_kind::tanh: return std::tanh(x);
    case post_op_kind::gelu_erf: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case post_op_kind::gelu_tanh: {
        const double k = std::sqrt(2.0 / M_PI);
        return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
    }
    case post_op_kind::clip: return std::min(std::max(x, alpha), beta);
    case post_op_kind::swish: return x / (1.0 + std::exp(-x));
    case post_op_kind::hardswish: return x * std::min(std::max(x + 3.0, 0.0), 6.0) / 6.0;
    case post_op_kind::add:
    case post_op_kind::mul: break;
    }
    fail(error_kind::runtime, "post-op '" + std::string(enum_names(kind)[static_cast<std::size_t>(kind)]) +
                                  "' is not unary");
}

}  // namespace kiln::op

namespace kiln::ops {

void check_post_ops(const std::string& op, const op::post_op_chain& chain, const shape& result,
                    const std::vector<shape>& binary_operands) {
    if (chain.alpha.size() != chain.kinds.size() || chain.beta.size() != chain.kinds.size())
        fail(op + ": post_ops has " + std::to_string(chain.kinds.size()) + " entries but post_alpha has " +
             std::to_string(chain.alpha.size()) + " and post_beta " + std::to_string(chain.beta.size()));
    if (binary_operands.size() != chain.binary_count())
        fail(op + ": the post-ops take " + std::to_string(chain.binary_count()) + " extra inputs, got " +
             std::to_string(binary_operands.size()));
    for (std::size_t i = 0; i < binary_operands.size(); ++i) {
        const shape& s = binary_operands[i];
        expect_type(op, s, result.type(), "post-op operand " + std::to_string(i));
        if (broadcast_lens(op, {result, s}) != result.lens())
            fail(op + ": post-op operand " + std::to_string(i) + " " + to_string(s.lens()) +
                 " does not broadcast to the result " + to_string(result.lens()));
    }
}

void apply_post_ops(const op::post_op_chain& chain, const argument& result, const std::vector<argument>& binary_operands) {
    const auto& out_lens = result.get_shape().lens();
    float* y = result.data_as<float>();
    std::size_t next_operand = 0;
    for (std::size_t k = 0; k < chain.kinds.size(); ++k) {
        const auto kind = chain.kinds[k];
        if (!op::is_binary(kind)) {
            const std::size_t n = result.get_shape().elements();
            for (std::size_t i = 0; i < n; ++i)
                y[i] = static_cast<float>(op::apply_unary(kind, y[i], chain.alpha[k], chain.beta[k]));
            continue;
        }
        const argument& operand = binary_operands.at(next_operand++);
        const float* b = operand.data_as<float>();
        std::vector<std::vector<std::size_t>> strides{broadcast_strides(operand.get_shape(), out_lens)};
        for_each_broadcast<1>(out_lens, strides, [&](std::size_t i, const std::size_t* offsets) {
            y[i] = kind == op::post_op_kind::add ? y[i] + b[offsets[0]] : y[i] * b[offsets[0]];
        });
    }
}

argument widened_to_float32(const argument& value) {
    const shape& s = value.get_shape();
    if (!is_16bit_float(s.type())) return value;
    return op::convert_to(dtype::float_type).evaluate(shape{dtype::float_type, s.lens()}, {value});
}

void store_converted(const argument& value, const argument& result) {
    const shape& out = result.get_shape();
    if (value.get_shape().type() == out.type()) {
        copy_values(value, result);
        return;
    }
    // convert writes standard strides: through a standard buffer when the result is not.
    const shape standard{out.type(), out.lens()};
    if (out.standard()) {
        op::convert_to(out.type()).compute(result, {value});
        return;
    }
    copy_values(op::convert_to(out.type()).evaluate(standard, {value}), result);
}

void compute_in_float32(const argument& result, const std::vector<argument>& inputs, const float32_compute& compute) {
    if (!is_16bit_float(result.get_shape().type())) {
        compute(result, inputs);
        return;
    }
    std::vector<argument> wide;
    wide.reserve(inputs.size());
    for (const auto& in : inputs) wide.push_back(widened_to_float32(in));
    const shape& out = result.get_shape();
    const argument wide_result(shape{dtype::float_type, out.lens()});
    compute(wide_result, wide);
    store_converted(wide_result, result);
}

}  // namespace kiln::ops
