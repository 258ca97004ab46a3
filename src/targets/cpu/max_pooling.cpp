// 2-D max pooling on float32 NCHW, Kiln's own kernel: oneDNN's drops NaNs,
// and ONNX and PyTorch propagate them. Planes run in parallel; within a
// plane, each output scans the part of its window inside the input (a
// window entirely in padding yields -inf, as the reference does).
#include <cmath>
#include <limits>

#include "ops/conv.hpp"
#include "ops/pool.hpp"
#include "targets/cpu/cpu_kernels.hpp"

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
    float window_max(const float* plane, std::size_t h, std::size_t w, std::size_t sh, std::size_t sw,
                     std::size_t oh, std::size_t ow) const {
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

}  // namespace

std::shared_ptr<const cpu_kernel> make_max_pooling_kernel(const kernel_request& r) {
    const auto* pool = r.op.get_if<op::pooling>();
    const shape& x = r.input_shapes[0];
    if (pool == nullptr || pool->mode != op::pooling_mode::max || x.type() != dtype::float_type || x.ndim() != 4)
        return nullptr;
    std::vector<std::size_t> spatial(x.lens().begin() + 2, x.lens().end());
    if (pool->global) return std::make_shared<max_pooling_kernel>(ops::make_window(pool->name(), spatial, {}, {}, {}));
    std::vector<std::size_t> kernel(pool->lengths.begin(), pool->lengths.end());
    return std::make_shared<max_pooling_kernel>(
        ops::make_window(pool->name(), kernel, pool->padding, pool->stride, pool->dilation));
}

}  // namespace kiln
