#include "targets/gpu/cuda/convolution_epilogue.hpp"

#include "targets/gpu/cuda/cuda_check.hpp"
#include "targets/gpu/cuda/post_op_device.cuh"

namespace kiln {

namespace {

using post_op_device::apply_unary;
using post_op_device::load_float;
using post_op_device::store_float;

// T: the element type of the result, bias and operands; float math throughout.
template <class T>
__global__ void convolution_epilogue_kernel(epilogue_plan p, T* y) {
    const T* bias = static_cast<const T*>(p.bias);
    const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.elements; i += step) {
        // The element's index along each dimension of the standard result.
        std::size_t index[epilogue_max_rank] = {};
        std::size_t rest = i;
        for (int d = p.rank - 1; d >= 0; --d) {
            index[d] = rest % p.lens[d];
            rest /= p.lens[d];
        }
        float v = load_float(y, i);
        if (bias != nullptr) v += load_float(bias, index[1] * p.bias_stride);
        int next_operand = 0;
        for (int s = 0; s < p.steps; ++s) {
            const epilogue_kind kind = p.kinds[s];
            if (kind == epilogue_kind::add || kind == epilogue_kind::mul) {
                std::size_t offset = 0;
                for (int d = 0; d < p.rank; ++d) offset += index[d] * p.operand_strides[next_operand][d];
                const float b = load_float(static_cast<const T*>(p.operands[next_operand]), offset);
                ++next_operand;
                v = kind == epilogue_kind::add ? v + b : v * b;
            } else {
                v = static_cast<float>(apply_unary(static_cast<int>(kind), static_cast<double>(v), p.alpha[s], p.beta[s]));
            }
        }
        store_float(y, i, v);
    }
}

}  // namespace

void launch_convolution_epilogue(const epilogue_plan& plan, convolution_element element, void* result,
                                 cudaStream_t stream) {
    if (plan.elements == 0) return;
    constexpr unsigned threads = 256;
    // A grid-stride loop covers what a capped grid does not.
    const std::size_t wanted = (plan.elements + threads - 1) / threads;
    const unsigned blocks = static_cast<unsigned>(wanted < 65536 ? wanted : 65536);
    switch (element) {
    case convolution_element::f32:
        convolution_epilogue_kernel<<<blocks, threads, 0, stream>>>(plan, static_cast<float*>(result));
        break;
    case convolution_element::f16:
        convolution_epilogue_kernel<<<blocks, threads, 0, stream>>>(plan, static_cast<__half*>(result));
        break;
    case convolution_element::bf16:
        convolution_epilogue_kernel<<<blocks, threads, 0, stream>>>(plan, static_cast<__nv_bfloat16*>(result));
        break;
    }
    KILN_CUDA(cudaGetLastError());
}

}  // namespace kiln
