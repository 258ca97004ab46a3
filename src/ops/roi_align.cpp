#include "ops/roi_align.hpp"

#include <algorithm>
#include <cmath>

#include "ops/op_helpers.hpp"

namespace kiln::op {

namespace {

// One bilinear sample: four (row, col) corners and their weights; all
// weights zero for a sample outside the input.
struct sample {
    std::size_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;
    double w[4] = {0, 0, 0, 0};
};

// Clamp one coordinate and find its low/high neighbours and fraction.
void neighbours(double v, std::size_t len, std::size_t& lo, std::size_t& hi, double& frac) {
    v = std::max(v, 0.0);
    lo = static_cast<std::size_t>(v);
    if (lo >= len - 1) {
        lo = hi = len - 1;
        frac = 0;
    } else {
        hi = lo + 1;
        frac = v - static_cast<double>(lo);
    }
}

sample make_sample(double y, double x, std::size_t h, std::size_t w) {
    sample s;
    if (y < -1.0 || y > static_cast<double>(h) || x < -1.0 || x > static_cast<double>(w)) return s;
    double ly = 0, lx = 0;
    neighbours(y, h, s.y0, s.y1, ly);
    neighbours(x, w, s.x0, s.x1, lx);
    s.w[0] = (1 - ly) * (1 - lx);
    s.w[1] = (1 - ly) * lx;
    s.w[2] = ly * (1 - lx);
    s.w[3] = ly * lx;
    return s;
}

}  // namespace

shape roi_align::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 3);
    const shape& x = inputs[0];
    const shape& rois = inputs[1];
    const shape& idx = inputs[2];
    ops::expect_floating(name(), x, "x");
    if (rois.type() != x.type()) fail("roi_align: rois must have the type of x");
    if (!is_integral(idx.type())) fail("roi_align: batch_indices must hold integers");
    if (x.ndim() != 4) fail("roi_align: x must be [N, C, H, W], got " + to_string(x.lens()));
    if (rois.ndim() != 2 || rois.lens()[1] != 4) fail("roi_align: rois must be [R, 4], got " + to_string(rois.lens()));
    if (idx.ndim() != 1 || idx.lens()[0] != rois.lens()[0])
        fail("roi_align: batch_indices must be [R] matching rois, got " + to_string(idx.lens()));
    if (output_height < 1 || output_width < 1) fail("roi_align: output_height and output_width must be positive");
    if (sampling_ratio < 0) fail("roi_align: sampling_ratio must be non-negative");
    if (x.lens()[2] == 0 || x.lens()[3] == 0) fail("roi_align: x must have non-empty spatial dims");
    return {x.type(),
            {rois.lens()[0], x.lens()[1], static_cast<std::size_t>(output_height),
             static_cast<std::size_t>(output_width)}};
}

void roi_align::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape& xs = inputs[0].get_shape();
    const std::size_t batch = xs.lens()[0], channels = xs.lens()[1], h = xs.lens()[2], w = xs.lens()[3];
    const std::size_t num_rois = inputs[1].get_shape().lens()[0];
    const auto oh = static_cast<std::size_t>(output_height), ow = static_cast<std::size_t>(output_width);
    visit_type(xs.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (is_float_like_v<T>) {
            const T* x = inputs[0].data_as<const T>();
            T* y = result.data_as<T>();
            const auto& st = xs.strides();
            const double offset = half_pixel ? 0.5 : 0.0;
            for (std::size_t r = 0; r < num_rois; ++r) {
                const double b = inputs[2].value_at(r);
                if (b < 0 || b >= static_cast<double>(batch))
                    fail(error_kind::out_of_range, "roi_align: batch index " + std::to_string(b) + " is out of range");
                const auto n = static_cast<std::size_t>(b);
                const double x1 = inputs[1].value_at(r * 4 + 0) * spatial_scale - offset;
                const double y1 = inputs[1].value_at(r * 4 + 1) * spatial_scale - offset;
                const double x2 = inputs[1].value_at(r * 4 + 2) * spatial_scale - offset;
                const double y2 = inputs[1].value_at(r * 4 + 3) * spatial_scale - offset;
                double roi_w = x2 - x1, roi_h = y2 - y1;
                if (!half_pixel) {
                    roi_w = std::max(roi_w, 1.0);
                    roi_h = std::max(roi_h, 1.0);
                }
                const double bin_h = roi_h / static_cast<double>(oh), bin_w = roi_w / static_cast<double>(ow);
                const auto grid_h = static_cast<std::size_t>(
                    sampling_ratio > 0 ? static_cast<double>(sampling_ratio) : std::ceil(roi_h / static_cast<double>(oh)));
                const auto grid_w = static_cast<std::size_t>(
                    sampling_ratio > 0 ? static_cast<double>(sampling_ratio) : std::ceil(roi_w / static_cast<double>(ow)));
                const double count = static_cast<double>(std::max<std::size_t>(grid_h * grid_w, 1));
                for (std::size_t ph = 0; ph < oh; ++ph) {
                    for (std::size_t pw = 0; pw < ow; ++pw) {
                        std::vector<sample> samples;
                        for (std::size_t iy = 0; iy < grid_h; ++iy) {
                            const double sy = y1 + static_cast<double>(ph) * bin_h +
                                              (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(grid_h);
                            for (std::size_t ix = 0; ix < grid_w; ++ix) {
                                const double sx = x1 + static_cast<double>(pw) * bin_w +
                                                  (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(grid_w);
                                samples.push_back(make_sample(sy, sx, h, w));
                            }
                        }
                        for (std::size_t c = 0; c < channels; ++c) {
                            auto at = [&](std::size_t yy, std::size_t xx) {
                                return static_cast<double>(static_cast<ops::compute_t<T>>(
                                    x[n * st[0] + c * st[1] + yy * st[2] + xx * st[3]]));
                            };
                            double acc = 0;
                            bool first = true;
                            for (const sample& s : samples) {
                                const double v[4] = {s.w[0] * at(s.y0, s.x0), s.w[1] * at(s.y0, s.x1),
                                                     s.w[2] * at(s.y1, s.x0), s.w[3] * at(s.y1, s.x1)};
                                if (mode == roi_align_mode::avg) {
                                    acc += v[0] + v[1] + v[2] + v[3];
                                } else {
                                    const double m = std::max(std::max(v[0], v[1]), std::max(v[2], v[3]));
                                    acc = first ? m : std::max(acc, m);
                                    first = false;
                                }
                            }
                            if (mode == roi_align_mode::avg) acc /= count;
                            y[((r * channels + c) * oh + ph) * ow + pw] = T(static_cast<ops::compute_t<T>>(acc));
                        }
                    }
                }
            }
        }
    });
}

}  // namespace kiln::op
