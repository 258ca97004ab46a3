#pragma once
// Which kernel runs an instruction on the cpu target (kernel_registry.cpp).
#include <memory>

#include "targets/cpu/kernels/kernel_algorithm.hpp"

namespace kiln {

// The fast kernel for the instruction if the cpu target has one, otherwise
// the op's reference compute (algorithm "reference").
chosen_kernel make_cpu_kernel(const kernel_request& request);

}  // namespace kiln
