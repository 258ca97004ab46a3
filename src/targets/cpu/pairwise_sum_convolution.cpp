// A 1 x 1 convolution on blocked (nChw8c) activations that sums its input
// channels pairwise: each leaf of 16 input channels is summed from zero (16
// fused multiply-adds) and the leaf sums are added as a balanced binary
// tree, so an output's rounding error grows with log2(C / 16) instead of
// with C. oneDNN's kernel (and ONNX Runtime's gemm) run one sum through each
// block of 128 channels: with C = 64 one running sum over all products.
//
// Why it matters: in a deep network the rounding made in the first
// high-resolution layers is amplified by every layer after it. On ResNet-50
// the stem and the 56 x 56 stage make ~90% of the logits' distance from the
// float64 answer (measured by evaluating the network exactly up to a cut and
// in float32 after it), so layers with a 56 x 56 or larger output run here
// (`prefers_pairwise_sum`); the deeper layers keep oneDNN's faster kernel.
// The 3 x 3 layers use it too, over im2col columns built one output row at
// a time in L2 (not the whole image, as im2col_convolution.cpp does). It
// is ~1.5x slower than oneDNN on those layers; ResNet-50's logits come 0.8x
// as far from float64 as before (rms 7.2e-6 -> 5.7e-6, ONNX Runtime 6.7e-6).
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "ops/conv.hpp"
#include "ops/fused_convolution.hpp"
#include "targets/cpu/cpu_kernels.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kiln {

#if defined(__x86_64__)

namespace {

constexpr std::size_t block = ops::channel_block;
constexpr std::size_t tile = 6;         // output pixels of a row summed together
constexpr std::size_t max_obs = 2;      // output channel blocks summed together
constexpr std::size_t leaf_blocks = 2;  // channel blocks summed in one run before the tree
constexpr std::size_t max_levels = 24;  // of the pairwise tree: 2^24 leaves

// A k x k convolution sums over columns: in_blocks = taps x channel_blocks,
// tap-major (im2col's channel order), one output row's columns built at a
// time in the thread's scratch, where they stay in L2.
struct pairwise_geometry {
    std::size_t images = 0, in_blocks = 0, out_blocks = 0;
    std::size_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
    std::size_t channel_blocks = 0, kernel_h = 1, kernel_w = 1;
    ops::window window;
    std::size_t taps() const { return kernel_h * kernel_w; }
    std::size_t column_floats() const { return taps() > 1 ? in_blocks * out_w * block : 0; }
};

// Output row `oh` of image `x` ([C/8, H, W, 8]) as columns [taps * C/8][OW][8]:
// channel block t * C/8 + cb holds input block cb shifted by tap t, zero
// where the tap falls in the padding.
void fill_row_columns(const pairwise_geometry& g, const float* x, std::size_t oh, float* columns) {
    const std::size_t in_plane = g.in_h * g.in_w * block, row_floats = g.out_w * block;
    const auto sw = static_cast<std::ptrdiff_t>(g.window.stride[1]), in_w = static_cast<std::ptrdiff_t>(g.in_w);
    const auto out_w = static_cast<std::ptrdiff_t>(g.out_w);
    for (std::size_t tap = 0; tap < g.taps(); ++tap) {
        const auto r = static_cast<std::ptrdiff_t>(oh * g.window.stride[0] + tap / g.kernel_w * g.window.dilation[0]) -
                       static_cast<std::ptrdiff_t>(g.window.pad_begin[0]);
        const auto col0 = static_cast<std::ptrdiff_t>(tap % g.kernel_w * g.window.dilation[1]) -
                          static_cast<std::ptrdiff_t>(g.window.pad_begin[1]);
        // The outputs [lo, hi) read inside the input row; the rest is padding.
        const std::ptrdiff_t lo = std::clamp<std::ptrdiff_t>((-col0 + sw - 1) / sw, 0, out_w);
        const std::ptrdiff_t hi = std::clamp<std::ptrdiff_t>((in_w - col0 + sw - 1) / sw, lo, out_w);
        for (std::size_t cb = 0; cb < g.channel_blocks; ++cb) {
            float* out = columns + (tap * g.channel_blocks + cb) * row_floats;
            if (r < 0 || r >= static_cast<std::ptrdiff_t>(g.in_h)) {
                std::fill_n(out, row_floats, 0.f);
                continue;
            }
            const float* in_row = x + cb * in_plane + static_cast<std::size_t>(r) * g.in_w * block;
            std::fill_n(out, lo * block, 0.f);
            if (sw == 1)
                std::memcpy(out + lo * block, in_row + (col0 + lo) * block, (hi - lo) * block * sizeof(float));
            else
                for (std::ptrdiff_t ow = lo; ow < hi; ++ow)
                    std::memcpy(out + ow * block, in_row + (col0 + ow * sw) * block, block * sizeof(float));
            std::fill_n(out + hi * block, (out_w - hi) * block, 0.f);
        }
    }
}

// The post-op chains the kernel applies after the bias: nothing, relu, a
// residual add, or a residual add then relu (a template argument, so the
// epilogue has no branch per vector).
enum class finish { none, relu, add, add_relu };
constexpr std::size_t finish_kinds = 4;

struct epilogue {
    bool has_bias = false;
    finish then = finish::none;
};

// Weights [M, C, 1, 1] as [M/8][C/8][8 input channels][8 output lanes].
std::size_t packed_index(std::size_t o, std::size_t i, std::size_t c) {
    return ((o / block * (c / block) + i / block) * block + i % block) * block + o % block;
}

// Weights [M, C, KH, KW]: column t * C + i is input channel i at tap t.
std::vector<float> packed_weights(const argument& w, std::size_t m, std::size_t c, std::size_t taps) {
    std::vector<float> out(m * c * taps);
    const float* src = w.data_as<float>();
    for (std::size_t o = 0; o < m; ++o)
        for (std::size_t i = 0; i < c; ++i)
            for (std::size_t t = 0; t < taps; ++t)
                out[packed_index(o, t * c + i, taps * c)] = src[(o * c + i) * taps + t];
    return out;
}

// Where one row's tiles read and write for one pair of output blocks. The
// pairwise tree has the same shape for every tile, so a leaf is summed for
// the whole row before the next: each input block's row is read from start
// to end (hardware prefetch follows it) instead of hopping between planes.
struct row_place {
    const float* x = nullptr;      // the row's first input pixel, channel block 0
    std::size_t ob = 0;            // first output block
    std::size_t out_offset = 0;    // of the row's first output of block ob
    float* levels = nullptr;       // the thread's scratch: levels * level_floats
    std::size_t level_floats = 0;  // out_w * max_obs * block: one level for the row
};

// Adds 8 input channels' products to `acc` (or starts it, when `first`).
template <std::size_t pixels, std::size_t obs, bool first>
__attribute__((target("avx2,fma"), always_inline)) inline void add_block(const float* x, const float* w,
                                                                         std::size_t weight_ob, __m256* acc) {
    constexpr std::size_t step = block;  // stride 1: a row's pixels are adjacent
#pragma GCC unroll 16
    for (std::size_t c = 0; c < block; ++c) {
        __m256 wc[obs];
#pragma GCC unroll 16
        for (std::size_t o = 0; o < obs; ++o) wc[o] = _mm256_loadu_ps(w + o * weight_ob + c * block);
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

// One leaf (leaf_blocks input blocks, summed from zero) of `pixels` outputs
// for `obs` output blocks, added to the `merges` lower levels' held sums and
// stored at level `merges`. `levels` points at the tile's place in level 0.
template <std::size_t pixels, std::size_t obs>
__attribute__((target("avx2,fma"))) void sum_leaf(const float* x, std::size_t blocks, std::size_t in_plane,
                                                  const float* w, std::size_t weight_ob, float* levels,
                                                  std::size_t level_floats, std::size_t merges) {
    constexpr std::size_t count = pixels * obs, weight_block = block * block;
    __m256 acc[count];
    add_block<pixels, obs, true>(x, w, weight_ob, acc);
    for (std::size_t more = 1; more < blocks; ++more)
        add_block<pixels, obs, false>(x + more * in_plane, w + more * weight_block, weight_ob, acc);
    for (std::size_t level = 0; level < merges; ++level) {
        const float* held = levels + level * level_floats;
#pragma GCC unroll 16
        for (std::size_t i = 0; i < count; ++i) acc[i] = _mm256_add_ps(_mm256_loadu_ps(held + i * block), acc[i]);
    }
    float* slot = levels + merges * level_floats;
#pragma GCC unroll 16
    for (std::size_t i = 0; i < count; ++i) _mm256_storeu_ps(slot + i * block, acc[i]);
}

// Adds the held levels (lowest first), then bias and the post-op chain.
template <std::size_t pixels, std::size_t obs, finish then>
__attribute__((target("avx2,fma"))) void finish_tile(const pairwise_geometry& g, const epilogue& e, const float* bias,
                                                     const float* residual, float* y, std::size_t ob,
                                                     std::size_t out_offset, const float* levels,
                                                     std::size_t level_floats, std::uint32_t occupied) {
    constexpr std::size_t count = pixels * obs;
    __m256 sums[count];
#pragma GCC unroll 16
    for (std::size_t i = 0; i < count; ++i) sums[i] = _mm256_setzero_ps();
    bool first = true;
    for (std::size_t level = 0; level < max_levels; ++level) {
        if (!(occupied & (1u << level))) continue;
        const float* held = levels + level * level_floats;
#pragma GCC unroll 16
        for (std::size_t i = 0; i < count; ++i) {
            const __m256 v = _mm256_loadu_ps(held + i * block);
            sums[i] = first ? v : _mm256_add_ps(sums[i], v);
        }
        first = false;
    }
    const std::size_t out_ob = g.out_h * g.out_w * block;
#pragma GCC unroll 16
    for (std::size_t o = 0; o < obs; ++o) {
        const __m256 b = e.has_bias ? _mm256_loadu_ps(bias + (ob + o) * block) : _mm256_setzero_ps();
#pragma GCC unroll 16
        for (std::size_t p = 0; p < pixels; ++p) {
            const std::size_t at = out_offset + o * out_ob + p * block;
            __m256 v = sums[o * pixels + p];
            if (e.has_bias) v = _mm256_add_ps(v, b);
            if constexpr (then == finish::add || then == finish::add_relu)
                v = _mm256_add_ps(v, _mm256_loadu_ps(residual + at));
            if constexpr (then == finish::relu || then == finish::add_relu) v = _mm256_max_ps(v, _mm256_setzero_ps());
            _mm256_storeu_ps(y + at, v);
        }
    }
}

using leaf_function = void (*)(const float*, std::size_t, std::size_t, const float*, std::size_t, float*, std::size_t,
                               std::size_t);
using finish_function = void (*)(const pairwise_geometry&, const epilogue&, const float*, const float*, float*,
                                 std::size_t, std::size_t, const float*, std::size_t, std::uint32_t);

template <std::size_t obs, std::size_t... P>
constexpr std::array<leaf_function, sizeof...(P)> make_leaf_functions(std::index_sequence<P...>) {
    return {&sum_leaf<P + 1, obs>...};
}
// [obs - 1][pixels - 1]
constexpr std::array<std::array<leaf_function, tile>, max_obs> leaf_functions = {
    make_leaf_functions<1>(std::make_index_sequence<tile>()), make_leaf_functions<2>(std::make_index_sequence<tile>())};

template <std::size_t obs, finish then, std::size_t... P>
constexpr std::array<finish_function, sizeof...(P)> make_finish_functions(std::index_sequence<P...>) {
    return {&finish_tile<P + 1, obs, then>...};
}
template <finish then>
constexpr std::array<std::array<finish_function, tile>, max_obs> finish_functions_for = {
    make_finish_functions<1, then>(std::make_index_sequence<tile>()),
    make_finish_functions<2, then>(std::make_index_sequence<tile>())};
// [finish][obs - 1][pixels - 1]
constexpr std::array<std::array<std::array<finish_function, tile>, max_obs>, finish_kinds> finish_functions = {
    finish_functions_for<finish::none>, finish_functions_for<finish::relu>, finish_functions_for<finish::add>,
    finish_functions_for<finish::add_relu>};

// Levels the pairwise tree needs for `leaves` leaves: one per bit.
std::size_t tree_levels(std::size_t leaves) {
    std::size_t levels = 1;
    while ((std::size_t{1} << levels) <= leaves) ++levels;
    return levels;
}

class pairwise_sum_convolution_kernel final : public cpu_kernel {
public:
    pairwise_sum_convolution_kernel(pairwise_geometry g, epilogue e, std::vector<float> weights, shape plain_weights,
                                    int threads)
        : g_(g),
          e_(std::move(e)),
          weights_(std::move(weights)),
          plain_weights_(std::move(plain_weights)),
          threads_(threads > 0 ? threads : omp_get_max_threads()),
          levels_(tree_levels((g_.in_blocks + leaf_blocks - 1) / leaf_blocks)) {}

    // Threads take output rows; for each pair of output blocks a row's
    // tiles are summed leaf by leaf (see row_place).
    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        const float* x = inputs[0].data_as<float>();
        const float* bias = e_.has_bias ? inputs[2].data_as<float>() : nullptr;
        const float* residual = nullptr;
        if (inputs.size() > (e_.has_bias ? 3u : 2u)) residual = inputs[e_.has_bias ? 3 : 2].data_as<float>();
        float* y = result.data_as<float>();
        auto* levels = reinterpret_cast<float*>(scratch);
        const bool columns = g_.taps() > 1;
        const std::size_t in_plane = columns ? g_.out_w * block : g_.in_h * g_.in_w * block;
        const std::size_t weight_ob = g_.in_blocks * block * block;
        const std::size_t level_floats = g_.out_w * max_obs * block;
        // Tiles of equal width (56 = 6 x 6 + 4 x 5, not 9 x 6 + 2): a narrow
        // tile has too few independent sums to hide the FMA latency.
        const std::size_t tiles = (g_.out_w + tile - 1) / tile, narrow = g_.out_w / tiles,
                          wide_tiles = g_.out_w % tiles;
        const auto rows = static_cast<std::ptrdiff_t>(g_.images * g_.out_h);
        const auto& finishes = finish_functions[static_cast<std::size_t>(e_.then)];
#pragma omp parallel for schedule(static) num_threads(threads_)
        for (std::ptrdiff_t r = 0; r < rows; ++r) {
            const auto row = static_cast<std::size_t>(r);
            const std::size_t oh = row % g_.out_h, n = row / g_.out_h;
            float* row_levels =
                levels + static_cast<std::size_t>(omp_get_thread_num()) * (levels_ * level_floats + g_.column_floats());
            const float* x_row = x + ((n * g_.in_blocks * g_.in_h + oh) * g_.in_w) * block;
            if (columns) {
                float* row_columns = row_levels + levels_ * level_floats;
                fill_row_columns(g_, x + n * g_.channel_blocks * g_.in_h * g_.in_w * block, oh, row_columns);
                x_row = row_columns;
            }
            for (std::size_t ob = 0; ob < g_.out_blocks; ob += max_obs) {
                const std::size_t obs = std::min(max_obs, g_.out_blocks - ob);
                const float* w_ob = weights_.data() + ob * weight_ob;
                std::uint32_t occupied = 0;
                for (std::size_t cb = 0; cb < g_.in_blocks; cb += leaf_blocks) {
                    const std::size_t blocks = std::min(leaf_blocks, g_.in_blocks - cb);
                    // Binary counter: level l holds the sum of 2^l leaves; equal sizes merge.
                    std::size_t merges = 0;
                    while (occupied & (1u << merges)) ++merges;
                    for (std::size_t i = 0, ow = 0; i < tiles; ++i) {
                        const std::size_t pixels = narrow + (i < wide_tiles ? 1 : 0);
                        leaf_functions[obs - 1][pixels - 1](x_row + cb * in_plane + ow * block, blocks, in_plane,
                                                            w_ob + cb * block * block, weight_ob,
                                                            row_levels + ow * max_obs * block, level_floats, merges);
                        ow += pixels;
                    }
                    occupied = (occupied & ~((1u << merges) - 1)) | (1u << merges);
                }
                const std::size_t out_row = ((n * g_.out_blocks + ob) * g_.out_h + oh) * g_.out_w * block;
                for (std::size_t i = 0, ow = 0; i < tiles; ++i) {
                    const std::size_t pixels = narrow + (i < wide_tiles ? 1 : 0);
                    finishes[obs - 1][pixels - 1](g_, e_, bias, residual, y, ob, out_row + ow * block,
                                                  row_levels + ow * max_obs * block, level_floats, occupied);
                    ow += pixels;
                }
            }
        }
    }
    std::size_t scratch_bytes() const override {
        return static_cast<std::size_t>(threads_) * (levels_ * g_.out_w * max_obs * block + g_.column_floats()) *
               sizeof(float);
    }

    bool keeps_own_copy(std::size_t index) const override {
        return index == 1;
    }
    std::size_t own_copy_bytes() const override {
        return weights_.size() * sizeof(float);
    }
    void restore_constant(std::size_t index, const argument& into) const override {
        if (index != 1) return cpu_kernel::restore_constant(index, into);
        const std::size_t m = plain_weights_.lens()[0], c = plain_weights_.lens()[1], taps = g_.taps();
        float* dst = into.data_as<float>();
        for (std::size_t o = 0; o < m; ++o)
            for (std::size_t i = 0; i < c; ++i)
                for (std::size_t t = 0; t < taps; ++t)
                    dst[(o * c + i) * taps + t] = weights_[packed_index(o, t * c + i, taps * c)];
    }

private:
    pairwise_geometry g_;
    epilogue e_;
    std::vector<float> weights_;
    shape plain_weights_;
    int threads_;
    std::size_t levels_;  // of the pairwise tree
};

}  // namespace

#endif

bool prefers_pairwise_sum(const shape& plain_output, std::size_t summed_channels) {
    // The high-resolution layers of an image network (56 x 56 in ResNet-50,
    // and the stem), whose rounding the rest of the network amplifies most.
    constexpr std::size_t min_pixels = 56 * 56;
    // A sum over two leaves of 16 or fewer is the running sum oneDNN makes
    // but for one add, and oneDNN is ~2x faster on such thin layers
    // (MobileNetV2's 32 -> 16 projection at 112 x 112).
    constexpr std::size_t max_running_sum = 32;
    const auto& l = plain_output.lens();
    return l.size() == 4 && l[2] * l[3] >= min_pixels && summed_channels > max_running_sum;
}

std::shared_ptr<const cpu_kernel> make_pairwise_sum_convolution_kernel(const op::fused_convolution& conv,
                                                                       const kernel_request& r) {
#if defined(__x86_64__)
    static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const shape& x = r.input_shapes[0];
    const shape& w = r.input_shapes[1];
    const argument& weights = r.constant_inputs[1];
    if (!supported || conv.input_layout != op::tensor_layout::nchw8c ||
        conv.output_layout != op::tensor_layout::nchw8c || conv.group != 1 || x.ndim() != 5 || w.ndim() != 4 ||
        x.type() != dtype::float_type || w.type() != dtype::float_type || !x.standard() || weights.empty() ||
        !weights.get_shape().standard() || w.lens()[0] % block != 0 || w.lens()[1] != x.lens()[1] * block ||
        !r.output_shape.standard())
        return nullptr;
    const std::size_t kernel_h = w.lens()[2], kernel_w = w.lens()[3];
    const ops::window window =
        ops::make_window(conv.name(), {kernel_h, kernel_w}, conv.padding, conv.stride, conv.dilation);
    // A 1 x 1 convolution reads its input rows in place: stride 1, no padding.
    if (kernel_h * kernel_w == 1) {
        for (auto p : window.pad_begin)
            if (p != 0) return nullptr;
        for (auto p : window.pad_end)
            if (p != 0) return nullptr;
        for (auto s : window.stride)
            if (s != 1) return nullptr;
    }
    epilogue e;
    e.has_bias = conv.has_bias;
    using kind = op::post_op_kind;
    const auto& kinds = conv.post.kinds;
    const bool plain_relu =
        std::all_of(conv.post.alpha.begin(), conv.post.alpha.end(), [](double a) { return a == 0; });
    if (kinds.empty())
        e.then = finish::none;
    else if (kinds == std::vector<kind>{kind::relu} && plain_relu)
        e.then = finish::relu;
    else if (kinds == std::vector<kind>{kind::add})
        e.then = finish::add;
    else if (kinds == std::vector<kind>{kind::add, kind::relu} && plain_relu)
        e.then = finish::add_relu;
    else
        return nullptr;
    for (std::size_t i = conv.first_post_operand(); i < r.input_shapes.size(); ++i)
        if (r.input_shapes[i].lens() != r.output_shape.lens() || !r.input_shapes[i].standard()) return nullptr;
    if (conv.has_bias && (!r.input_shapes[2].standard() || r.input_shapes[2].elements() != w.lens()[0])) return nullptr;
    const shape plain_y = conv.plain_output_shape(r.input_shapes);
    if (!prefers_pairwise_sum(plain_y, w.lens()[1] * kernel_h * kernel_w)) return nullptr;

    pairwise_geometry g;
    g.images = x.lens()[0];
    g.channel_blocks = x.lens()[1];
    g.kernel_h = kernel_h;
    g.kernel_w = kernel_w;
    g.window = window;
    g.in_blocks = g.channel_blocks * g.taps();
    g.in_h = x.lens()[2];
    g.in_w = x.lens()[3];
    g.out_blocks = w.lens()[0] / block;
    g.out_h = plain_y.lens()[2];
    g.out_w = plain_y.lens()[3];
    if (g.in_blocks >= (std::size_t{1} << max_levels)) return nullptr;
    return std::make_shared<pairwise_sum_convolution_kernel>(
        g, std::move(e), packed_weights(weights, w.lens()[0], w.lens()[1], g.taps()), weights.get_shape(), r.threads);
#else
    (void)conv;
    (void)r;
    return nullptr;
#endif
}

}  // namespace kiln
