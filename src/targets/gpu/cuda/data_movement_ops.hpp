#pragma once
// The kernels of the data-movement family, one maker per kind; each returns
// null for a request it does not handle exactly (cuda_data_movement.cpp asks
// them in turn).
#include <memory>

#include "targets/gpu/kernels/gpu_kernel.hpp"

namespace kiln::data_movement {

// contiguous, and reshape / flatten when they copy (input not standard).
std::shared_ptr<const gpu_kernel> make_row_major_copy_kernel(const gpu_kernel_request& request);
std::shared_ptr<const gpu_kernel> make_concat_kernel(const gpu_kernel_request& request);
std::shared_ptr<const gpu_kernel> make_pad_kernel(const gpu_kernel_request& request);
std::shared_ptr<const gpu_kernel> make_gather_kernel(const gpu_kernel_request& request);
std::shared_ptr<const gpu_kernel> make_gather_elements_kernel(const gpu_kernel_request& request);

}  // namespace kiln::data_movement
