// The AVX2 loops of the Winograd F(2 x 2, 3 x 3) convolution (see
// winograd_convolution.cpp for the algorithm and winograd_convolution_avx2.hpp
// for the boundary).
#include "targets/cpu/kernels/convolution/winograd_convolution_avx2.hpp"

#include <immintrin.h>

#include <cstddef>

namespace kiln::avx2 {

namespace {

constexpr std::size_t block = winograd_block;

// std::min's value, without <algorithm> (whose templates portable code instantiates).
std::size_t smaller(std::size_t a, std::size_t b) {
    return b < a ? b : a;
}

}  // namespace

void winograd_transform_input(const winograd_geometry& g, const float* x, std::size_t first, std::size_t count,
                              std::size_t cb, float* v) {
    const std::size_t tiles_per_image = g.tiles_h * g.tiles_w, element_floats = g.in_blocks * g.group_tiles * block;
    for (std::size_t t = 0; t < count; ++t) {
        const std::size_t tile = first + t, n = tile / tiles_per_image, in_image = tile % tiles_per_image;
        const auto top = static_cast<std::ptrdiff_t>(in_image / g.tiles_w * 2) - static_cast<std::ptrdiff_t>(g.pad_top);
        const auto left =
            static_cast<std::ptrdiff_t>(in_image % g.tiles_w * 2) - static_cast<std::ptrdiff_t>(g.pad_left);
        const float* plane = x + (n * g.in_blocks + cb) * g.in_h * g.in_w * block;
        __m256 d[4][4];
        for (std::ptrdiff_t i = 0; i < 4; ++i)
            for (std::ptrdiff_t j = 0; j < 4; ++j) {
                const std::ptrdiff_t r = top + i, col = left + j;
                const bool inside = r >= 0 && r < static_cast<std::ptrdiff_t>(g.in_h) && col >= 0 &&
                                    col < static_cast<std::ptrdiff_t>(g.in_w);
                d[i][j] =
                    inside ? _mm256_loadu_ps(
                                 plane + (static_cast<std::size_t>(r) * g.in_w + static_cast<std::size_t>(col)) * block)
                           : _mm256_setzero_ps();
            }
        __m256 b[4][4];  // B^T d
        for (std::size_t j = 0; j < 4; ++j) {
            b[0][j] = _mm256_sub_ps(d[0][j], d[2][j]);
            b[1][j] = _mm256_add_ps(d[1][j], d[2][j]);
            b[2][j] = _mm256_sub_ps(d[2][j], d[1][j]);
            b[3][j] = _mm256_sub_ps(d[1][j], d[3][j]);
        }
        float* out = v + (cb * g.group_tiles + t) * block;
        for (std::size_t i = 0; i < 4; ++i) {
            _mm256_storeu_ps(out + (i * 4 + 0) * element_floats, _mm256_sub_ps(b[i][0], b[i][2]));
            _mm256_storeu_ps(out + (i * 4 + 1) * element_floats, _mm256_add_ps(b[i][1], b[i][2]));
            _mm256_storeu_ps(out + (i * 4 + 2) * element_floats, _mm256_sub_ps(b[i][2], b[i][1]));
            _mm256_storeu_ps(out + (i * 4 + 3) * element_floats, _mm256_sub_ps(b[i][1], b[i][3]));
        }
    }
}

namespace {

template <std::size_t tiles, std::size_t obs>
void multiply_tiles(const float* v, std::size_t v_block_floats, const float* u, std::size_t u_ob_floats,
                    std::size_t in_blocks, float* products, std::size_t product_ob_floats, std::size_t chunk) {
    constexpr std::size_t count = tiles * obs;
    for (std::size_t cb0 = 0; cb0 < in_blocks; cb0 += chunk) {
        const std::size_t cb1 = smaller(in_blocks, cb0 + chunk);
        __m256 acc[count];
#pragma GCC unroll 16
        for (std::size_t i = 0; i < count; ++i) acc[i] = _mm256_setzero_ps();
        for (std::size_t cb = cb0; cb < cb1; ++cb) {
            const float* vb = v + cb * v_block_floats;
            const float* ub = u + cb * block * block;
#pragma GCC unroll 8
            for (std::size_t c = 0; c < block; ++c) {
                __m256 w[obs];
#pragma GCC unroll 2
                for (std::size_t o = 0; o < obs; ++o) w[o] = _mm256_loadu_ps(ub + o * u_ob_floats + c * block);
#pragma GCC unroll 6
                for (std::size_t t = 0; t < tiles; ++t) {
                    const __m256 xv = _mm256_broadcast_ss(vb + t * block + c);
#pragma GCC unroll 2
                    for (std::size_t o = 0; o < obs; ++o)
                        acc[o * tiles + t] = _mm256_fmadd_ps(xv, w[o], acc[o * tiles + t]);
                }
            }
        }
#pragma GCC unroll 2
        for (std::size_t o = 0; o < obs; ++o)
#pragma GCC unroll 6
            for (std::size_t t = 0; t < tiles; ++t) {
                float* p = products + o * product_ob_floats + t * block;
                const __m256 sum =
                    cb0 == 0 ? acc[o * tiles + t] : _mm256_add_ps(_mm256_loadu_ps(p), acc[o * tiles + t]);
                _mm256_storeu_ps(p, sum);
            }
    }
}

template <finish then>
void transform_output(const winograd_geometry& g, bool has_bias, const float* products, std::size_t element_floats,
                      std::size_t first, std::size_t count, std::size_t ob, const float* bias, const float* residual,
                      float* y) {
    const std::size_t tiles_per_image = g.tiles_h * g.tiles_w;
    const __m256 b = has_bias ? _mm256_loadu_ps(bias + ob * block) : _mm256_setzero_ps();
    for (std::size_t t = 0; t < count; ++t) {
        const std::size_t tile = first + t, n = tile / tiles_per_image, in_image = tile % tiles_per_image;
        const std::size_t top = in_image / g.tiles_w * 2, left = in_image % g.tiles_w * 2;
        __m256 m[4][4];
        for (std::size_t i = 0; i < 4; ++i)
            for (std::size_t j = 0; j < 4; ++j)
                m[i][j] = _mm256_loadu_ps(products + (i * 4 + j) * element_floats + t * block);
        __m256 s[2][4];  // A^T m
        for (std::size_t j = 0; j < 4; ++j) {
            s[0][j] = _mm256_add_ps(_mm256_add_ps(m[0][j], m[1][j]), m[2][j]);
            s[1][j] = _mm256_sub_ps(_mm256_sub_ps(m[1][j], m[2][j]), m[3][j]);
        }
        __m256 out[2][2];
        for (std::size_t i = 0; i < 2; ++i) {
            out[i][0] = _mm256_add_ps(_mm256_add_ps(s[i][0], s[i][1]), s[i][2]);
            out[i][1] = _mm256_sub_ps(_mm256_sub_ps(s[i][1], s[i][2]), s[i][3]);
        }
        const std::size_t plane = (n * g.out_blocks + ob) * g.out_h * g.out_w * block;
        for (std::size_t i = 0; i < 2 && top + i < g.out_h; ++i)
            for (std::size_t j = 0; j < 2 && left + j < g.out_w; ++j) {
                const std::size_t at = plane + ((top + i) * g.out_w + left + j) * block;
                __m256 v = out[i][j];
                if (has_bias) v = _mm256_add_ps(v, b);
                if constexpr (then == finish::add || then == finish::add_relu)
                    v = _mm256_add_ps(v, _mm256_loadu_ps(residual + at));
                if constexpr (then == finish::relu || then == finish::add_relu)
                    v = _mm256_max_ps(v, _mm256_setzero_ps());
                _mm256_storeu_ps(y + at, v);
            }
    }
}

}  // namespace

static_assert(winograd_max_obs == 2 && winograd_max_tiles == 6, "the table below lists every instantiation");
constinit const winograd_multiply_function winograd_multiply_functions[winograd_max_obs][winograd_max_tiles] = {
    {&multiply_tiles<1, 1>, &multiply_tiles<2, 1>, &multiply_tiles<3, 1>, &multiply_tiles<4, 1>, &multiply_tiles<5, 1>,
     &multiply_tiles<6, 1>},
    {&multiply_tiles<1, 2>, &multiply_tiles<2, 2>, &multiply_tiles<3, 2>, &multiply_tiles<4, 2>, &multiply_tiles<5, 2>,
     &multiply_tiles<6, 2>}};

constinit const winograd_output_function winograd_output_functions[blocked_convolution::finish_kinds] = {
    &transform_output<finish::none>, &transform_output<finish::relu>,
    &transform_output<finish::add>, &transform_output<finish::add_relu>};

}  // namespace kiln::avx2
