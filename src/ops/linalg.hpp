#pragma once
// Matrix products. Results are standard-strided.
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

// numpy.matmul: 1-D operands gain a unit dimension that the result drops,
// leading (batch) dimensions broadcast, the inner dimensions must match.
struct dot : op_base {
    std::string name() const { return "dot"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op

namespace kiln::ops {

// A dot operand seen as a batch of rows x cols matrices, numpy-style: a 1-D
// operand is a single row on the left and a single column on the right.
// Strides are in elements, as the shape's.
struct matrices {
    std::vector<std::size_t> batch_lens;
    std::vector<std::size_t> batch_strides;
    std::size_t rows = 1, cols = 1;
    std::size_t row_stride = 0, col_stride = 0;
};
matrices as_matrices(const shape& s, bool left);

}  // namespace kiln::ops
