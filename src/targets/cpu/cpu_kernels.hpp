#pragma once
// The cpu target's kernel factories, one per file. Each returns nullptr when
// it cannot handle the instruction (a dtype, layout or shape it does not
// cover); the plan then runs the op's reference compute.
#include "ops/fused_convolution.hpp"
#include "ops/fused_pointwise.hpp"
#include "targets/cpu/cpu_kernel.hpp"

namespace kiln {

// convolution, fused_convolution (dnnl_convolution.cpp)
std::shared_ptr<const cpu_kernel> make_convolution_kernel(const kernel_request& r);
// k x k fused_convolution on blocked input as im2col + 1 x 1 convolution,
// for float32 accuracy (im2col_convolution.cpp)
std::shared_ptr<const cpu_kernel> make_im2col_convolution_kernel(const op::fused_convolution& conv,
                                                                 const kernel_request& r);
// fused_convolution of an image-like input (2 to 7 plain channels, a window
// of 16 taps or more) as one convolution per channel, for float32 accuracy
// (channel_split_convolution.cpp)
std::shared_ptr<const cpu_kernel> make_channel_split_convolution_kernel(const op::fused_convolution& conv,
                                                                        const kernel_request& r);
// 1 x 1 fused_convolution on blocked input summing its input channels
// pairwise, for float32 accuracy in the layers a network amplifies most
// (pairwise_sum_convolution.cpp)
std::shared_ptr<const cpu_kernel> make_pairwise_sum_convolution_kernel(const op::fused_convolution& conv,
                                                                       const kernel_request& r);
// Whether a convolution with this plain [N, M, H, W] result, summing over
// this many input channels (C * kh * kw), is one of those layers.
bool prefers_pairwise_sum(const shape& plain_output, std::size_t summed_channels);
// 3 x 3 stride-1 fused_convolution on blocked input by Winograd's F(2 x 2, 3 x 3)
// for the layers prefers_winograd picks (winograd_convolution.cpp)
std::shared_ptr<const cpu_kernel> make_winograd_convolution_kernel(const op::fused_convolution& conv,
                                                                   const kernel_request& r);
// Whether a 3 x 3 convolution with this plain [N, M, H, W] result runs faster that way.
bool prefers_winograd(const shape& plain_output);
// dot, fused_dot (dnnl_matmul.cpp)
std::shared_ptr<const cpu_kernel> make_matmul_kernel(const kernel_request& r);
// average pooling (dnnl_pooling.cpp)
std::shared_ptr<const cpu_kernel> make_pooling_kernel(const kernel_request& r);
// max pooling (max_pooling.cpp)
std::shared_ptr<const cpu_kernel> make_max_pooling_kernel(const kernel_request& r);
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
// fused_concat_pointwise (concat_pointwise_kernel.cpp)
std::shared_ptr<const cpu_kernel> make_concat_pointwise_kernel(const kernel_request& r);
// softmax, log_softmax (normalization_kernels.cpp)
std::shared_ptr<const cpu_kernel> make_softmax_kernel(const kernel_request& r);
// layer_norm (normalization_kernels.cpp)
std::shared_ptr<const cpu_kernel> make_layer_norm_kernel(const kernel_request& r);
// fused_attention (attention_kernel.cpp)
std::shared_ptr<const cpu_kernel> make_attention_kernel(const kernel_request& r);
// reshape, flatten, contiguous when they copy (strided_copy_kernel.cpp)
std::shared_ptr<const cpu_kernel> make_strided_copy_kernel(const kernel_request& r);
// to_blocked, from_blocked (dnnl_reorder.cpp)
std::shared_ptr<const cpu_kernel> make_reorder_kernel(const kernel_request& r);

}  // namespace kiln
