#pragma once
// The cpu target's kernel factories, one per file. Each returns nullptr when
// it cannot handle the instruction (a dtype, layout or shape it does not
// cover); the plan then runs the op's reference compute.
#include "targets/cpu/cpu_kernel.hpp"

namespace kiln {

// convolution, fused_convolution (dnnl_convolution.cpp)
std::shared_ptr<const cpu_kernel> make_convolution_kernel(const kernel_request& r);
// dot, fused_dot (dnnl_matmul.cpp)
std::shared_ptr<const cpu_kernel> make_matmul_kernel(const kernel_request& r);
// average pooling (dnnl_pooling.cpp)
std::shared_ptr<const cpu_kernel> make_pooling_kernel(const kernel_request& r);
// max pooling (max_pooling.cpp)
std::shared_ptr<const cpu_kernel> make_max_pooling_kernel(const kernel_request& r);
// to_blocked, from_blocked (dnnl_reorder.cpp)
std::shared_ptr<const cpu_kernel> make_reorder_kernel(const kernel_request& r);

}  // namespace kiln
