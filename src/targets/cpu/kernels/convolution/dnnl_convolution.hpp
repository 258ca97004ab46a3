#pragma once
// A float32 convolution as a oneDNN primitive, shared by the algorithms that
// run one (oneDNN's direct kernels, its Winograd kernel): the primitive's
// descriptor for a request and its run-time arguments, the weights left to
// the algorithm, which keeps them in the primitive's layout its own way.
#include <optional>
#include <vector>

#include "targets/cpu/kernels/dnnl_support.hpp"
#include "targets/cpu/kernels/kernel_algorithm.hpp"

namespace kiln {

struct convolution_primitive {
    dnnl::convolution_forward::primitive_desc pd;
    dnnl::memory::desc plain_weights;  // the weights input as given, [M, C/g, k...] (grouped: [g, M/g, ...])
    dnnl_support::arg_descs descs;     // source, result, bias and post-op operands
    std::vector<int> slots;            // the instruction input (or result) behind each of descs
};

// Float32 inputs, standard weights, and post-op operands of a blocked result
// that oneDNN can read.
bool onednn_convolution_eligible(const kernel_request& r);

// The primitive running `algorithm` for an eligible request; nothing when
// oneDNN has no implementation of it for the shapes, post-ops or CPU. With
// `compute` other than f32 (bf16) the source and weights are in that type,
// the source a dense copy of x (in x's channel blocks, if blocked) that the
// caller stages; the result, bias and post-op operands stay float32.
std::optional<convolution_primitive> describe_convolution(
    const kernel_request& r, dnnl::algorithm algorithm, dnnl::memory::data_type compute = dnnl::memory::data_type::f32);

}  // namespace kiln
