#include "targets/gpu/cuda/linalg_epilogue.hpp"

#include <cuda_runtime.h>

#include "targets/gpu/cuda/cuda_check.hpp"
#include "targets/gpu/cuda/post_op_device.cuh"

namespace kiln {

namespace {

using op::post_op_kind;

using post_op_device::apply_unary;
using post_op_device::load_float;
using post_op_device::store_float;

// One thread per element, grid-stride. T is the result's, bias's and
// operands' element type; the math is float32 as for a float32 result.
template <class T>
__global__ void linalg_epilogue_kernel(linalg_epilogue_params p, T* y) {
    const T* bias = static_cast<const T*>(p.bias);
    const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.elements; i += step) {
        float v = p.product != nullptr ? p.product[i] : load_float(y, i);
        if (bias != nullptr) v += load_float(bias, (i % p.cols) * p.bias_stride);
        int next_operand = 0;
        for (int k = 0; k < p.op_count; ++k) {
            const auto kind = static_cast<post_op_kind>(p.kinds[k]);
            if (kind == post_op_kind::add || kind == post_op_kind::mul) {
                // The operand's offset: i split into the result's indices, times its strides.
                const int j = next_operand++;
                std::size_t rest = i, offset = 0;
                for (int d = p.rank - 1; d >= 0; --d) {
                    const std::size_t index = rest % p.lens[d];
                    rest /= p.lens[d];
                    offset += index * p.operand_strides[j][d];
                }
                const float b = load_float(static_cast<const T*>(p.operands[j]), offset);
                v = kind == post_op_kind::add ? v + b : v * b;
            } else {
                v = static_cast<float>(apply_unary(p.kinds[k], static_cast<double>(v), p.alpha[k], p.beta[k]));
            }
        }
        store_float(y, i, v);
    }
}

}  // namespace

void launch_linalg_epilogue(const linalg_epilogue_params& params, linalg_element element, void* result, void* stream) {
    if (params.elements == 0) return;
    constexpr unsigned threads = 256;
    const std::size_t wanted = (params.elements + threads - 1) / threads;
    // Enough blocks to fill the GPU many times over; the loop covers the rest.
    const unsigned blocks = static_cast<unsigned>(wanted < 65536 ? wanted : 65536);
    const auto s = static_cast<cudaStream_t>(stream);
    switch (element) {
    case linalg_element::f32:
        linalg_epilogue_kernel<<<blocks, threads, 0, s>>>(params, static_cast<float*>(result));
        break;
    case linalg_element::f16:
        linalg_epilogue_kernel<<<blocks, threads, 0, s>>>(params, static_cast<__half*>(result));
        break;
    case linalg_element::bf16:
        linalg_epilogue_kernel<<<blocks, threads, 0, s>>>(params, static_cast<__nv_bfloat16*>(result));
        break;
    }
    KILN_CUDA(cudaGetLastError());
}

}  // namespace kiln
