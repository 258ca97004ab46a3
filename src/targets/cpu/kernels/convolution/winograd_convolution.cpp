// A 3 x 3 stride-1 convolution on blocked activations (nChw8c with AVX2,
// nChw16c with AVX-512: the same kernel over either block) by Winograd's
// F(2 x 2, 3 x 3): each 2 x 2 output tile is A^T [(G g G^T) . (B^T d B)] A
// over its 4 x 4 input patch d, 16 products per tile and channel pair
// instead of the direct form's 36, so 2.25x fewer multiplies. The transforms
// only add, subtract and halve (G), which keeps the float32 error close to
// the direct form's; F(4 x 4, 3 x 3) does fewer multiplies, but its
// transforms scale by 4, 5, 8 and 1/6 to 1/24, which costs several bits.
//
// The weights are transformed once, in float64, to U [16][M/8][C][8], kept
// followed by the plain weights (U cannot give them back exactly: it is
// rounded), so that a compiled file stores both and a load on the same CPU
// and Kiln version reads them in place, transforming nothing. At run
// time the tiles go in groups (2 MB of transformed input V [16][C/8][tiles][8],
// so that one element's slice, 128 KB, stays in L2 while every output block
// multiplies it and U is streamed once per group): the threads transform the
// group's input (channel blocks handed out as they ask), then take pairs of
// output channel blocks the same way and, element by element, multiply V by U with a
// register-blocked kernel (AVX2: 6 tiles x 16 output channels; AVX-512: 12
// tiles x 32), and finally transforms its products back, adding the bias and
// the post-ops. The transforms and the products are vector loops
// (winograd_vector_loops.hpp, built per instruction set); this file holds the
// kernel, the weight transform and the choice of groups.
//
// Accuracy: each run of a few input blocks is summed from zero and then
// added to the partial sum, as oneDNN's 1 x 1 kernel does: 32 channels
// (chunk_channels, whatever the block) below 56 x 56, 16 at 56 x 56 and above, the layers whose
// rounding the rest of an image network amplifies most (see
// pairwise_sum_convolution.cpp). Summing all C at once put a 64-channel
// 3 x 3 chain 1.5x ONNX Runtime's distance from float64 (im2col + oneDNN:
// 1.17x); 32 at a time 1.23x. An element's sum here runs over C products,
// not the direct form's 9C, so at 56 x 56 it stays about as accurate as the
// pairwise-sum kernel's: ResNet-50's logits over six random images, rms
// distance from float64 5.58e-6 with that kernel on its 56 x 56 3 x 3
// layers, 5.80e-6 with this one (ONNX Runtime 7.22e-6), for 1.8x less time.
// In 16-channel blocks, six-layer chains of He-initialised 3 x 3 layers stay
// 0.94-1.00x ONNX Runtime's distance from float64 at 64 to 512 channels
// (oneDNN's direct kernel 0.97-0.98x, oneDNN's Winograd 1.23x at 64).
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "ops/conv.hpp"
#include "targets/cpu/kernels/convolution/blocked_convolution_epilogue.hpp"
#include "targets/cpu/kernels/convolution/convolution_algorithms.hpp"
#include "targets/cpu/kernels/convolution/winograd_convolution_avx2.hpp"
#include "targets/cpu/kernels/convolution/winograd_convolution_avx512.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/own_packed_layout.hpp"
#include "targets/cpu/kernels/packed_constant_values.hpp"

namespace kiln {

namespace {

constexpr std::size_t elements = 16;                    // of a 4 x 4 transformed tile
constexpr std::size_t max_shared_u_bytes = 512 * 1024;  // transformed weights every thread may read
constexpr std::size_t chunk_channels = 32;  // input channels summed from zero before joining the partial sum
constexpr std::size_t high_resolution_chunk_channels = 16;  // the same at 56 x 56 and above
constexpr std::size_t high_resolution_pixels = 56 * 56;
constexpr std::size_t large_u_bytes = 8 * 1024 * 1024;  // transformed weights streamed once a larger group

std::size_t tiles_of(const winograd_geometry& g) {
    return g.images * g.tiles_h * g.tiles_w;
}

using blocked_convolution::epilogue;
using blocked_convolution::finish;

constexpr std::size_t taps = 9;

// The kernel's packed weights: U, then the plain [M, C, 3, 3] weights.
std::size_t packed_floats(std::size_t m, std::size_t c) {
    return (elements + taps) * m * c;
}

own_layout::geometry layout_geometry(std::size_t m, std::size_t c, std::size_t block) {
    return {{"out_channels", static_cast<std::int64_t>(m)},
            {"in_channels", static_cast<std::int64_t>(c)},
            {"block", static_cast<std::int64_t>(block)}};
}

// U = G g G^T for each (output, input) channel pair, in float64, stored as
// [element][M/block][C][block output lanes] at `out`.
void transform_weights(const argument& w, std::size_t m, std::size_t c, std::size_t block, float* out) {
    static constexpr double g_matrix[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
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
}

// U and the plain weights in one new buffer.
argument packed_weights(const argument& w, std::size_t m, std::size_t c, std::size_t block) {
    argument packed(shape(dtype::uint8_type, {packed_floats(m, c) * sizeof(float)}));
    float* out = packed.data_as<float>();
    transform_weights(w, m, c, block, out);
    std::memcpy(out + elements * m * c, w.data(), taps * m * c * sizeof(float));
    return packed;
}

class winograd_convolution_kernel final : public cpu_kernel {
public:
    // `packed`: U and the plain weights (packed_weights); `adopted` when they are a loaded file's bytes.
    winograd_convolution_kernel(const kernel_algorithm& algorithm, const winograd_loops& loops, winograd_geometry g,
                                epilogue e, std::size_t m, std::size_t c, argument packed, bool adopted, int threads)
        : algorithm_(algorithm),
          l_(loops),
          g_(g),
          e_(e),
          m_(m),
          c_(c),
          packed_(std::move(packed)),
          adopted_(adopted),
          threads_(threads) {}

    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        const float* x = inputs[0].data_as<float>();
        const blocked_convolution::epilogue_operands operands = blocked_convolution::operands_of(e_, inputs);
        const float* bias = operands.bias;
        const float* residual = operands.residual;
        float* y = result.data_as<float>();
        auto* v = reinterpret_cast<float*>(scratch);
        const std::size_t total_tiles = tiles_of(g_);
        const std::size_t block = l_.block, max_tiles = l_.max_tiles, max_obs = l_.max_obs;
        const std::size_t v_floats = elements * g_.in_blocks * g_.group_tiles * block;
        if (g_.own_tiles) {
            // The threads claim runs of tiles as they go (every output block of
            // each), in whole runs of max_tiles, or less when there are few tiles
            // (16 tiles, 2 threads: 8 each, not 12 and 4). Claimed, not split in
            // advance: on a shared machine a thread that lost its core for a
            // while leaves the rest to the other instead of making it wait.
            const auto compiled_threads = static_cast<std::size_t>(threads_);
            const std::size_t split = std::min(max_tiles, (total_tiles + compiled_threads - 1) / compiled_threads);
            const std::size_t run = std::min(split, g_.group_tiles);
            std::atomic<std::size_t> next{0};
#pragma omp parallel num_threads(threads_)
            {
                const auto thread = static_cast<std::size_t>(omp_get_thread_num());
                float* own_v = v + thread * (v_floats + products_floats());
                float* products = own_v + v_floats;
                for (std::size_t first = next.fetch_add(run); first < total_tiles; first = next.fetch_add(run)) {
                    const std::size_t count = std::min(run, total_tiles - first);
                    for (std::size_t cb = 0; cb < g_.in_blocks; ++cb)
                        l_.transform_input(g_, x, first, count, cb, own_v);
                    multiply_and_finish(own_v, first, count, 0, g_.out_blocks, products, bias, residual, y);
                }
            }
            return;
        }
        float* products_base = v + v_floats;
        const std::size_t ob_pairs = (g_.out_blocks + max_obs - 1) / max_obs;
        const std::size_t pairs = pairs_per_share();
        const std::size_t shares = (ob_pairs + pairs - 1) / pairs;
        // Input blocks and shares of output blocks are handed out as the threads
        // ask (dynamic), for the same reason as the tiles above.
#pragma omp parallel num_threads(threads_)
        {
            const auto thread = static_cast<std::size_t>(omp_get_thread_num());
            float* products = products_base + thread * products_floats();
            for (std::size_t first = 0; first < total_tiles; first += g_.group_tiles) {
                const std::size_t count = std::min(g_.group_tiles, total_tiles - first);
#pragma omp for schedule(dynamic)
                for (std::size_t cb = 0; cb < g_.in_blocks; ++cb) l_.transform_input(g_, x, first, count, cb, v);
                // Its closing barrier: the next group's input transform overwrites V.
#pragma omp for schedule(dynamic)
                for (std::size_t share = 0; share < shares; ++share)
                    multiply_and_finish(v, first, count, share * pairs * max_obs,
                                        std::min(g_.out_blocks, (share + 1) * pairs * max_obs), products, bias,
                                        residual, y);
            }
        }
    }

    std::size_t scratch_bytes() const override {
        const std::size_t v_floats = elements * g_.in_blocks * g_.group_tiles * l_.block;
        const auto threads = static_cast<std::size_t>(threads_);
        return (g_.own_tiles ? threads * (v_floats + products_floats()) : v_floats + threads * products_floats()) *
               sizeof(float);
    }

    // The plain weights ride behind U, so the literal's own bytes can go.
    bool keeps_own_copy(std::size_t index) const override {
        return index == 1;
    }
    // A loaded file's bytes read in place count as adopted, not as the kernel's own.
    std::size_t own_copy_bytes() const override {
        return adopted_ ? 0 : packed_.get_shape().bytes();
    }
    void restore_constant(std::size_t index, const argument& into) const override {
        if (index != 1) return cpu_kernel::restore_constant(index, into);
        std::memcpy(into.data(), plain_weights(), taps * m_ * c_ * sizeof(float));
    }
    std::shared_ptr<const packed_constant> packed_copy(std::size_t index) const override {
        if (index != 1) return nullptr;
        return own_layout::export_form(algorithm_.name, layout_geometry(m_, c_, l_.block), packed_);
    }
    std::size_t adopted_bytes() const override {
        return adopted_ ? packed_.get_shape().bytes() : 0;
    }

private:
    const float* u() const {
        return packed_.data_as<const float>();
    }
    const float* plain_weights() const {
        return u() + elements * m_ * c_;
    }

    // Pairs of output blocks in one share of shared tiles: two shares a thread,
    // so that one thread may take more when the other is held up, while each
    // share still multiplies the V element it reads by several pairs (one pair
    // a share re-read V per pair: 512 channels at 7 x 7, 6% slower).
    std::size_t pairs_per_share() const {
        const std::size_t ob_pairs = (g_.out_blocks + l_.max_obs - 1) / l_.max_obs;
        const std::size_t shares = 2 * static_cast<std::size_t>(threads_);
        return std::max<std::size_t>(1, (ob_pairs + shares - 1) / shares);
    }
    // Output blocks one thread multiplies at a time: all of them on its own
    // tiles, a share on shared ones.
    std::size_t max_products_blocks() const {
        return g_.own_tiles ? g_.out_blocks : std::min(g_.out_blocks, pairs_per_share() * l_.max_obs);
    }
    // One thread's products [16][its output blocks][group tiles][block].
    std::size_t products_floats() const {
        return elements * max_products_blocks() * g_.group_tiles * l_.block;
    }

    // Multiplies the group's V by U for output blocks [ob_begin, ob_end),
    // element by element, then transforms the products back into y.
    void multiply_and_finish(const float* v, std::size_t first, std::size_t count, std::size_t ob_begin,
                             std::size_t ob_end, float* products, const float* bias, const float* residual,
                             float* y) const {
        const std::size_t block = l_.block, max_tiles = l_.max_tiles, max_obs = l_.max_obs;
        const std::size_t v_element_floats = g_.in_blocks * g_.group_tiles * block;
        const std::size_t u_element_floats = g_.out_blocks * g_.in_blocks * block * block;
        const std::size_t u_ob_floats = g_.in_blocks * block * block;
        const std::size_t product_ob_floats = g_.group_tiles * block;
        const std::size_t product_element_floats = max_products_blocks() * product_ob_floats;
        for (std::size_t e = 0; e < elements; ++e) {
            const float* ve = v + e * v_element_floats;
            for (std::size_t ob = ob_begin; ob < ob_end; ob += max_obs) {
                const std::size_t obs = std::min(max_obs, ob_end - ob);
                const float* u = this->u() + e * u_element_floats + ob * u_ob_floats;
                float* p = products + e * product_element_floats + (ob - ob_begin) * product_ob_floats;
                // Runs of equal length (16 tiles: 8 + 8, not 12 + 4), so that no
                // short run loads U for few products.
                const std::size_t runs = (count + max_tiles - 1) / max_tiles;
                const std::size_t run_tiles = (count + runs - 1) / runs;
                for (std::size_t t = 0; t < count; t += run_tiles) {
                    const std::size_t tiles = std::min(run_tiles, count - t);
                    l_.multiply[(obs - 1) * max_tiles + tiles - 1](ve + t * block, g_.group_tiles * block, u,
                                                                   u_ob_floats, g_.in_blocks, p + t * block,
                                                                   product_ob_floats, g_.chunk_blocks);
                }
            }
        }
        const winograd_output_function finish_tiles = l_.output[static_cast<std::size_t>(e_.then)];
        for (std::size_t ob = ob_begin; ob < ob_end; ++ob)
            finish_tiles(g_, e_.has_bias, products + (ob - ob_begin) * product_ob_floats, product_element_floats, first,
                         count, ob, bias, residual, y);
    }

    const kernel_algorithm& algorithm_;  // which of the two (8- or 16-channel blocks), as a file names it
    const winograd_loops& l_;
    winograd_geometry g_;
    epilogue e_;
    std::size_t m_, c_;  // output and input channels
    argument packed_;    // U [16][M/block][C][block], then the plain weights [M][C][3][3]
    bool adopted_;
    int threads_;
};

}  // namespace

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

// Whether `loops` can run the request: its channel block's layout, 3 x 3
// stride 1, an epilogue the loops apply and enough tiles.
bool eligible_for(const kernel_request& r, const winograd_loops& loops) {
    const auto& conv = requested_convolution(r);
    const shape& w = r.input_shapes[1];
    if (!blocked_convolution::reads_blocked_float(conv, r, loops.block) || w.lens()[2] != 3 || w.lens()[3] != 3)
        return false;
    const ops::window window = window_of(conv);
    for (std::size_t i = 0; i < 2; ++i)
        if (window.stride[i] != 1 || window.dilation[i] != 1 || window.pad_begin[i] > 2) return false;
    return blocked_convolution::epilogue_of(conv, r, w.lens()[0]) &&
           prefers_winograd(conv.plain_output_shape(r.input_shapes));
}

bool eligible_8c(const kernel_request& r) {
    return avx2::supported() && eligible_for(r, avx2::winograd_loops_8c);
}

bool eligible_16c(const kernel_request& r) {
    return avx512::enabled() && eligible_for(r, avx512::winograd_loops_16c);
}

// Where the 16-channel loops run by default (measured at 1 thread, process
// CPU time, against oneDNN's direct kernel on chains of ResNet-50's 3 x 3
// layers): 1.8x as fast at 128 channels (28 x 28), 1.4-1.5x at 256 (14 x
// 14), batch 1 and 8; at 512 (7 x 7) 0.97-0.99x (batch 1) and 0.93x (batch
// 8), U (16 MB) streamed for few tiles, so oneDNN keeps those. Up to 64
// input channels oneDNN's own Winograd, listed before, is faster still
// (1.9x against this kernel's 1.4-1.55x at 64 x 56 x 56) and accurate enough
// there (onednn_winograd_convolution.cpp). Wider inputs run it only over
// enough tiles (a batch of 8 at 7 x 7: 128 tiles, 1.16x) to amortize U.
constexpr std::size_t min_default_in_channels = 65, max_default_in_channels = 256;
constexpr std::size_t min_default_wide_tiles = 64;

bool runs_by_default(const kernel_request& r) {
    const std::size_t c = r.input_shapes[1].lens()[1];
    const auto& y = r.output_shape.lens();  // [N, M / 16, H, W, 16]
    const std::size_t tiles = y[0] * ((y[2] + 1) / 2) * ((y[3] + 1) / 2);
    return c >= min_default_in_channels && (c <= max_default_in_channels || tiles >= min_default_wide_tiles);
}

bool eligible_16c_by_default(const kernel_request& r) {
    return eligible_16c(r) && runs_by_default(r);
}

bool eligible_16c_when_tuned(const kernel_request& r) {
    return eligible_16c(r) && !runs_by_default(r);
}

std::shared_ptr<const cpu_kernel> build_for(const kernel_request& r, const kernel_algorithm& algorithm,
                                            const winograd_loops& loops) {
    const auto& conv = requested_convolution(r);
    const shape& x = r.input_shapes[0];
    const shape& w = r.input_shapes[1];
    const ops::window window = window_of(conv);
    const epilogue e = *blocked_convolution::epilogue_of(conv, r, w.lens()[0]);
    const shape plain_y = conv.plain_output_shape(r.input_shapes);
    const std::size_t block = loops.block, max_tiles = loops.max_tiles;

    winograd_geometry g{};
    g.images = x.lens()[0];
    g.in_blocks = x.lens()[1];
    g.in_h = x.lens()[2];
    g.in_w = x.lens()[3];
    g.out_blocks = w.lens()[0] / block;
    g.out_h = plain_y.lens()[2];
    g.out_w = plain_y.lens()[3];
    g.pad_top = window.pad_begin[0];
    g.pad_left = window.pad_begin[1];
    // The same channels a run whatever the block, so the accuracy is too.
    g.chunk_blocks = std::max<std::size_t>(
        1, (g.out_h * g.out_w >= high_resolution_pixels ? high_resolution_chunk_channels : chunk_channels) / block);
    g.tiles_h = (g.out_h + 1) / 2;
    g.tiles_w = (g.out_w + 1) / 2;
    // With few output channels (DenseNet's 128 -> 32) U is small enough for
    // each thread to read all of it: the threads then split the tiles, each
    // transforming its own input into its own L2 with no barrier. They do so
    // too when there are fewer pairs of output blocks than threads (32
    // channels in 16-channel blocks: one pair), which would leave threads idle.
    const std::size_t u_bytes = elements * w.lens()[0] * w.lens()[1] * sizeof(float);
    const auto threads = static_cast<std::size_t>(r.threads);
    const std::size_t ob_pairs = (g.out_blocks + loops.max_obs - 1) / loops.max_obs;
    g.own_tiles = u_bytes <= max_shared_u_bytes && (tiles_of(g) >= 2 * max_tiles * threads || ob_pairs < threads);
    // A group's transformed input (16 x C floats a tile) near 2 MB shared (a
    // quarter of L2 when a thread's own), in whole runs of max_tiles. U of
    // 8 MB and more (512 x 512 channels) is streamed from memory once a
    // group: in 16-channel blocks (AVX-512 CPUs, 1 MB of L2 and more) groups
    // of 8 MB (an element's slice: 512 KB) then stream it once for a batch of
    // 8 at 7 x 7 instead of three times, 1.16x the speed of oneDNN's direct
    // kernel there instead of 0.92x (1 thread).
    const bool large_u = block == ops::avx512_channel_block && u_bytes >= large_u_bytes;
    const std::size_t group_bytes = g.own_tiles ? 128 * 1024 : large_u ? 8192 * 1024 : 2048 * 1024;
    const std::size_t per_tile = elements * g.in_blocks * block * sizeof(float);
    g.group_tiles = std::max<std::size_t>(max_tiles, group_bytes / per_tile / max_tiles * max_tiles);
    g.group_tiles = std::min(g.group_tiles, (tiles_of(g) + max_tiles - 1) / max_tiles * max_tiles);
    const std::size_t m = w.lens()[0], c = w.lens()[1];
    if (const packed_constant* form = own_layout::adoptable(r, 1, algorithm.name, layout_geometry(m, c, block),
                                                            packed_floats(m, c) * sizeof(float)))
        return std::make_shared<winograd_convolution_kernel>(algorithm, loops, g, e, m, c, form->bytes, true,
                                                             r.threads);
    return std::make_shared<winograd_convolution_kernel>(
        algorithm, loops, g, e, m, c, packed_weights(constant_values(r, 1), m, c, block), false, r.threads);
}

std::shared_ptr<const cpu_kernel> build_8c(const kernel_request& r, const kernel_builder&) {
    return build_for(r, winograd_convolution, avx2::winograd_loops_8c);
}

std::shared_ptr<const cpu_kernel> build_16c(const kernel_request& r, const kernel_builder&) {
    return build_for(r, winograd_convolution_avx512, avx512::winograd_loops_16c);
}

}  // namespace

argument winograd_restore_weights(const packed_constant& form, const shape& whole) {
    const auto m = static_cast<std::size_t>(own_layout::entry(form, "out_channels", 1, std::int64_t{1} << 24));
    const auto c = static_cast<std::size_t>(own_layout::entry(form, "in_channels", 1, std::int64_t{1} << 24));
    if (whole.type() != dtype::float_type || whole.elements() != taps * m * c)
        fail(error_kind::parse_error, "packed weights: a Winograd layout of " + std::to_string(m) + " x " +
                                          std::to_string(c) + " x 3 x 3 weights is stored for a " + to_string(whole) +
                                          " literal");
    own_layout::require_bytes(form, packed_floats(m, c) * sizeof(float));
    argument values(whole);
    std::memcpy(values.data(), form.bytes.data_as<const float>() + elements * m * c, whole.bytes());
    return values;
}

// 3 x 3 stride-1 layers with enough tiles: 2.25x fewer multiplies, on
// 8-channel blocks (AVX2) and on 16-channel ones (AVX-512).
const kernel_algorithm winograd_convolution{"winograd_f2x2_3x3", eligible_8c, build_8c};
// The same algorithm (one name, so a tuning cache or a file naming it finds
// either) in two entries of the list: where it runs by default, ahead of
// oneDNN, and elsewhere after oneDNN, where only exhaustive tuning reaches it.
const kernel_algorithm winograd_convolution_avx512{"winograd_f2x2_3x3_avx512", eligible_16c_by_default, build_16c};
const kernel_algorithm winograd_convolution_avx512_when_tuned{"winograd_f2x2_3x3_avx512", eligible_16c_when_tuned,
                                                              build_16c};

}  // namespace kiln
