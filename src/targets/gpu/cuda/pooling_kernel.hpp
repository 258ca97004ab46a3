#pragma once
// Average and max pooling on the device, one thread per output element,
// following op::pooling's reference compute exactly (src/ops/pool.cpp):
// max ignores padded taps and propagates NaN; average sums in double and
// divides by the input taps, or with count_include_pad by the taps inside
// the padded input (so a ceil_mode tail past the end padding is not counted).
#include <cstddef>

#include <cuda_runtime.h>

namespace kiln {

// The element types the device kernel is built for.
enum class pooling_element : int { f32, f64, f16, bf16, i8, u8, i32, i64 };

// Passed by value to the kernel: the input seen as [N, C, D, H, W] (any
// strides, in elements), the standard result's lens the same way, and the
// window over D, H, W (extent 1, stride 1, no padding where the op has
// fewer spatial dimensions).
struct pooling_geometry {
    std::size_t x_lens[5] = {};
    std::size_t x_strides[5] = {};
    std::size_t y_lens[5] = {};
    std::size_t elements = 0;  // of the result
    std::size_t kernel[3] = {};
    std::size_t stride[3] = {};
    std::size_t dilation[3] = {};
    std::size_t pad_begin[3] = {};
    std::size_t pad_end[3] = {};
    bool max = false;
    bool count_include_pad = false;
};

// Enqueues the pooling on `stream`; launches nothing for an empty result.
void launch_pooling(const pooling_geometry& g, pooling_element type, const void* x, void* y, cudaStream_t stream);

}  // namespace kiln
