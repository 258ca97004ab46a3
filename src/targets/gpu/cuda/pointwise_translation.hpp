#pragma once
// Translates an elementwise instruction (fused_pointwise, or one op with
// is_pointwise()) into the bytecode of pointwise_program.hpp, or says it
// cannot: an op, dtype, attribute or layout the interpreter does not compute
// exactly as the reference does.
#include <optional>

#include "targets/gpu/cuda/pointwise_program.hpp"
#include "targets/gpu/kernels/gpu_kernel.hpp"

namespace kiln::pointwise {

std::optional<program> translate(const gpu_kernel_request& request);

}  // namespace kiln::pointwise
