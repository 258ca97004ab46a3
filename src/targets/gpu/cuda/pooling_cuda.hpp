#pragma once
// The gpu kernel for op::pooling (max / average, 1 to 3 spatial dimensions,
// any input strides) on the device kernel of pooling_kernel.cu.
#include <memory>

#include "targets/gpu/kernels/gpu_kernel.hpp"

namespace kiln {

// The kernel for a pooling request, or null for any other op or a type the
// device kernel is not built for.
std::shared_ptr<const gpu_kernel> make_cuda_pooling_kernel(const gpu_kernel_request& request);

}  // namespace kiln
