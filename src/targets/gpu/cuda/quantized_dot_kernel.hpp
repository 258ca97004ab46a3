#pragma once
// quant_dot's integer matrix product on the device: int32 sums of
// (a - a_zero_point) * b over int8 / uint8 a and int8 b, exact as the
// reference's, for any row / column strides of the operands (a shared-memory
// tiled kernel: every operand layout the gemm planner accepts, no library
// restrictions on sizes or alignment).
#include <cstddef>

#include <cuda_runtime.h>

namespace kiln {

// One library-style call: `batch` products C_i = A_i * B_i, A_i m x k and B_i
// k x n read through element strides, C_i standard (row-major, n columns).
struct int8_gemm_params {
    std::size_t m = 0, n = 0, k = 0;
    std::size_t a_row = 0, a_col = 0;  // A(i, j) at i * a_row + j * a_col
    std::size_t b_row = 0, b_col = 0;  // B(i, j) at i * b_row + j * b_col
    std::size_t batch = 1;
    std::size_t a_batch = 0, b_batch = 0, c_batch = 0;  // element strides between products
    bool a_unsigned = false;  // a (and its zero point) are uint8
};

// c (int32) from a, b and the zero point (one element of a's type, a device
// pointer; null for none). Launches nothing for an empty result.
void launch_int8_gemm(const int8_gemm_params& p, const void* a, const void* b, const void* a_zero_point, void* c,
                      cudaStream_t stream);

}  // namespace kiln
