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
