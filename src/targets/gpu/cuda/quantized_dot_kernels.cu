#include <cstdint>

#include "targets/gpu/cuda/cuda_check.hpp"
#include "targets/gpu/cuda/quantized_dot_kernel.hpp"

namespace kiln {

namespace {

constexpr int tile = 16;

// One thread per element of C, tile x tile threads per block; each k step
// stages a tile of (a - zero point) and of b in shared memory as int32.
template <class A>
__global__ void int8_gemm_kernel(int8_gemm_params p, const A* a, const std::int8_t* b, const A* zero_point,
                                 std::int32_t* c) {
    __shared__ std::int32_t a_tile[tile][tile + 1];
    __shared__ std::int32_t b_tile[tile][tile + 1];
    const std::int32_t z = zero_point != nullptr ? static_cast<std::int32_t>(*zero_point) : 0;
    const std::size_t row = blockIdx.y * static_cast<std::size_t>(tile) + threadIdx.y;
    const std::size_t col = blockIdx.x * static_cast<std::size_t>(tile) + threadIdx.x;
    for (std::size_t g = blockIdx.z; g < p.batch; g += gridDim.z) {
        const A* ag = a + g * p.a_batch;
        const std::int8_t* bg = b + g * p.b_batch;
        std::int32_t sum = 0;
        for (std::size_t k0 = 0; k0 < p.k; k0 += tile) {
            const std::size_t ka = k0 + threadIdx.x;  // this thread's column of the a tile
            const std::size_t kb = k0 + threadIdx.y;  // this thread's row of the b tile
            a_tile[threadIdx.y][threadIdx.x] =
                row < p.m && ka < p.k ? static_cast<std::int32_t>(ag[row * p.a_row + ka * p.a_col]) - z : 0;
            b_tile[threadIdx.y][threadIdx.x] =
                kb < p.k && col < p.n ? static_cast<std::int32_t>(bg[kb * p.b_row + col * p.b_col]) : 0;
            __syncthreads();
            for (int j = 0; j < tile; ++j) sum += a_tile[threadIdx.y][j] * b_tile[j][threadIdx.x];
            __syncthreads();
        }
        if (row < p.m && col < p.n) c[g * p.c_batch + row * p.n + col] = sum;
    }
}

unsigned blocks_for(std::size_t extent) { return static_cast<unsigned>((extent + tile - 1) / tile); }

}  // namespace

void launch_int8_gemm(const int8_gemm_params& p, const void* a, const void* b, const void* a_zero_point, void* c,
                      cudaStream_t stream) {
    if (p.m == 0 || p.n == 0 || p.batch == 0) return;
    const dim3 block(tile, tile);
    const dim3 grid(blocks_for(p.n), blocks_for(p.m),
                    static_cast<unsigned>(p.batch < 65535 ? p.batch : 65535));
    auto* out = static_cast<std::int32_t*>(c);
    const auto* bq = static_cast<const std::int8_t*>(b);
    if (p.a_unsigned)
        int8_gemm_kernel<std::uint8_t><<<grid, block, 0, stream>>>(p, static_cast<const std::uint8_t*>(a), bq,
                                                                   static_cast<const std::uint8_t*>(a_zero_point), out);
    else
        int8_gemm_kernel<std::int8_t><<<grid, block, 0, stream>>>(p, static_cast<const std::int8_t*>(a), bq,
                                                                  static_cast<const std::int8_t*>(a_zero_point), out);
    KILN_CUDA(cudaGetLastError());
}

}  // namespace kiln
