#pragma once
// Lowers a module to the gpu target's execution plan: one kernel per
// instruction (gpu_kernel_registry.hpp), views placed at fixed offsets into
// their roots, intermediates at offsets the memory planner gives in one
// device arena, literals uploaded to device memory once, here.
#include <memory>

#include "kiln/target.hpp"
#include "targets/gpu/gpu_device.hpp"

namespace kiln {

std::shared_ptr<executable> build_gpu_plan(const module& m, const compile_options& options,
                                           const std::shared_ptr<gpu_device>& device);

}  // namespace kiln
