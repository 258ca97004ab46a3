#pragma once
// The AVX2 side of the pairwise-sum convolution
// (pairwise_sum_convolution_avx2.cpp): the leaf sums, the merges of the
// pairwise tree and the epilogue. The kernel, the weight packing, the im2col
// rows and the tree's bookkeeping stay in pairwise_sum_convolution.cpp.
// Plain data and function pointers only: see cpu_features.hpp for why.
#include <cstddef>
#include <cstdint>

#include "targets/cpu/kernels/convolution/convolution_finish.hpp"

namespace kiln::avx2 {

constexpr std::size_t pairwise_block = 8;    // channels of an nChw8c block, one __m256
constexpr std::size_t pairwise_tile = 6;     // output pixels of a row summed together
constexpr std::size_t pairwise_max_obs = 2;  // output channel blocks summed together

// One leaf of a row for one pair of output blocks: the leaf's one or two
// input blocks (`x0`, `x1`: their rows' first pixels) and weights, where the
// tree's held levels live, and for the last leaf where the outputs go. The
// pairwise tree has the same shape for every tile, so a leaf is summed for
// the whole row before the next: each input block's row is read start to
// end (hardware prefetch follows it) instead of hopping between planes.
// No member functions (and no default member initializers): the struct is
// used on both sides of the boundary. Value-initialize it ({}).
struct pairwise_leaf_pass {
    const float* x0;
    const float* x1;           // null when the leaf is one block
    const float* w;            // the leaf's first block, output blocks ob..
    float* levels;             // the row's level 0, tile-major inside a level
    std::size_t level_floats;  // span pixels * pairwise_max_obs * 8
    std::size_t merges;        // held levels 0 .. merges-1 this leaf completes
    // The last leaf only: the held levels left above `merges`, added lowest
    // first, then the epilogue, stored at y (output block ob, the row's first pixel).
    std::uint32_t upper;
    const float* bias;  // ob's first bias, or null
    const float* residual;
    float* y;
    std::size_t out_ob;  // floats between output blocks' planes
};

// The post-op chain after the bias (convolution_finish.hpp) indexes pairwise_last_leaf_functions.
using blocked_convolution::finish;

// Sums leaf `a` for `tiles` tiles of `pixels` outputs starting at output
// pixel `first`. Each tile's leaf sum adds the held levels it completes
// (held on the left); an inner leaf stores the result at level `merges`, the
// last one adds the levels still held (lowest first), bias, residual and relu
// and stores the outputs, so the whole tree's order stays: leaf sums of 16
// channels, equal-sized sums added pairwise. Arguments: a, first, tiles.
using pairwise_leaf_function = void (*)(const pairwise_leaf_pass&, std::size_t, std::size_t);
struct pairwise_leaf_table {
    pairwise_leaf_function by_size[pairwise_max_obs][pairwise_tile];  // [obs - 1][pixels - 1]
};
extern const pairwise_leaf_table pairwise_inner_leaf_functions;
// [finish]
extern const pairwise_leaf_table pairwise_last_leaf_functions[blocked_convolution::finish_kinds];

}  // namespace kiln::avx2
