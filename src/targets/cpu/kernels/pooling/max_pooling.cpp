// 2-D max pooling on float32 NCHW, Kiln's own kernel: oneDNN's drops NaNs,
// and ONNX and PyTorch propagate them. Planes run in parallel; within a
// plane, each output scans the part of its window inside the input (a
// window entirely in padding yields -inf, as the reference does). The
// blocked layouts [N, C/b, H, W, b] arrive as 3-D pooling with a unit window
// over the b channels of a block (see propagate_blocked_layout); there a
// plane is a block, and each window position is b adjacent floats.
#include <cmath>
#include <limits>

#include "ops/blocked_layout.hpp"
#include "ops/conv.hpp"
#include "ops/pool.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/pooling/blocked_max_pooling_avx512.hpp"
#include "targets/cpu/kernels/pooling/pooling_algorithms.hpp"

namespace kiln {

namespace {

class max_pooling_kernel final : public cpu_kernel {
public:
    explicit max_pooling_kernel(ops::window w) : w_(std::move(w)) {}

    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        const shape& xs = inputs[0].get_shape();
        const shape& ys = result.get_shape();
        const auto& xl = xs.lens();
        const auto& xst = xs.strides();
        const std::size_t oh_count = ys.lens()[2], ow_count = ys.lens()[3];
        const auto planes = static_cast<std::ptrdiff_t>(xl[0] * xl[1]);
        const float* x = inputs[0].data_as<float>();
        float* y = result.data_as<float>();
#pragma omp parallel for schedule(static)
        for (std::ptrdiff_t p = 0; p < planes; ++p) {
            const auto n = static_cast<std::size_t>(p) / xl[1], c = static_cast<std::size_t>(p) % xl[1];
            const float* plane = x + n * xst[0] + c * xst[1];
            float* out = y + static_cast<std::size_t>(p) * oh_count * ow_count;
            for (std::size_t oh = 0; oh < oh_count; ++oh)
                for (std::size_t ow = 0; ow < ow_count; ++ow)
                    out[oh * ow_count + ow] = window_max(plane, xl[2], xl[3], xst[2], xst[3], oh, ow);
        }
    }

private:
    float window_max(const float* plane, std::size_t h, std::size_t w, std::size_t sh, std::size_t sw, std::size_t oh,
                     std::size_t ow) const {
        float best = -std::numeric_limits<float>::infinity();
        const auto h0 = static_cast<std::ptrdiff_t>(oh * w_.stride[0]) - static_cast<std::ptrdiff_t>(w_.pad_begin[0]);
        const auto w0 = static_cast<std::ptrdiff_t>(ow * w_.stride[1]) - static_cast<std::ptrdiff_t>(w_.pad_begin[1]);
        for (std::size_t i = 0; i < w_.kernel[0]; ++i) {
            const auto r = h0 + static_cast<std::ptrdiff_t>(i * w_.dilation[0]);
            if (r < 0 || r >= static_cast<std::ptrdiff_t>(h)) continue;
            for (std::size_t j = 0; j < w_.kernel[1]; ++j) {
                const auto col = w0 + static_cast<std::ptrdiff_t>(j * w_.dilation[1]);
                if (col < 0 || col >= static_cast<std::ptrdiff_t>(w)) continue;
                const float v = plane[static_cast<std::size_t>(r) * sh + static_cast<std::size_t>(col) * sw];
                if (std::isnan(v)) return v;
                best = v > best ? v : best;
            }
        }
        return best;
    }

    ops::window w_;
};

// The same over [N, C/Lanes, H, W, Lanes] (standard strides), Lanes channels at a time.
template <std::size_t Lanes>
class blocked_max_pooling_kernel final : public cpu_kernel {
public:
    explicit blocked_max_pooling_kernel(ops::window w) : w_(std::move(w)) {}

    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        const auto& xl = inputs[0].get_shape().lens();
        const auto& yl = result.get_shape().lens();
        const std::size_t h = xl[2], w = xl[3], oh_count = yl[2], ow_count = yl[3];
        const auto planes = static_cast<std::ptrdiff_t>(xl[0] * xl[1]);
        const float* x = inputs[0].data_as<float>();
        float* y = result.data_as<float>();
#pragma omp parallel for schedule(static)
        for (std::ptrdiff_t p = 0; p < planes; ++p) {
            const float* plane = x + static_cast<std::size_t>(p) * h * w * lanes;
            float* out = y + static_cast<std::size_t>(p) * oh_count * ow_count * lanes;
            for (std::size_t oh = 0; oh < oh_count; ++oh)
                for (std::size_t ow = 0; ow < ow_count; ++ow)
                    window_max(plane, h, w, oh, ow, out + (oh * ow_count + ow) * lanes);
        }
    }

private:
    static constexpr std::size_t lanes = Lanes;

    // The taps of one window inside the input, along one dimension.
    struct tap_range {
        std::size_t first = 0, count = 0;
    };
    static tap_range inside(std::size_t o, std::size_t stride, std::size_t pad, std::size_t dilation,
                            std::size_t kernel, std::size_t extent) {
        const auto start = static_cast<std::ptrdiff_t>(o * stride) - static_cast<std::ptrdiff_t>(pad);
        tap_range t;
        auto d = static_cast<std::ptrdiff_t>(dilation);
        while (t.first < kernel && start + static_cast<std::ptrdiff_t>(t.first) * d < 0) ++t.first;
        std::size_t last = t.first;
        while (last < kernel && start + static_cast<std::ptrdiff_t>(last) * d < static_cast<std::ptrdiff_t>(extent))
            ++last;
        t.count = last - t.first;
        return t;
    }

    void window_max(const float* plane, std::size_t h, std::size_t w, std::size_t oh, std::size_t ow,
                    float* out) const {
        float best[lanes];
        for (std::size_t k = 0; k < lanes; ++k) best[k] = -std::numeric_limits<float>::infinity();
        const tap_range rows = inside(oh, w_.stride[0], w_.pad_begin[0], w_.dilation[0], w_.kernel[0], h);
        const tap_range cols = inside(ow, w_.stride[1], w_.pad_begin[1], w_.dilation[1], w_.kernel[1], w);
        if (rows.count == 0 || cols.count == 0) {  // the window lies wholly in padding
            for (std::size_t k = 0; k < lanes; ++k) out[k] = best[k];
            return;
        }
        const std::size_t r0 = oh * w_.stride[0] + rows.first * w_.dilation[0] - w_.pad_begin[0];
        const std::size_t c0 = ow * w_.stride[1] + cols.first * w_.dilation[1] - w_.pad_begin[1];
        for (std::size_t i = 0; i < rows.count; ++i) {
            const float* row = plane + ((r0 + i * w_.dilation[0]) * w + c0) * lanes;
            for (std::size_t j = 0; j < cols.count; ++j) {
                const float* v = row + j * w_.dilation[1] * lanes;
                // A NaN wins and then stays: nothing compares greater than it.
#pragma omp simd
                for (std::size_t k = 0; k < lanes; ++k) {
                    const float a = v[k], b = best[k];
                    best[k] = ((a > b) | (a != a)) ? a : b;
                }
            }
        }
        for (std::size_t k = 0; k < lanes; ++k) out[k] = best[k];
    }

    ops::window w_;
};

// Whether a 3-D window over [N, C/b, H, W, b] is 2-D pooling of the blocked
// layout: one element, no padding and stride 1 along the block's channels.
bool blocked_layout_window(const shape& x, const ops::window& w) {
    return x.ndim() == 5 && x.standard() && w.kernel[2] == 1 && w.stride[2] == 1 && w.pad_begin[2] == 0 &&
           w.pad_end[2] == 0;
}

// The AVX-512 loop over [N, C/16, H, W, 16] (blocked_max_pooling_avx512.hpp);
// planes run in parallel as in the portable kernels.
class blocked_max_pooling_avx512_kernel final : public cpu_kernel {
public:
    explicit blocked_max_pooling_avx512_kernel(const ops::window& w) {
        for (std::size_t d = 0; d < 2; ++d) {
            args_.kernel[d] = w.kernel[d];
            args_.stride[d] = w.stride[d];
            args_.dilation[d] = w.dilation[d];
            args_.pad_begin[d] = w.pad_begin[d];
        }
    }

    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        const auto& xl = inputs[0].get_shape().lens();
        const auto& yl = result.get_shape().lens();
        avx512::blocked_max_pooling_args a = args_;
        a.x = inputs[0].data_as<float>();
        a.y = result.data_as<float>();
        a.h = xl[2];
        a.w = xl[3];
        a.out_h = yl[2];
        a.out_w = yl[3];
        const auto planes = static_cast<std::ptrdiff_t>(xl[0] * xl[1]);
#pragma omp parallel for schedule(static)
        for (std::ptrdiff_t p = 0; p < planes; ++p)
            avx512::blocked_max_pooling(a, static_cast<std::size_t>(p), static_cast<std::size_t>(p) + 1);
    }

private:
    avx512::blocked_max_pooling_args args_{};
};

ops::window window_of(const op::pooling& pool, const shape& x) {
    std::vector<std::size_t> spatial(x.lens().begin() + 2, x.lens().end());
    return pool.global ? ops::make_window(pool.name(), spatial, {}, {}, {})
                       : ops::make_window(pool.name(),
                                          std::vector<std::size_t>(pool.lengths.begin(), pool.lengths.end()),
                                          pool.padding, pool.stride, pool.dilation);
}

bool eligible(const kernel_request& r) {
    const auto* pool = r.op.get_if<op::pooling>();
    const shape& x = r.input_shapes[0];
    return pool != nullptr && pool->mode == op::pooling_mode::max && x.type() == dtype::float_type &&
           (x.ndim() == 4 || x.ndim() == 5);
}

std::shared_ptr<const cpu_kernel> build(const kernel_request& r, const kernel_builder&) {
    const auto* pool = r.op.get_if<op::pooling>();
    const shape& x = r.input_shapes[0];
    ops::window w = window_of(*pool, x);
    if (x.ndim() == 4) return std::make_shared<max_pooling_kernel>(std::move(w));
    if (blocked_layout_window(x, w) && x.lens()[4] == ops::avx2_channel_block)
        return std::make_shared<blocked_max_pooling_kernel<ops::avx2_channel_block>>(std::move(w));
    if (blocked_layout_window(x, w) && x.lens()[4] == ops::avx512_channel_block)
        return std::make_shared<blocked_max_pooling_kernel<ops::avx512_channel_block>>(std::move(w));
    return nullptr;
}

bool eligible_avx512(const kernel_request& r) {
    if (!eligible(r) || !avx512::enabled()) return false;
    const shape& x = r.input_shapes[0];
    return x.ndim() == 5 && x.lens()[4] == ops::avx512_channel_block &&
           blocked_layout_window(x, window_of(*r.op.get_if<op::pooling>(), x));
}

std::shared_ptr<const cpu_kernel> build_avx512(const kernel_request& r, const kernel_builder&) {
    return std::make_shared<blocked_max_pooling_avx512_kernel>(
        window_of(*r.op.get_if<op::pooling>(), r.input_shapes[0]));
}

}  // namespace

const kernel_algorithm max_pooling{"max_pooling", eligible, build};
const kernel_algorithm max_pooling_avx512{"max_pooling_avx512", eligible_avx512, build_avx512};

}  // namespace kiln
