#include "targets/gpu/cuda/cuda_kernels.hpp"
#include "targets/gpu/cuda/data_movement_gather_nd.hpp"
#include "targets/gpu/cuda/data_movement_ops.hpp"

namespace kiln {

// Ops that move or select data without arithmetic and are not views:
// contiguous, reshape / flatten copies, concat, pad, gather, gather_elements,
// gather_nd.
std::shared_ptr<const gpu_kernel> make_cuda_data_movement_kernel(const gpu_kernel_request& request) {
    using factory = std::shared_ptr<const gpu_kernel> (*)(const gpu_kernel_request&);
    static constexpr factory makers[] = {data_movement::make_row_major_copy_kernel,
                                         data_movement::make_concat_kernel,
                                         data_movement::make_pad_kernel,
                                         data_movement::make_gather_kernel,
                                         data_movement::make_gather_elements_kernel,
                                         data_movement::make_gather_nd_kernel};
    for (factory make : makers)
        if (auto k = make(request)) return k;
    return nullptr;
}

}  // namespace kiln
