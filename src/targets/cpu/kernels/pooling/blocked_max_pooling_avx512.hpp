#pragma once
// 2-D max pooling of float32 [N, C/16, H, W, 16] with AVX-512: one vector
// holds the sixteen channels of a window position, so each tap is one load
// and one max. The portable loop (max_pooling.cpp) is built for the
// baseline ISA and runs the sixteen lanes as four SSE vectors, which made it
// the one ResNet-50 layer class where OpenVINO was ahead at one thread
// (bench/layer_profile.py). NaNs propagate as in that loop. Only plain data
// crosses this boundary (cpu_features.hpp); callers check avx512::enabled().
#include <cstddef>

namespace kiln::avx512 {

struct blocked_max_pooling_args {
    const float* x;  // planes of h * w * 16 floats, one after another
    float* y;        // planes of out_h * out_w * 16 floats
    std::size_t h, w, out_h, out_w;
    std::size_t kernel[2], stride[2], dilation[2], pad_begin[2];
};

// Planes [first, last) of args.
void blocked_max_pooling(const blocked_max_pooling_args& args, std::size_t first, std::size_t last);

}  // namespace kiln::avx512
