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
// 3 x 3 stride-1 layers go to Winograd's F(2 x 2, 3 x 3) instead, whose
// sums run over C products rather than 9C (winograd_convolution.cpp).
// ResNet-50's logits come 0.8x as far from float64 as with oneDNN there
// (rms 7.2e-6 -> 5.7e-6, ONNX Runtime 6.7e-6).
//
// The k x k layers sum over im2col columns (tap-major): with stride 1 along
// the row a tap's columns are a run of one padded copy of the image, made
// once per image; otherwise a row's columns are built in the thread's
// scratch. The order of every sum is fixed by the description above and
// tests/python/test_cpu_convolution.py emulates it bit for bit; tiles, spans and
// threads only decide which outputs are summed together. The leaf sums, the
// tree's merges and the epilogue are AVX2 loops in
// pairwise_sum_convolution_avx2.cpp; this file holds the kernel, the weight
// packing, the im2col rows and the tree's bookkeeping.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "ops/conv.hpp"
#include "targets/cpu/kernels/convolution/blocked_convolution_epilogue.hpp"
#include "targets/cpu/kernels/convolution/convolution_algorithms.hpp"
#include "targets/cpu/kernels/convolution/pairwise_sum_convolution_avx2.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/own_packed_layout.hpp"
#include "targets/cpu/kernels/packed_constant_values.hpp"

namespace kiln {

namespace {

constexpr std::size_t block = ops::avx2_channel_block;  // eligible for nchw8c only
static_assert(block == avx2::pairwise_block);
constexpr std::size_t tile = avx2::pairwise_tile;
constexpr std::size_t max_obs = avx2::pairwise_max_obs;
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
    // A k x k layer of stride 1 along the row reads its columns from a
    // padded copy of the image; others build a row's columns.
    bool padded_input() const { return taps() > 1 && window.stride[1] == 1; }
    std::size_t padded_h() const { return in_h + window.pad_begin[0] + window.pad_end[0]; }
    std::size_t padded_w() const { return in_w + window.pad_begin[1] + window.pad_end[1]; }
    std::size_t column_floats() const { return taps() > 1 && !padded_input() ? in_blocks * out_w * block : 0; }
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
// residual add, or a residual add then relu (a template argument of the AVX2
// leaf sums, so the epilogue has no branch per vector).
using blocked_convolution::epilogue;
using blocked_convolution::finish;

// Weights [M, C] (C columns) as groups of max_obs output blocks (fewer in
// the last), each [C/8][8 input channels][blocks of the group][8 output
// lanes]: the microkernel reads one channel's weights for all its output
// blocks at fixed offsets from one pointer. `blk` and `obs_group` are this
// build's block and max_obs, or a compiled file's (restoring its weights).
std::size_t packed_index(std::size_t o, std::size_t i, std::size_t c, std::size_t m, std::size_t blk = block,
                         std::size_t obs_group = max_obs) {
    const std::size_t ob = o / blk, group = ob / obs_group * obs_group, obs = std::min(obs_group, m / blk - group);
    return group * c * blk + (i * obs + ob - group) * blk + o % blk;
}

// What fixes the packed layout, as a compiled file records it.
own_layout::geometry layout_geometry(std::size_t m, std::size_t c, std::size_t taps) {
    return {{"out_channels", static_cast<std::int64_t>(m)},
            {"in_channels", static_cast<std::int64_t>(c)},
            {"taps", static_cast<std::int64_t>(taps)},
            {"block", static_cast<std::int64_t>(block)},
            {"obs_group", static_cast<std::int64_t>(max_obs)}};
}

// Weights [M, C, KH, KW]: column t * C + i is input channel i at tap t.
argument packed_weights(const argument& w, std::size_t m, std::size_t c, std::size_t taps) {
    argument out(shape(dtype::uint8_type, {m * c * taps * sizeof(float)}));
    const float* src = w.data_as<float>();
    float* dst = out.data_as<float>();
    for (std::size_t o = 0; o < m; ++o)
        for (std::size_t i = 0; i < c; ++i)
            for (std::size_t t = 0; t < taps; ++t)
                dst[packed_index(o, t * c + i, taps * c, m)] = src[(o * c + i) * taps + t];
    return out;
}

// The inverse of packed_weights, for a layout of block `blk` and group `obs_group`.
void unpack_weights(const float* packed, std::size_t m, std::size_t c, std::size_t taps, std::size_t blk,
                    std::size_t obs_group, float* dst) {
    for (std::size_t o = 0; o < m; ++o)
        for (std::size_t i = 0; i < c; ++i)
            for (std::size_t t = 0; t < taps; ++t)
                dst[(o * c + i) * taps + t] = packed[packed_index(o, t * c + i, taps * c, m, blk, obs_group)];
}

// Levels the pairwise tree needs for `leaves` leaves: one per bit.
std::size_t tree_levels(std::size_t leaves) {
    std::size_t levels = 1;
    while ((std::size_t{1} << levels) <= leaves) ++levels;
    return levels;
}

class pairwise_sum_convolution_kernel final : public cpu_kernel {
public:
    // `weights`: packed_weights' bytes; `adopted` when they are a loaded file's.
    pairwise_sum_convolution_kernel(pairwise_geometry g, epilogue e, argument weights, bool adopted,
                                    shape plain_weights, int threads)
        : g_(g),
          e_(std::move(e)),
          weights_(std::move(weights)),
          adopted_(adopted),
          plain_weights_(std::move(plain_weights)),
          threads_(threads),
          levels_(tree_levels((g_.in_blocks + leaf_blocks - 1) / leaf_blocks)) {}

    // Threads take output rows; for each pair of output blocks a row's
    // tiles are summed leaf by leaf (see avx2::pairwise_leaf_pass). A k x k layer of stride
    // 1 along the row first copies each image once with its padding, so a
    // tap's columns are a run of that copy; other k x k layers build a row's
    // columns in the thread's scratch.
    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        const float* x = inputs[0].data_as<float>();
        const blocked_convolution::epilogue_operands operands = blocked_convolution::operands_of(e_, inputs);
        const float* bias = operands.bias;
        const float* residual = operands.residual;
        float* y = result.data_as<float>();
        float* padded = reinterpret_cast<float*>(scratch);
        float* thread_areas = padded + padded_floats();
        const std::size_t thread_floats = levels_ * level_floats() + g_.column_floats();
        const std::size_t image_floats = g_.channel_blocks * g_.in_h * g_.in_w * block;
#pragma omp parallel num_threads(threads_)
        {
            float* own = thread_areas + static_cast<std::size_t>(omp_get_thread_num()) * thread_floats;
            const row_sums sums{x, bias, residual, y, padded, own};
            if (g_.padded_input()) {
                const auto padded_rows = static_cast<std::ptrdiff_t>(g_.channel_blocks * g_.padded_h());
                const auto out_rows = static_cast<std::ptrdiff_t>(g_.out_h);
                for (std::size_t n = 0; n < g_.images; ++n) {
#pragma omp for schedule(static)
                    for (std::ptrdiff_t r = 0; r < padded_rows; ++r)
                        fill_padded_row(x + n * image_floats, static_cast<std::size_t>(r), padded);
#pragma omp for schedule(static)
                    for (std::ptrdiff_t r = 0; r < out_rows; ++r) {
                        const auto oh = static_cast<std::size_t>(r);
                        sum_span(sums, n, oh, oh * g_.out_w, g_.out_w);
                    }
                }
            } else if (g_.taps() > 1) {
                const auto rows = static_cast<std::ptrdiff_t>(g_.images * g_.out_h);
#pragma omp for schedule(static)
                for (std::ptrdiff_t r = 0; r < rows; ++r) {
                    const auto row = static_cast<std::size_t>(r);
                    const std::size_t oh = row % g_.out_h;
                    sum_span(sums, row / g_.out_h, oh, oh * g_.out_w, g_.out_w);
                }
            } else {
                // A 1 x 1 layer's pixels are one run per channel block, so
                // each thread takes an equal part of every image (in whole
                // tiles) in spans that tile with few narrow tiles.
                const std::size_t plane = g_.out_h * g_.out_w, parts = static_cast<std::size_t>(threads_);
                const auto items = static_cast<std::ptrdiff_t>(g_.images * parts);
#pragma omp for schedule(static)
                for (std::ptrdiff_t i = 0; i < items; ++i) {
                    const std::size_t n = static_cast<std::size_t>(i) / parts,
                                      part = static_cast<std::size_t>(i) % parts;
                    const std::size_t begin = plane * part / parts / tile * tile;
                    const std::size_t end = part + 1 == parts ? plane : plane * (part + 1) / parts / tile * tile;
                    for (std::size_t q = begin; q < end; q += span_pixels())
                        sum_span(sums, n, 0, q, std::min(span_pixels(), end - q));
                }
            }
        }
    }
    std::size_t scratch_bytes() const override {
        return (padded_floats() +
                static_cast<std::size_t>(threads_) * (levels_ * level_floats() + g_.column_floats())) *
               sizeof(float);
    }

    bool keeps_own_copy(std::size_t index) const override {
        return index == 1;
    }
    // A loaded file's bytes read in place count as adopted, not as the kernel's own.
    std::size_t own_copy_bytes() const override {
        return adopted_ ? 0 : weights_.get_shape().bytes();
    }
    void restore_constant(std::size_t index, const argument& into) const override {
        if (index != 1) return cpu_kernel::restore_constant(index, into);
        unpack_weights(weights_.data_as<const float>(), plain_weights_.lens()[0], plain_weights_.lens()[1], g_.taps(),
                       block, max_obs, into.data_as<float>());
    }
    std::shared_ptr<const packed_constant> packed_copy(std::size_t index) const override {
        if (index != 1) return nullptr;
        return own_layout::export_form(pairwise_sum_convolution.name,
                                       layout_geometry(plain_weights_.lens()[0], plain_weights_.lens()[1], g_.taps()),
                                       weights_);
    }
    std::size_t adopted_bytes() const override { return adopted_ ? weights_.get_shape().bytes() : 0; }

private:
    struct row_sums {
        const float* x;
        const float* bias;
        const float* residual;
        float* y;
        const float* padded;  // the image with its padding (padded_input)
        float* own;           // the thread's levels, then its row columns
    };

    // Output pixels summed together: a row of a k x k layer, a span of a 1 x 1 one.
    std::size_t span_pixels() const {
        constexpr std::size_t span_1x1 = 10 * tile;
        return g_.taps() > 1 ? g_.out_w : std::min(span_1x1, g_.out_h * g_.out_w);
    }
    std::size_t level_floats() const {
        return span_pixels() * max_obs * block;
    }
    std::size_t padded_floats() const {
        // rounded up to a cache line, so the threads' scratch starts on one
        return g_.padded_input() ? (g_.channel_blocks * g_.padded_h() * g_.padded_w() * block + 15) / 16 * 16 : 0;
    }

    // Row r of the padded image [C/8][padded_h][padded_w][8] from image `x`.
    void fill_padded_row(const float* x, std::size_t r, float* padded) const {
        const std::size_t cb = r / g_.padded_h(), py = r % g_.padded_h(), pw = g_.padded_w();
        float* out = padded + r * pw * block;
        const std::size_t top = g_.window.pad_begin[0], left = g_.window.pad_begin[1];
        if (py < top || py >= top + g_.in_h) {
            std::fill_n(out, pw * block, 0.f);
            return;
        }
        std::fill_n(out, left * block, 0.f);
        std::memcpy(out + left * block, x + (cb * g_.in_h + py - top) * g_.in_w * block,
                    g_.in_w * block * sizeof(float));
        std::fill_n(out + (left + g_.in_w) * block, (pw - left - g_.in_w) * block, 0.f);
    }

    // Output pixels [first, first + width) of image `n`, every output block:
    // within row `oh` for a k x k layer, anywhere in the plane for 1 x 1.
    void sum_span(const row_sums& s, std::size_t n, std::size_t oh, std::size_t first, std::size_t width) const {
        const std::size_t weight_ob = g_.in_blocks * block * block;
        const std::size_t taps = g_.taps();
        float* columns = s.own + levels_ * level_floats();
        if (taps > 1 && !g_.padded_input())
            fill_row_columns(g_, s.x + n * g_.channel_blocks * g_.in_h * g_.in_w * block, oh, columns);
        // Where input block b (tap-major for k x k) has the span's first pixel.
        const auto block_row = [&](std::size_t b) -> const float* {
            if (taps == 1) return s.x + ((n * g_.in_blocks + b) * g_.in_h * g_.in_w + first) * block;
            if (!g_.padded_input()) return columns + b * g_.out_w * block;
            const std::size_t tap = b / g_.channel_blocks, cb = b % g_.channel_blocks;
            const std::size_t py = oh * g_.window.stride[0] + tap / g_.kernel_w * g_.window.dilation[0];
            const std::size_t px = tap % g_.kernel_w * g_.window.dilation[1];
            return s.padded + ((cb * g_.padded_h() + py) * g_.padded_w() + px) * block;
        };
        // Tiles of equal width (56 = 6 x 6 + 4 x 5, not 9 x 6 + 2): a narrow
        // tile has too few independent sums to hide the FMA latency.
        const std::size_t tiles = (width + tile - 1) / tile, narrow = width / tiles, wide_tiles = width % tiles;
        const std::size_t leaves = (g_.in_blocks + leaf_blocks - 1) / leaf_blocks;
        const avx2::pairwise_leaf_table& last_functions =
            avx2::pairwise_last_leaf_functions[static_cast<std::size_t>(e_.then)];
        for (std::size_t ob = 0; ob < g_.out_blocks; ob += max_obs) {
            const std::size_t obs = std::min(max_obs, g_.out_blocks - ob);
            avx2::pairwise_leaf_pass a{};
            a.levels = s.own;
            a.level_floats = level_floats();
            std::uint32_t occupied = 0;
            for (std::size_t leaf = 0; leaf < leaves; ++leaf) {
                const std::size_t cb = leaf * leaf_blocks;
                a.x0 = block_row(cb);
                a.x1 = cb + 1 < g_.in_blocks ? block_row(cb + 1) : nullptr;
                a.w = weights_.data_as<const float>() + ob * weight_ob + cb * block * block * obs;
                // Binary counter: level l holds the sum of 2^l leaves; equal sizes merge.
                a.merges = 0;
                while (occupied & (1u << a.merges)) ++a.merges;
                const bool last = leaf + 1 == leaves;
                const avx2::pairwise_leaf_table& functions =
                    last ? last_functions : avx2::pairwise_inner_leaf_functions;
                if (last) {
                    a.upper = occupied >> (a.merges + 1);
                    a.bias = s.bias != nullptr ? s.bias + ob * block : nullptr;
                    const std::size_t out_row = ((n * g_.out_blocks + ob) * g_.out_h * g_.out_w + first) * block;
                    a.residual = s.residual != nullptr ? s.residual + out_row : nullptr;
                    a.y = s.y + out_row;
                    a.out_ob = g_.out_h * g_.out_w * block;
                }
                if (wide_tiles > 0) functions.by_size[obs - 1][narrow](a, 0, wide_tiles);
                functions.by_size[obs - 1][narrow - 1](a, wide_tiles * (narrow + 1), tiles - wide_tiles);
                occupied = (occupied & ~((1u << a.merges) - 1)) | (1u << a.merges);
            }
        }
    }

    pairwise_geometry g_;
    epilogue e_;
    argument weights_;  // packed_weights' layout, float32 bytes
    bool adopted_;
    shape plain_weights_;
    int threads_;
    std::size_t levels_;  // of the pairwise tree
};

}  // namespace

namespace {

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

}  // namespace

namespace {

ops::window window_of(const op::fused_convolution& conv, const shape& w) {
    return ops::make_window(conv.name(), {w.lens()[2], w.lens()[3]}, conv.conv.padding, conv.conv.stride,
                            conv.conv.dilation);
}

bool eligible(const kernel_request& r) {
    const auto& conv = requested_convolution(r);
    const shape& x = r.input_shapes[0];
    const shape& w = r.input_shapes[1];
    if (!avx2::supported() || !blocked_convolution::reads_blocked_float(conv, r)) return false;
    const std::size_t kernel_h = w.lens()[2], kernel_w = w.lens()[3];
    const ops::window window = window_of(conv, w);
    // A 1 x 1 convolution reads its input rows in place: stride 1, no padding.
    if (kernel_h * kernel_w == 1) {
        for (auto p : window.pad_begin)
            if (p != 0) return false;
        for (auto p : window.pad_end)
            if (p != 0) return false;
        for (auto s : window.stride)
            if (s != 1) return false;
    }
    return blocked_convolution::epilogue_of(conv, r, w.lens()[0]) &&
           prefers_pairwise_sum(conv.plain_output_shape(r.input_shapes), w.lens()[1] * kernel_h * kernel_w) &&
           x.lens()[1] * kernel_h * kernel_w < (std::size_t{1} << max_levels);
}

std::shared_ptr<const cpu_kernel> build(const kernel_request& r, const kernel_builder&) {
    const auto& conv = requested_convolution(r);
    const shape& x = r.input_shapes[0];
    const shape& w = r.input_shapes[1];
    const std::size_t kernel_h = w.lens()[2], kernel_w = w.lens()[3];
    const ops::window window = window_of(conv, w);
    const epilogue e = *blocked_convolution::epilogue_of(conv, r, w.lens()[0]);
    const shape plain_y = conv.plain_output_shape(r.input_shapes);

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
    const std::size_t m = w.lens()[0], c = w.lens()[1];
    const shape plain_weights = w.as_standard();
    if (const packed_constant* form = own_layout::adoptable(r, 1, pairwise_sum_convolution.name,
                                                            layout_geometry(m, c, g.taps()), plain_weights.bytes()))
        return std::make_shared<pairwise_sum_convolution_kernel>(g, std::move(e), form->bytes, true, plain_weights,
                                                                 r.threads);
    return std::make_shared<pairwise_sum_convolution_kernel>(
        g, std::move(e), packed_weights(constant_values(r, 1), m, c, g.taps()), false, plain_weights, r.threads);
}

}  // namespace

argument pairwise_sum_restore_weights(const packed_constant& form, const shape& whole) {
    constexpr std::int64_t most = std::int64_t{1} << 24;
    const auto m = static_cast<std::size_t>(own_layout::entry(form, "out_channels", 1, most));
    const auto c = static_cast<std::size_t>(own_layout::entry(form, "in_channels", 1, most));
    const auto taps = static_cast<std::size_t>(own_layout::entry(form, "taps", 1, most));
    const auto blk = static_cast<std::size_t>(own_layout::entry(form, "block", 1, 64));
    const auto obs_group = static_cast<std::size_t>(own_layout::entry(form, "obs_group", 1, 64));
    if (whole.type() != dtype::float_type || whole.elements() != m * c * taps || m % blk != 0)
        fail(error_kind::parse_error, "packed weights: a pairwise-sum layout of " + std::to_string(m) + " x " +
                                          std::to_string(c) + " x " + std::to_string(taps) + " weights in blocks of " +
                                          std::to_string(blk) + " is stored for a " + to_string(whole) + " literal");
    own_layout::require_bytes(form, whole.bytes());
    argument values(whole);
    unpack_weights(form.bytes.data_as<const float>(), m, c, taps, blk, obs_group, values.data_as<float>());
    return values;
}

// The high-resolution layers, summed pairwise for float32 accuracy.
const kernel_algorithm pairwise_sum_convolution{"pairwise_sum", eligible, build};

}  // namespace kiln
