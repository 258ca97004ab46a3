// The AVX2 loops of the pairwise-sum convolution (see
// pairwise_sum_convolution.cpp for the order of the sums and
// pairwise_sum_convolution_avx2.hpp for the boundary).
#include "targets/cpu/kernels/convolution/pairwise_sum_convolution_avx2.hpp"

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace kiln::avx2 {

namespace {

constexpr std::size_t block = pairwise_block;
constexpr std::size_t max_obs = pairwise_max_obs;

// Adds 8 input channels' products to `acc` (or starts it, when `first`).
template <std::size_t pixels, std::size_t obs, bool first>
__attribute__((always_inline)) inline void add_block(const float* x, const float* w, __m256* acc) {
    constexpr std::size_t step = block;  // a row's pixels are adjacent
#pragma GCC unroll 16
    for (std::size_t c = 0; c < block; ++c) {
        __m256 wc[obs];
#pragma GCC unroll 16
        for (std::size_t o = 0; o < obs; ++o) wc[o] = _mm256_loadu_ps(w + (c * obs + o) * block);
#pragma GCC unroll 16
        for (std::size_t p = 0; p < pixels; ++p) {
            const __m256 xv = _mm256_broadcast_ss(x + p * step + c);
#pragma GCC unroll 16
            for (std::size_t o = 0; o < obs; ++o)
                acc[o * pixels + p] =
                    first && c == 0 ? _mm256_mul_ps(xv, wc[o]) : _mm256_fmadd_ps(xv, wc[o], acc[o * pixels + p]);
        }
    }
}

// See pairwise_leaf_function.
template <std::size_t pixels, std::size_t obs, bool last, finish then>
void sum_leaf_tiles(const pairwise_leaf_pass& a, std::size_t first, std::size_t tiles) {
    constexpr std::size_t count = pixels * obs, weight_block = block * block * obs;
    // Locals, so that the stores below cannot make the compiler reload them.
    const float *const x0 = a.x0, *const x1 = a.x1, *const w = a.w, *const bias = a.bias;
    const float* const residual = a.residual;
    const std::size_t level_floats = a.level_floats, merges = a.merges, out_ob = a.out_ob;
    float *const levels = a.levels, *const y = a.y;
    __m256 b[obs];
    if constexpr (last)
#pragma GCC unroll 16
        for (std::size_t o = 0; o < obs; ++o)
            b[o] = bias != nullptr ? _mm256_loadu_ps(bias + o * block) : _mm256_setzero_ps();
    for (std::size_t t = 0, ow = first; t < tiles; ++t, ow += pixels) {
        __m256 acc[count];
        add_block<pixels, obs, true>(x0 + ow * block, w, acc);
        if (x1 != nullptr) add_block<pixels, obs, false>(x1 + ow * block, w + weight_block, acc);
        float* tile_levels = levels + ow * max_obs * block;
        for (std::size_t level = 0; level < merges; ++level) {
            const float* held = tile_levels + level * level_floats;
#pragma GCC unroll 16
            for (std::size_t i = 0; i < count; ++i) acc[i] = _mm256_add_ps(_mm256_loadu_ps(held + i * block), acc[i]);
        }
        if constexpr (!last) {
            float* slot = tile_levels + merges * level_floats;
#pragma GCC unroll 16
            for (std::size_t i = 0; i < count; ++i) _mm256_storeu_ps(slot + i * block, acc[i]);
        } else {
            for (std::uint32_t upper = a.upper, level = merges + 1; upper != 0; upper >>= 1, ++level) {
                if (!(upper & 1u)) continue;
                const float* held = tile_levels + level * level_floats;
#pragma GCC unroll 16
                for (std::size_t i = 0; i < count; ++i)
                    acc[i] = _mm256_add_ps(acc[i], _mm256_loadu_ps(held + i * block));
            }
#pragma GCC unroll 16
            for (std::size_t o = 0; o < obs; ++o) {
#pragma GCC unroll 16
                for (std::size_t p = 0; p < pixels; ++p) {
                    const std::size_t at = o * out_ob + (ow + p) * block;
                    __m256 v = acc[o * pixels + p];
                    if (bias != nullptr) v = _mm256_add_ps(v, b[o]);
                    if constexpr (then == finish::add || then == finish::add_relu)
                        v = _mm256_add_ps(v, _mm256_loadu_ps(residual + at));
                    if constexpr (then == finish::relu || then == finish::add_relu)
                        v = _mm256_max_ps(v, _mm256_setzero_ps());
                    _mm256_storeu_ps(y + at, v);
                }
            }
        }
    }
}

// Every (obs, pixels) pair for one kind of leaf.
template <bool last, finish then>
constexpr pairwise_leaf_table leaf_table_for() {
    static_assert(pairwise_max_obs == 2 && pairwise_tile == 6, "the table lists every instantiation");
    return {
        {{&sum_leaf_tiles<1, 1, last, then>, &sum_leaf_tiles<2, 1, last, then>, &sum_leaf_tiles<3, 1, last, then>,
          &sum_leaf_tiles<4, 1, last, then>, &sum_leaf_tiles<5, 1, last, then>, &sum_leaf_tiles<6, 1, last, then>},
         {&sum_leaf_tiles<1, 2, last, then>, &sum_leaf_tiles<2, 2, last, then>, &sum_leaf_tiles<3, 2, last, then>,
          &sum_leaf_tiles<4, 2, last, then>, &sum_leaf_tiles<5, 2, last, then>, &sum_leaf_tiles<6, 2, last, then>}}};
}

}  // namespace

constinit const pairwise_leaf_table pairwise_inner_leaf_functions = leaf_table_for<false, finish::none>();
constinit const pairwise_leaf_table pairwise_last_leaf_functions[blocked_convolution::finish_kinds] = {
    leaf_table_for<true, finish::none>(), leaf_table_for<true, finish::relu>(),
    leaf_table_for<true, finish::add>(), leaf_table_for<true, finish::add_relu>()};

}  // namespace kiln::avx2
