#pragma once
// quantize_linear and dequantize_linear on the device, one thread per
// element, computing exactly what op::quantize_linear / dequantize_linear's
// reference computes (src/ops/quant.cpp), so that int8 codes match bit for
// bit: the quotient x / scale in x's precision (float for the 16-bit types,
// then rounded to the 16-bit type), rounded half to even, plus the zero point,
// saturated; dequantizing subtracts the zero point in integers and multiplies
// by the scale in float.
#include <cstddef>

#include <cuda_runtime.h>

namespace kiln {

enum class quant_real : int { f32, f16, bf16 };
enum class quant_code : int { i8, u8, i32 };

// Passed by value to the kernels. Element i of x uses scale (and zero point)
// element (i / inner) % extent: extent 1 for one scale for the tensor, the
// extent of the op's axis for one scale per index along it.
struct quantize_params {
    std::size_t elements = 0;
    std::size_t extent = 1;
    std::size_t inner = 1;
    bool has_zero_point = false;
    quant_real real = quant_real::f32;
    quant_code code = quant_code::i8;
};

// y = saturate(round_half_to_even(x / scale) + zero_point): x and scale of
// `real`, zero point and y of `code`. Launches nothing for no elements.
void launch_quantize(const quantize_params& p, const void* x, const void* scale, const void* zero_point, void* y,
                     cudaStream_t stream);
// y = (x - zero_point) * scale: x and zero point of `code`, scale and y of `real`.
void launch_dequantize(const quantize_params& p, const void* x, const void* scale, const void* zero_point, void* y,
                       cudaStream_t stream);

}  // namespace kiln
