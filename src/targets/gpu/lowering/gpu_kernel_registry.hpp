#pragma once
// Chooses the kernel the gpu plan runs for an instruction: the device's own
// kernel where one exists (cuda/cuda_kernels.hpp), else the host fallback.
#include <memory>
#include <vector>

#include "targets/gpu/kernels/gpu_kernel.hpp"

namespace kiln {

struct chosen_gpu_kernel {
    std::shared_ptr<const gpu_kernel> kernel;
    // The kernel reads its inputs in standard layout only: the plan copies
    // each strided input into a standard buffer first.
    bool needs_standard_inputs = false;
};

// `modules`: the instruction's module arguments (control flow, which runs on the host).
chosen_gpu_kernel make_gpu_kernel(const gpu_kernel_request& request, const std::vector<const module*>& modules);

// The kernel that copies a strided device value into a standard buffer.
std::shared_ptr<const gpu_kernel> make_gpu_standard_copy(const shape& source, gpu_device& device);

}  // namespace kiln
