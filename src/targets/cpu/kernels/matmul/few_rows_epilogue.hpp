#pragma once
// The bias and post-op chain of a product of a few rows (a one-token
// decoder step), applied to one block of result columns while it is in L1:
// shared by the few-row kernels of float32 and 16-bit weights.
#include <optional>
#include <vector>

#include "kiln/argument.hpp"
#include "ops/fused_dot.hpp"
#include "targets/cpu/kernels/cpu_kernel.hpp"

namespace kiln {

// The row stride of each binary post-op operand of `r` seen as [rows, cols]
// with unit column stride (0 when broadcast along the rows); nullopt when
// one has a layout the epilogue does not read.
std::optional<std::vector<std::size_t>> few_rows_operand_strides(const op::fused_dot& fused, const kernel_request& r,
                                                                 std::size_t cols);

class few_rows_epilogue {
public:
    few_rows_epilogue(const op::fused_dot& fused, std::vector<std::size_t> operand_row_strides);

    bool empty() const { return !has_bias_ && post_.empty(); }
    // y[m, first:first+width] for m < rows (row stride `cols`): bias, then the chain.
    void apply(const std::vector<argument>& inputs, float* y, std::size_t rows, std::size_t cols, std::size_t first,
               std::size_t width) const;

private:
    void apply_unary(std::size_t k, float* row, std::size_t width) const;

    bool has_bias_;
    op::post_op_chain post_;
    std::size_t first_operand_;
    std::vector<std::size_t> operand_row_strides_;  // one per binary post-op
};

}  // namespace kiln
