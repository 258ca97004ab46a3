#pragma once
// The boundary between the Winograd F(2 x 2, 3 x 3) convolution
// (winograd_convolution.cpp: the kernel, the weight transform, the choice of
// groups and threads) and its vector loops, one set per channel block: AVX2
// on nChw8c (winograd_convolution_avx2.cpp), AVX-512 on nChw16c
// (winograd_convolution_avx512.cpp), both instantiated from
// winograd_vector_loops.hpp. Plain data and function pointers only: see
// cpu_features.hpp for why.
#include <cstddef>

#include "targets/cpu/kernels/convolution/convolution_finish.hpp"

namespace kiln {

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

// B^T d B for the tiles [first, first + count) of the group and input block
// cb: V[element][cb][tile][block], zero where the patch falls in the padding.
// Arguments: g, x, first, count, cb, v.
using winograd_input_function = void (*)(const winograd_geometry&, const float*, std::size_t, std::size_t, std::size_t,
                                         float*);

// products[ob][tile][block] of `tiles` tiles and `obs` output blocks for one
// element: the sum over input blocks of V[cb][tile][c] * U[ob][cb * block + c][block],
// each run of `chunk` blocks summed from zero and then added on.
// Arguments: v, v_block_floats, u, u_ob_floats, in_blocks, products,
// product_ob_floats, chunk.
using winograd_multiply_function = void (*)(const float*, std::size_t, const float*, std::size_t, std::size_t, float*,
                                            std::size_t, std::size_t);

// A^T m A for tiles [first, first + count) of one output block, then the
// bias (when has_bias) and post-ops; outputs past the image's edge (odd
// extents) are dropped. Arguments: g, has_bias, products, element_floats,
// first, count, ob, bias, residual, y.
using winograd_output_function = void (*)(const winograd_geometry&, bool, const float*, std::size_t, std::size_t,
                                          std::size_t, std::size_t, const float*, const float*, float*);

// One channel block's loops.
struct winograd_loops {
    std::size_t block;      // channels of a block, one vector
    std::size_t max_tiles;  // tiles multiplied together
    std::size_t max_obs;    // output blocks multiplied together
    winograd_input_function transform_input;
    const winograd_multiply_function* multiply;  // [obs - 1][tiles - 1], max_obs x max_tiles entries
    const winograd_output_function* output;      // [finish], finish_kinds entries
};

}  // namespace kiln
