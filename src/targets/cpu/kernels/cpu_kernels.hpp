#pragma once
// The factories of the cpu target's op families that have one kernel each,
// one per file. Each returns nullptr when it cannot handle the instruction (a
// dtype, layout or shape it does not cover); the plan then runs the op's
// reference compute. Families with several algorithms have ordered lists
// instead (convolution/, matmul/, pooling/).
#include "ops/fused_pointwise.hpp"
#include "targets/cpu/kernels/cpu_kernel.hpp"

namespace kiln {

// concat of standard tensors (concat_kernel.cpp)
std::shared_ptr<const cpu_kernel> make_concat_kernel(const kernel_request& r);
// fused_pointwise and the elementwise ops (pointwise_kernel.cpp)
std::shared_ptr<const cpu_kernel> make_pointwise_kernel(const kernel_request& r);
// reduce_sum, reduce_mean, reduce_max, reduce_min over one run of axes (reduce_kernel.cpp)
std::shared_ptr<const cpu_kernel> make_reduce_kernel(const kernel_request& r);
// A pointwise program run on raw pointers, for kernels that run one over
// parts of their data: inputs and output laid out as in the request.
class pointwise_runner {
public:
    virtual ~pointwise_runner() = default;
    virtual void run(const void* const* inputs, void* output, std::byte* scratch) const = 0;
    virtual std::size_t scratch_bytes() const = 0;
};
std::shared_ptr<const pointwise_runner> make_pointwise_runner(const std::vector<op::pointwise_step>& steps,
                                                              const kernel_request& r);
// fused_concat_pointwise (concat_pointwise_kernel.cpp); the _avx512 factory
// runs DenseNet's scale-shift-ReLU rows on sixteen lanes and declines unless
// avx512::enabled() and the kernel has such rows.
std::shared_ptr<const cpu_kernel> make_concat_pointwise_kernel(const kernel_request& r);
std::shared_ptr<const cpu_kernel> make_concat_pointwise_avx512_kernel(const kernel_request& r);
// softmax, log_softmax (normalization_kernels.cpp); the _avx512 factories
// decline (nullptr) unless avx512::enabled().
std::shared_ptr<const cpu_kernel> make_softmax_kernel(const kernel_request& r);
std::shared_ptr<const cpu_kernel> make_softmax_avx512_kernel(const kernel_request& r);
// layer_norm (normalization_kernels.cpp)
std::shared_ptr<const cpu_kernel> make_layer_norm_kernel(const kernel_request& r);
std::shared_ptr<const cpu_kernel> make_layer_norm_avx512_kernel(const kernel_request& r);
// rms_norm: layer_norm's rows with the mean taken as 0 (normalization_kernels.cpp)
std::shared_ptr<const cpu_kernel> make_rms_norm_kernel(const kernel_request& r);
std::shared_ptr<const cpu_kernel> make_rms_norm_avx512_kernel(const kernel_request& r);
// softmax_quantize / layer_norm_quantize: the rows above, written as 8-bit codes.
std::shared_ptr<const cpu_kernel> make_softmax_quantize_kernel(const kernel_request& r);
std::shared_ptr<const cpu_kernel> make_layer_norm_quantize_kernel(const kernel_request& r);
std::shared_ptr<const cpu_kernel> make_softmax_quantize_avx512_kernel(const kernel_request& r);
std::shared_ptr<const cpu_kernel> make_layer_norm_quantize_avx512_kernel(const kernel_request& r);
// fused_attention (attention_kernel.cpp); the _avx512 factory declines
// unless avx512::enabled().
std::shared_ptr<const cpu_kernel> make_attention_kernel(const kernel_request& r);
std::shared_ptr<const cpu_kernel> make_attention_avx512_kernel(const kernel_request& r);
// reshape, flatten, contiguous when they copy (strided_copy_kernel.cpp)
std::shared_ptr<const cpu_kernel> make_strided_copy_kernel(const kernel_request& r);
// scatter_nd without a reduction, one slice copy per index row (copy/scatter_nd_slices.cpp)
std::shared_ptr<const cpu_kernel> make_scatter_nd_kernel(const kernel_request& r);
// quantize_linear / dequantize_linear between float32 and 8-bit codes
// (quantize/linear_quantize_kernels.cpp); nullptr for other types or layouts
std::shared_ptr<const cpu_kernel> make_quantize_kernel(const kernel_request& r);
std::shared_ptr<const cpu_kernel> make_dequantize_kernel(const kernel_request& r);
// to_blocked, from_blocked (dnnl_reorder.cpp)
std::shared_ptr<const cpu_kernel> make_reorder_kernel(const kernel_request& r);

}  // namespace kiln
