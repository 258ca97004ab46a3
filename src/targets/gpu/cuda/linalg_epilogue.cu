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
// operands' element type; the math is float32 as for a float32 result. I is
// the index type: 32-bit where the result has fewer than 2^31 elements, since
// 64-bit division is emulated in many instructions and made this
// memory-bound pass compute-bound.
template <class T, class I>
__global__ void linalg_epilogue_kernel(linalg_epilogue_params p, T* y) {
    const T* bias = static_cast<const T*>(p.bias);
    const I elements = static_cast<I>(p.elements);
    const I cols = static_cast<I>(p.cols);
    const I step = static_cast<I>(gridDim.x) * blockDim.x;
    for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < elements; i += step) {
        float v = p.product != nullptr ? p.product[i] : load_float(y, i);
        if (bias != nullptr) v += load_float(bias, static_cast<std::size_t>(i % cols) * p.bias_stride);
        int next_operand = 0;
        for (int k = 0; k < p.op_count; ++k) {
            const auto kind = static_cast<post_op_kind>(p.kinds[k]);
            if (kind == post_op_kind::add || kind == post_op_kind::mul) {
                const int j = next_operand++;
                std::size_t offset = 0;
                const auto period = static_cast<I>(p.operand_periods[j]);
                if (period == elements) {
                    offset = i;  // shaped like the result
                } else if (period != 0) {
                    offset = i % period;  // repeats along the outer dims
                } else {
                    // i split into the result's indices, times the operand's strides.
                    I rest = i;
                    for (int d = p.rank - 1; d >= 0; --d) {
                        const auto len = static_cast<I>(p.lens[d]);
                        offset += static_cast<std::size_t>(rest % len) * p.operand_strides[j][d];
                        rest /= len;
                    }
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

template <class T>
void launch_typed(const linalg_epilogue_params& params, T* result, unsigned blocks, unsigned threads,
                  cudaStream_t stream) {
    // 32-bit while the grid-stride loop cannot wrap past 2^32.
    if (params.elements <= 0x7fffffffu)
        linalg_epilogue_kernel<T, unsigned><<<blocks, threads, 0, stream>>>(params, result);
    else
        linalg_epilogue_kernel<T, std::size_t><<<blocks, threads, 0, stream>>>(params, result);
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
            launch_typed(params, static_cast<float*>(result), blocks, threads, s);
            break;
        case linalg_element::f16:
            launch_typed(params, static_cast<__half*>(result), blocks, threads, s);
            break;
        case linalg_element::bf16:
            launch_typed(params, static_cast<__nv_bfloat16*>(result), blocks, threads, s);
            break;
    }
    KILN_CUDA(cudaGetLastError());
}

}  // namespace kiln
