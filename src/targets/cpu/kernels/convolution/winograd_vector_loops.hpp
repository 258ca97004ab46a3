#pragma once
// The loops of the Winograd F(2 x 2, 3 x 3) convolution (see
// winograd_convolution.cpp for the algorithm and winograd_loops.hpp for the
// boundary), written once over a vector of one channel block: included only
// by the units built for an instruction set (winograd_convolution_avx2.cpp,
// winograd_convolution_avx512.cpp), each with a vector type `V` of its own
// in an unnamed namespace, so every instantiation stays inside its unit
// (none compiled for AVX-512 can be linked in place of an AVX2 one). `V`
// holds `reg`, `lanes` and static load, store, zero, add, sub, max,
// broadcast and fmadd (a * b + c).
#include <cstddef>
#include <utility>

#include "targets/cpu/kernels/convolution/winograd_loops.hpp"

namespace kiln::winograd_vector {

template <class V>
void transform_input(const winograd_geometry& g, const float* x, std::size_t first, std::size_t count, std::size_t cb,
                     float* v) {
    using reg = typename V::reg;
    constexpr std::size_t block = V::lanes;
    const std::size_t tiles_per_image = g.tiles_h * g.tiles_w, element_floats = g.in_blocks * g.group_tiles * block;
    for (std::size_t t = 0; t < count; ++t) {
        const std::size_t tile = first + t, n = tile / tiles_per_image, in_image = tile % tiles_per_image;
        const auto top = static_cast<std::ptrdiff_t>(in_image / g.tiles_w * 2) - static_cast<std::ptrdiff_t>(g.pad_top);
        const auto left =
            static_cast<std::ptrdiff_t>(in_image % g.tiles_w * 2) - static_cast<std::ptrdiff_t>(g.pad_left);
        const float* plane = x + (n * g.in_blocks + cb) * g.in_h * g.in_w * block;
        reg d[4][4];
        for (std::ptrdiff_t i = 0; i < 4; ++i)
            for (std::ptrdiff_t j = 0; j < 4; ++j) {
                const std::ptrdiff_t r = top + i, col = left + j;
                const bool inside = r >= 0 && r < static_cast<std::ptrdiff_t>(g.in_h) && col >= 0 &&
                                    col < static_cast<std::ptrdiff_t>(g.in_w);
                d[i][j] = inside
                              ? V::load(plane +
                                        (static_cast<std::size_t>(r) * g.in_w + static_cast<std::size_t>(col)) * block)
                              : V::zero();
            }
        reg b[4][4];  // B^T d
        for (std::size_t j = 0; j < 4; ++j) {
            b[0][j] = V::sub(d[0][j], d[2][j]);
            b[1][j] = V::add(d[1][j], d[2][j]);
            b[2][j] = V::sub(d[2][j], d[1][j]);
            b[3][j] = V::sub(d[1][j], d[3][j]);
        }
        float* out = v + (cb * g.group_tiles + t) * block;
        for (std::size_t i = 0; i < 4; ++i) {
            V::store(out + (i * 4 + 0) * element_floats, V::sub(b[i][0], b[i][2]));
            V::store(out + (i * 4 + 1) * element_floats, V::add(b[i][1], b[i][2]));
            V::store(out + (i * 4 + 2) * element_floats, V::sub(b[i][2], b[i][1]));
            V::store(out + (i * 4 + 3) * element_floats, V::sub(b[i][1], b[i][3]));
        }
    }
}

template <class V, std::size_t tiles, std::size_t obs>
void multiply_tiles(const float* v, std::size_t v_block_floats, const float* u, std::size_t u_ob_floats,
                    std::size_t in_blocks, float* products, std::size_t product_ob_floats, std::size_t chunk) {
    using reg = typename V::reg;
    constexpr std::size_t block = V::lanes, count = tiles * obs;
    for (std::size_t cb0 = 0; cb0 < in_blocks; cb0 += chunk) {
        const std::size_t cb1 = in_blocks - cb0 < chunk ? in_blocks : cb0 + chunk;
        reg acc[count];
#pragma GCC unroll 32
        for (std::size_t i = 0; i < count; ++i) acc[i] = V::zero();
        for (std::size_t cb = cb0; cb < cb1; ++cb) {
            const float* vb = v + cb * v_block_floats;
            const float* ub = u + cb * block * block;
#pragma GCC unroll 16
            for (std::size_t c = 0; c < block; ++c) {
                reg w[obs];
#pragma GCC unroll 4
                for (std::size_t o = 0; o < obs; ++o) w[o] = V::load(ub + o * u_ob_floats + c * block);
#pragma GCC unroll 16
                for (std::size_t t = 0; t < tiles; ++t) {
                    const reg xv = V::broadcast(vb + t * block + c);
#pragma GCC unroll 4
                    for (std::size_t o = 0; o < obs; ++o) acc[o * tiles + t] = V::fmadd(xv, w[o], acc[o * tiles + t]);
                }
            }
        }
#pragma GCC unroll 4
        for (std::size_t o = 0; o < obs; ++o)
#pragma GCC unroll 16
            for (std::size_t t = 0; t < tiles; ++t) {
                float* p = products + o * product_ob_floats + t * block;
                V::store(p, cb0 == 0 ? acc[o * tiles + t] : V::add(V::load(p), acc[o * tiles + t]));
            }
    }
}

template <class V, blocked_convolution::finish then>
void transform_output(const winograd_geometry& g, bool has_bias, const float* products, std::size_t element_floats,
                      std::size_t first, std::size_t count, std::size_t ob, const float* bias, const float* residual,
                      float* y) {
    using reg = typename V::reg;
    using blocked_convolution::finish;
    constexpr std::size_t block = V::lanes;
    const std::size_t tiles_per_image = g.tiles_h * g.tiles_w;
    const reg b = has_bias ? V::load(bias + ob * block) : V::zero();
    for (std::size_t t = 0; t < count; ++t) {
        const std::size_t tile = first + t, n = tile / tiles_per_image, in_image = tile % tiles_per_image;
        const std::size_t top = in_image / g.tiles_w * 2, left = in_image % g.tiles_w * 2;
        reg m[4][4];
        for (std::size_t i = 0; i < 4; ++i)
            for (std::size_t j = 0; j < 4; ++j) m[i][j] = V::load(products + (i * 4 + j) * element_floats + t * block);
        reg s[2][4];  // A^T m
        for (std::size_t j = 0; j < 4; ++j) {
            s[0][j] = V::add(V::add(m[0][j], m[1][j]), m[2][j]);
            s[1][j] = V::sub(V::sub(m[1][j], m[2][j]), m[3][j]);
        }
        reg out[2][2];
        for (std::size_t i = 0; i < 2; ++i) {
            out[i][0] = V::add(V::add(s[i][0], s[i][1]), s[i][2]);
            out[i][1] = V::sub(V::sub(s[i][1], s[i][2]), s[i][3]);
        }
        const std::size_t plane = (n * g.out_blocks + ob) * g.out_h * g.out_w * block;
        for (std::size_t i = 0; i < 2 && top + i < g.out_h; ++i)
            for (std::size_t j = 0; j < 2 && left + j < g.out_w; ++j) {
                const std::size_t at = plane + ((top + i) * g.out_w + left + j) * block;
                reg v = out[i][j];
                if (has_bias) v = V::add(v, b);
                if constexpr (then == finish::add || then == finish::add_relu) v = V::add(v, V::load(residual + at));
                if constexpr (then == finish::relu || then == finish::add_relu) v = V::max(v, V::zero());
                V::store(y + at, v);
            }
    }
}

// Every multiply_tiles<V, tiles, obs> for tiles in [1, max_tiles] and obs in
// [1, max_obs], in winograd_loops::multiply's order.
template <class V, std::size_t max_tiles, std::size_t max_obs>
struct multiply_table {
    winograd_multiply_function entries[max_obs * max_tiles];
};

template <class V, std::size_t max_tiles, std::size_t max_obs, std::size_t... i>
constexpr multiply_table<V, max_tiles, max_obs> make_multiply_table(std::index_sequence<i...>) {
    return {{&multiply_tiles<V, i % max_tiles + 1, i / max_tiles + 1>...}};
}

template <class V, std::size_t max_tiles, std::size_t max_obs>
constexpr multiply_table<V, max_tiles, max_obs> multiply_functions =
    make_multiply_table<V, max_tiles, max_obs>(std::make_index_sequence<max_obs * max_tiles>());

template <class V>
constexpr winograd_output_function output_functions[blocked_convolution::finish_kinds] = {
    &transform_output<V, blocked_convolution::finish::none>, &transform_output<V, blocked_convolution::finish::relu>,
    &transform_output<V, blocked_convolution::finish::add>,
    &transform_output<V, blocked_convolution::finish::add_relu>};

// The loops of `V`'s block, multiplying up to max_tiles x max_obs blocks at once.
template <class V, std::size_t max_tiles, std::size_t max_obs>
constexpr winograd_loops loops_of() {
    return {
        V::lanes,           max_tiles, max_obs, &transform_input<V>, multiply_functions<V, max_tiles, max_obs>.entries,
        output_functions<V>};
}

}  // namespace kiln::winograd_vector
