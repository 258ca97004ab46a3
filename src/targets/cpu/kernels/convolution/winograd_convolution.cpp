// A 3 x 3 stride-1 convolution on blocked (nChw8c) activations by Winograd's
// F(2 x 2, 3 x 3): each 2 x 2 output tile is A^T [(G g G^T) . (B^T d B)] A
// over its 4 x 4 input patch d, 16 products per tile and channel pair
// instead of the direct form's 36, so 2.25x fewer multiplies. The transforms
// only add, subtract and halve (G), which keeps the float32 error close to
// the direct form's; F(4 x 4, 3 x 3) does fewer multiplies, but its
// transforms scale by 4, 5, 8 and 1/6 to 1/24, which costs several bits.
//
// The weights are transformed once, in float64, to U [16][M/8][C][8]. At run
// time the tiles go in groups (2 MB of transformed input V [16][C/8][tiles][8],
// so that one element's slice, 128 KB, stays in L2 while every output block
// multiplies it and U is streamed once per group): the threads transform the
// group's input (split by channel block), then each takes its own output
// channel blocks and, element by element, multiplies V by U with a
// register-blocked AVX2 kernel (6 tiles x 16 output channels), and finally
// transforms its products back, adding the bias and the post-ops.
//
// Accuracy: each run of a few input blocks is summed from zero and then
// added to the partial sum, as oneDNN's 1 x 1 kernel does: 32 channels
// (chunk_blocks) below 56 x 56, 16 at 56 x 56 and above, the layers whose
// rounding the rest of an image network amplifies most (see
// pairwise_sum_convolution.cpp). Summing all C at once put a 64-channel
// 3 x 3 chain 1.5x ONNX Runtime's distance from float64 (im2col + oneDNN:
// 1.17x); 32 at a time 1.23x. An element's sum here runs over C products,
// not the direct form's 9C, so at 56 x 56 it stays about as accurate as the
// pairwise-sum kernel's: ResNet-50's logits over six random images, rms
// distance from float64 5.58e-6 with that kernel on its 56 x 56 3 x 3
// layers, 5.80e-6 with this one (ONNX Runtime 7.22e-6), for 1.8x less time.
#include <omp.h>

#include <algorithm>
#include <array>
#include <utility>

#include "ops/conv.hpp"
#include "targets/cpu/kernels/convolution/blocked_convolution_epilogue.hpp"
#include "targets/cpu/kernels/convolution/convolution_algorithms.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kiln {

#if defined(__x86_64__)

namespace {

constexpr std::size_t block = ops::channel_block;
constexpr std::size_t elements = 16;                     // of a 4 x 4 transformed tile
constexpr std::size_t max_tiles = 6;                     // tiles multiplied together
constexpr std::size_t max_obs = 2;                       // output channel blocks multiplied together
constexpr std::size_t max_shared_u_bytes = 512 * 1024;   // transformed weights every thread may read
constexpr std::size_t chunk_blocks = 4;                  // input blocks summed from zero before joining the partial sum
constexpr std::size_t high_resolution_chunk_blocks = 2;  // the same at 56 x 56 and above
constexpr std::size_t high_resolution_pixels = 56 * 56;

struct winograd_geometry {
    std::size_t images = 0, in_blocks = 0, out_blocks = 0;
    std::size_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
    std::size_t pad_top = 0, pad_left = 0;
    std::size_t tiles_h = 0, tiles_w = 0;
    std::size_t group_tiles = 0;   // tiles transformed and multiplied together
    bool own_tiles = false;        // threads split the tiles, not the output blocks
    std::size_t chunk_blocks = 0;  // input blocks summed from zero before joining the partial sum
    std::size_t tiles() const { return images * tiles_h * tiles_w; }
};

using blocked_convolution::epilogue;
using blocked_convolution::finish;

// U = G g G^T for each (output, input) channel pair, in float64, stored as
// [element][M/8][C][8 output lanes].
std::vector<float> transformed_weights(const argument& w, std::size_t m, std::size_t c) {
    static constexpr double g_matrix[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    std::vector<float> out(elements * m * c);
    const float* src = w.data_as<float>();
    for (std::size_t o = 0; o < m; ++o)
        for (std::size_t i = 0; i < c; ++i) {
            const float* g = src + (o * c + i) * 9;
            double gg[4][3] = {};  // G g
            for (std::size_t r = 0; r < 4; ++r)
                for (std::size_t k = 0; k < 3; ++k)
                    for (std::size_t j = 0; j < 3; ++j) gg[r][k] += g_matrix[r][j] * g[j * 3 + k];
            for (std::size_t r = 0; r < 4; ++r)
                for (std::size_t s = 0; s < 4; ++s) {
                    double u = 0;
                    for (std::size_t k = 0; k < 3; ++k) u += gg[r][k] * g_matrix[s][k];
                    out[((r * 4 + s) * (m / block) + o / block) * c * block + i * block + o % block] =
                        static_cast<float>(u);
                }
        }
    return out;
}

// B^T d B for the tiles [first, first + count) of the group and input block
// cb: V[element][cb][tile][8], zero where the patch falls in the padding.
__attribute__((target("avx2,fma"))) void transform_input(const winograd_geometry& g, const float* x, std::size_t first,
                                                         std::size_t count, std::size_t cb, float* v) {
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

// products[ob][tile][8] of `tiles` tiles and `obs` output blocks for one
// element: the sum over input blocks of V[cb][tile][c] * U[ob][cb * 8 + c][8],
// each run of `chunk` blocks summed from zero and then added on.
template <std::size_t tiles, std::size_t obs>
__attribute__((target("avx2,fma"))) void multiply_tiles(const float* v, std::size_t v_block_floats, const float* u,
                                                        std::size_t u_ob_floats, std::size_t in_blocks, float* products,
                                                        std::size_t product_ob_floats, std::size_t chunk) {
    constexpr std::size_t count = tiles * obs;
    for (std::size_t cb0 = 0; cb0 < in_blocks; cb0 += chunk) {
        const std::size_t cb1 = std::min(in_blocks, cb0 + chunk);
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

using multiply_function = void (*)(const float*, std::size_t, const float*, std::size_t, std::size_t, float*,
                                   std::size_t, std::size_t);

template <std::size_t obs, std::size_t... T>
constexpr std::array<multiply_function, sizeof...(T)> make_multiply_functions(std::index_sequence<T...>) {
    return {&multiply_tiles<T + 1, obs>...};
}
// [obs - 1][tiles - 1]
constexpr std::array<std::array<multiply_function, max_tiles>, max_obs> multiply_functions = {
    make_multiply_functions<1>(std::make_index_sequence<max_tiles>()),
    make_multiply_functions<2>(std::make_index_sequence<max_tiles>())};

// A^T m A for tiles [first, first + count) of one output block, then the
// bias and post-ops; outputs past the image's edge (odd extents) are dropped.
template <finish then>
__attribute__((target("avx2,fma"))) void transform_output(const winograd_geometry& g, const epilogue& e,
                                                          const float* products, std::size_t element_floats,
                                                          std::size_t first, std::size_t count, std::size_t ob,
                                                          const float* bias, const float* residual, float* y) {
    const std::size_t tiles_per_image = g.tiles_h * g.tiles_w;
    const __m256 b = e.has_bias ? _mm256_loadu_ps(bias + ob * block) : _mm256_setzero_ps();
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
                if (e.has_bias) v = _mm256_add_ps(v, b);
                if constexpr (then == finish::add || then == finish::add_relu)
                    v = _mm256_add_ps(v, _mm256_loadu_ps(residual + at));
                if constexpr (then == finish::relu || then == finish::add_relu)
                    v = _mm256_max_ps(v, _mm256_setzero_ps());
                _mm256_storeu_ps(y + at, v);
            }
    }
}

using output_function = void (*)(const winograd_geometry&, const epilogue&, const float*, std::size_t, std::size_t,
                                 std::size_t, std::size_t, const float*, const float*, float*);
constexpr std::array<output_function, 4> output_functions = {
    &transform_output<finish::none>, &transform_output<finish::relu>, &transform_output<finish::add>,
    &transform_output<finish::add_relu>};

// The first of `parts` equal shares of `total`.
std::size_t share_begin(std::size_t total, std::size_t part, std::size_t parts) {
    return total * part / parts;
}

class winograd_convolution_kernel final : public cpu_kernel {
public:
    winograd_convolution_kernel(winograd_geometry g, epilogue e, std::vector<float> weights, int threads)
        : g_(g), e_(e), weights_(std::move(weights)), threads_(threads) {}

    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        const float* x = inputs[0].data_as<float>();
        const float* bias = e_.has_bias ? inputs[2].data_as<float>() : nullptr;
        const float* residual = nullptr;
        if (inputs.size() > (e_.has_bias ? 3u : 2u)) residual = inputs[e_.has_bias ? 3 : 2].data_as<float>();
        float* y = result.data_as<float>();
        auto* v = reinterpret_cast<float*>(scratch);
        const std::size_t total_tiles = g_.tiles();
        const std::size_t v_floats = elements * g_.in_blocks * g_.group_tiles * block;
        if (g_.own_tiles) {
            // Each thread takes its own run of tiles and every output block.
            const std::size_t chunks = (total_tiles + max_tiles - 1) / max_tiles;
#pragma omp parallel num_threads(threads_)
            {
                const auto thread = static_cast<std::size_t>(omp_get_thread_num());
                const auto threads = static_cast<std::size_t>(omp_get_num_threads());
                const std::size_t begin = std::min(total_tiles, share_begin(chunks, thread, threads) * max_tiles);
                const std::size_t end = std::min(total_tiles, share_begin(chunks, thread + 1, threads) * max_tiles);
                float* own_v = v + thread * (v_floats + products_floats());
                float* products = own_v + v_floats;
                for (std::size_t first = begin; first < end; first += g_.group_tiles) {
                    const std::size_t count = std::min(g_.group_tiles, end - first);
                    for (std::size_t cb = 0; cb < g_.in_blocks; ++cb) transform_input(g_, x, first, count, cb, own_v);
                    multiply_and_finish(own_v, first, count, 0, g_.out_blocks, products, bias, residual, y);
                }
            }
            return;
        }
        float* products_base = v + v_floats;
        const std::size_t ob_pairs = (g_.out_blocks + max_obs - 1) / max_obs;
        // The output blocks go in threads_ shares (what the scratch is sized
        // for); a team given fewer threads takes several shares each.
        const auto shares = static_cast<std::size_t>(threads_);
#pragma omp parallel num_threads(threads_)
        {
            const auto thread = static_cast<std::size_t>(omp_get_thread_num());
            const auto threads = static_cast<std::size_t>(omp_get_num_threads());
            float* products = products_base + thread * products_floats();
            for (std::size_t first = 0; first < total_tiles; first += g_.group_tiles) {
                const std::size_t count = std::min(g_.group_tiles, total_tiles - first);
#pragma omp for schedule(static)
                for (std::size_t cb = 0; cb < g_.in_blocks; ++cb) transform_input(g_, x, first, count, cb, v);
                for (std::size_t share = thread; share < shares; share += threads) {
                    const std::size_t ob_begin =
                        std::min(g_.out_blocks, share_begin(ob_pairs, share, shares) * max_obs);
                    const std::size_t ob_end =
                        std::min(g_.out_blocks, share_begin(ob_pairs, share + 1, shares) * max_obs);
                    multiply_and_finish(v, first, count, ob_begin, ob_end, products, bias, residual, y);
                }
                // The next group's input transform overwrites V.
#pragma omp barrier
            }
        }
    }

    std::size_t scratch_bytes() const override {
        const std::size_t v_floats = elements * g_.in_blocks * g_.group_tiles * block;
        const auto threads = static_cast<std::size_t>(threads_);
        return (g_.own_tiles ? threads * (v_floats + products_floats()) : v_floats + threads * products_floats()) *
               sizeof(float);
    }

    // U cannot give back the exact weights (it is rounded, and 16/9 their
    // size), so the literal stays; U is counted as the kernel's own bytes.
    std::size_t own_copy_bytes() const override {
        return weights_.size() * sizeof(float);
    }

private:
    // Output blocks one thread takes at most.
    std::size_t max_products_blocks() const {
        if (g_.own_tiles) return g_.out_blocks;
        const std::size_t ob_pairs = (g_.out_blocks + max_obs - 1) / max_obs;
        return (ob_pairs + static_cast<std::size_t>(threads_) - 1) / static_cast<std::size_t>(threads_) * max_obs;
    }
    // One thread's products [16][its output blocks][group tiles][8].
    std::size_t products_floats() const {
        return elements * max_products_blocks() * g_.group_tiles * block;
    }

    // Multiplies the group's V by U for output blocks [ob_begin, ob_end),
    // element by element, then transforms the products back into y.
    void multiply_and_finish(const float* v, std::size_t first, std::size_t count, std::size_t ob_begin,
                             std::size_t ob_end, float* products, const float* bias, const float* residual,
                             float* y) const {
        const std::size_t v_element_floats = g_.in_blocks * g_.group_tiles * block;
        const std::size_t u_element_floats = g_.out_blocks * g_.in_blocks * block * block;
        const std::size_t u_ob_floats = g_.in_blocks * block * block;
        const std::size_t product_ob_floats = g_.group_tiles * block;
        const std::size_t product_element_floats = max_products_blocks() * product_ob_floats;
        for (std::size_t e = 0; e < elements; ++e) {
            const float* ve = v + e * v_element_floats;
            for (std::size_t ob = ob_begin; ob < ob_end; ob += max_obs) {
                const std::size_t obs = std::min(max_obs, ob_end - ob);
                const float* u = weights_.data() + e * u_element_floats + ob * u_ob_floats;
                float* p = products + e * product_element_floats + (ob - ob_begin) * product_ob_floats;
                for (std::size_t t = 0; t < count; t += max_tiles) {
                    const std::size_t tiles = std::min(max_tiles, count - t);
                    multiply_functions[obs - 1][tiles - 1](ve + t * block, g_.group_tiles * block, u, u_ob_floats,
                                                           g_.in_blocks, p + t * block, product_ob_floats,
                                                           g_.chunk_blocks);
                }
            }
        }
        const output_function finish_tiles = output_functions[static_cast<std::size_t>(e_.then)];
        for (std::size_t ob = ob_begin; ob < ob_end; ++ob)
            finish_tiles(g_, e_, products + (ob - ob_begin) * product_ob_floats, product_element_floats, first, count,
                         ob, bias, residual, y);
    }

    winograd_geometry g_;
    epilogue e_;
    std::vector<float> weights_;  // U [16][M/8][C][8]
    int threads_;
};

}  // namespace

#endif

namespace {

bool prefers_winograd(const shape& plain_output) {
    const auto& l = plain_output.lens();
    if (l.size() != 4) return false;
    // Enough tiles to spread over the threads and amortize the transforms:
    // a 7 x 7 image (16 tiles, 1.3x the outputs) was still ~1.4x faster than
    // im2col + oneDNN on ResNet-50's 512-channel layers.
    constexpr std::size_t min_tiles = 16;
    return l[0] * ((l[2] + 1) / 2) * ((l[3] + 1) / 2) >= min_tiles;
}

}  // namespace

namespace {

ops::window window_of(const op::fused_convolution& conv) {
    return ops::make_window(conv.name(), {3, 3}, conv.conv.padding, conv.conv.stride, conv.conv.dilation);
}

bool eligible(const kernel_request& r) {
#if defined(__x86_64__)
    static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const auto& conv = requested_convolution(r);
    const shape& w = r.input_shapes[1];
    if (!supported || !blocked_convolution::reads_blocked_float(conv, r) || w.lens()[2] != 3 || w.lens()[3] != 3)
        return false;
    const ops::window window = window_of(conv);
    for (std::size_t i = 0; i < 2; ++i)
        if (window.stride[i] != 1 || window.dilation[i] != 1 || window.pad_begin[i] > 2) return false;
    return blocked_convolution::epilogue_of(conv, r, w.lens()[0]) && prefers_winograd(conv.plain_output_shape(r.input_shapes));
#else
    (void)r;
    return false;
#endif
}

std::shared_ptr<const cpu_kernel> build(const kernel_request& r, const kernel_builder&) {
#if defined(__x86_64__)
    const auto& conv = requested_convolution(r);
    const shape& x = r.input_shapes[0];
    const shape& w = r.input_shapes[1];
    const argument& weights = r.constant_inputs[1];
    const ops::window window = window_of(conv);
    const epilogue e = *blocked_convolution::epilogue_of(conv, r, w.lens()[0]);
    const shape plain_y = conv.plain_output_shape(r.input_shapes);

    winograd_geometry g;
    g.images = x.lens()[0];
    g.in_blocks = x.lens()[1];
    g.in_h = x.lens()[2];
    g.in_w = x.lens()[3];
    g.out_blocks = w.lens()[0] / block;
    g.out_h = plain_y.lens()[2];
    g.out_w = plain_y.lens()[3];
    g.pad_top = window.pad_begin[0];
    g.pad_left = window.pad_begin[1];
    g.chunk_blocks = g.out_h * g.out_w >= high_resolution_pixels ? high_resolution_chunk_blocks : chunk_blocks;
    g.tiles_h = (g.out_h + 1) / 2;
    g.tiles_w = (g.out_w + 1) / 2;
    // With few output channels (DenseNet's 128 -> 32) U is small enough for
    // each thread to read all of it: the threads then split the tiles, each
    // transforming its own input into its own L2 with no barrier.
    const std::size_t u_bytes = elements * w.lens()[0] * w.lens()[1] * sizeof(float);
    const auto threads = static_cast<std::size_t>(r.threads);
    g.own_tiles = u_bytes <= max_shared_u_bytes && g.tiles() >= 2 * max_tiles * threads;
    // A group's transformed input (16 x C floats a tile) near 2 MB shared (a
    // quarter of L2 when a thread's own), in whole runs of max_tiles.
    const std::size_t group_bytes = g.own_tiles ? 128 * 1024 : 2048 * 1024;
    const std::size_t per_tile = elements * g.in_blocks * block * sizeof(float);
    g.group_tiles = std::max<std::size_t>(max_tiles, group_bytes / per_tile / max_tiles * max_tiles);
    g.group_tiles = std::min(g.group_tiles, (g.tiles() + max_tiles - 1) / max_tiles * max_tiles);
    return std::make_shared<winograd_convolution_kernel>(g, e, transformed_weights(weights, w.lens()[0], w.lens()[1]),
                                                         r.threads);
#else
    (void)r;
    return nullptr;
#endif
}

}  // namespace

// 3 x 3 stride-1 layers with enough tiles: 2.25x fewer multiplies.
const kernel_algorithm winograd_convolution{"winograd_f2x2_3x3", eligible, build};

}  // namespace kiln
