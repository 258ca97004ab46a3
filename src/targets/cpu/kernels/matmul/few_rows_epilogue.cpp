#include "targets/cpu/kernels/matmul/few_rows_epilogue.hpp"

#include "ops/op_helpers.hpp"
#include "targets/cpu/kernels/gelu_arrays.hpp"

namespace kiln {

namespace {

std::optional<std::size_t> operand_row_stride(const shape& operand, const shape& out, std::size_t cols) {
    if (operand.type() != dtype::float_type) return std::nullopt;
    const auto strides = ops::broadcast_strides(operand, out.lens());
    if (cols > 1 && strides.back() != 1) return std::nullopt;
    bool broadcast_rows = true, standard_rows = true;
    std::size_t expected = cols;
    for (std::size_t d = out.ndim() - 1; d-- > 0;) {
        if (out.lens()[d] == 1) continue;
        broadcast_rows = broadcast_rows && strides[d] == 0;
        standard_rows = standard_rows && strides[d] == expected;
        expected *= out.lens()[d];
    }
    if (broadcast_rows) return 0;
    if (standard_rows) return cols;
    return std::nullopt;
}

}  // namespace

std::optional<std::vector<std::size_t>> few_rows_operand_strides(const op::fused_dot& fused, const kernel_request& r,
                                                                 std::size_t cols) {
    std::vector<std::size_t> strides;
    for (std::size_t i = fused.first_post_operand(); i < r.input_shapes.size(); ++i) {
        const auto stride = operand_row_stride(r.input_shapes[i], r.output_shape, cols);
        if (!stride) return std::nullopt;
        strides.push_back(*stride);
    }
    return strides;
}

few_rows_epilogue::few_rows_epilogue(const op::fused_dot& fused, std::vector<std::size_t> operand_row_strides)
    : has_bias_(fused.has_bias),
      post_(fused.post),
      first_operand_(fused.first_post_operand()),
      operand_row_strides_(std::move(operand_row_strides)) {}

void few_rows_epilogue::apply(const std::vector<argument>& inputs, float* y, std::size_t rows, std::size_t cols,
                              std::size_t first, std::size_t width) const {
    if (has_bias_) {
        const float* bias = inputs[2].data_as<float>() + first;
        for (std::size_t m = 0; m < rows; ++m)
            for (std::size_t c = 0; c < width; ++c) y[m * cols + first + c] += bias[c];
    }
    std::size_t operand = 0;
    for (std::size_t k = 0; k < post_.kinds.size(); ++k) {
        const auto kind = post_.kinds[k];
        const bool binary = op::is_binary(kind);
        const float* other = nullptr;
        std::size_t other_stride = 0;
        if (binary) {
            other = inputs[first_operand_ + operand].data_as<float>() + first;
            other_stride = operand_row_strides_[operand++];
        }
        for (std::size_t m = 0; m < rows; ++m) {
            float* row = y + m * cols + first;
            const float* o = binary ? other + m * other_stride : nullptr;
            if (kind == op::post_op_kind::add) {
                for (std::size_t c = 0; c < width; ++c) row[c] += o[c];
            } else if (kind == op::post_op_kind::mul) {
                for (std::size_t c = 0; c < width; ++c) row[c] *= o[c];
            } else {
                apply_unary(k, row, width);
            }
        }
    }
}

// GELU (GPT-2's MLP) through the vector loops that the other product
// kernels' epilogues use (gelu_arrays.hpp); the rest per element, in double.
void few_rows_epilogue::apply_unary(std::size_t k, float* row, std::size_t width) const {
    const auto kind = post_.kinds[k];
    if (const float_array_function gelu = gelu_array(kind)) return gelu(row, row, width);
    for (std::size_t c = 0; c < width; ++c)
        row[c] = static_cast<float>(op::apply_unary(kind, row[c], post_.alpha[k], post_.beta[k]));
}

}  // namespace kiln
