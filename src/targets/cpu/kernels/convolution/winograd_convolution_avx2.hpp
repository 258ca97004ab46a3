#pragma once
// The AVX2 side of the Winograd F(2 x 2, 3 x 3) convolution
// (winograd_convolution_avx2.cpp): the input transform, the register-blocked
// products and the output transform with its epilogue. The kernel, the weight
// transform and the choice of groups and threads stay in
// winograd_convolution.cpp. Plain data and function pointers only: see
// cpu_features.hpp for why.
#include <cstddef>

#include "targets/cpu/kernels/convolution/convolution_finish.hpp"

namespace kiln::avx2 {

constexpr std::size_t winograd_block = 8;      // channels of an nChw8c block, one __m256
constexpr std::size_t winograd_max_tiles = 6;  // tiles multiplied together
constexpr std::size_t winograd_max_obs = 2;    // output channel blocks multiplied together

// No member functions (and no default member initializers): the struct is
// used on both sides of the boundary. Value-initialize it ({}).
struct winograd_geometry {
    std::size_t images, in_blocks, out_blocks;
    std::size_t in_h, in_w, out_h, out_w;
    std::size_t pad_top, pad_left;
    std::size_t tiles_h, tiles_w;
    std::size_t group_tiles;   // tiles transformed and multiplied together
    bool own_tiles;            // threads split the tiles, not the output blocks
    std::size_t chunk_blocks;  // input blocks summed from zero before joining the partial sum
};

// The post-op chain after the bias (convolution_finish.hpp) indexes winograd_output_functions.
using blocked_convolution::finish;

// B^T d B for the tiles [first, first + count) of the group and input block
// cb: V[element][cb][tile][8], zero where the patch falls in the padding.
void winograd_transform_input(const winograd_geometry& g, const float* x, std::size_t first, std::size_t count,
                              std::size_t cb, float* v);

// products[ob][tile][8] of `tiles` tiles and `obs` output blocks for one
// element: the sum over input blocks of V[cb][tile][c] * U[ob][cb * 8 + c][8],
// each run of `chunk` blocks summed from zero and then added on.
// Arguments: v, v_block_floats, u, u_ob_floats, in_blocks, products,
// product_ob_floats, chunk.
using winograd_multiply_function = void (*)(const float*, std::size_t, const float*, std::size_t, std::size_t, float*,
                                            std::size_t, std::size_t);
// [obs - 1][tiles - 1]
extern const winograd_multiply_function winograd_multiply_functions[winograd_max_obs][winograd_max_tiles];

// A^T m A for tiles [first, first + count) of one output block, then the
// bias (when has_bias) and post-ops; outputs past the image's edge (odd
// extents) are dropped. Arguments: g, has_bias, products, element_floats,
// first, count, ob, bias, residual, y.
using winograd_output_function = void (*)(const winograd_geometry&, bool, const float*, std::size_t, std::size_t,
                                          std::size_t, std::size_t, const float*, const float*, float*);
// [finish]
extern const winograd_output_function winograd_output_functions[blocked_convolution::finish_kinds];

}  // namespace kiln::avx2
