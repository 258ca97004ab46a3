#include "ops/grid_sample.hpp"

#include <cmath>

#include "ops/op_helpers.hpp"

namespace kiln::op {

namespace {

struct tap {
    std::int64_t index;
    double weight;
};

// Folds v into [lo, hi] by mirroring at the bounds as often as needed.
double reflect_into(double v, double lo, double hi) {
    const double range = hi - lo;
    if (range <= 0) return lo;
    if (v >= lo && v <= hi) return v;
    const double d = v < lo ? lo - v : v - hi;
    const double folds = std::floor(d / range);
    const double r = d - folds * range;
    const bool even = std::fmod(folds, 2.0) == 0;
    if (v < lo) return even ? lo + r : hi - r;
    return even ? hi - r : lo + r;
}

// Keys cubic convolution weights of the taps at floor(x) - 1 .. floor(x) + 2.
void cubic_weights(double t, double* w) {
    constexpr double a = -0.75;
    auto far = [](double s) { return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a; };  // 1 <= s < 2
    auto near = [](double s) { return ((a + 2) * s - (a + 3)) * s * s + 1; };       // 0 <= s < 1
    w[0] = far(t + 1);
    w[1] = near(t);
    w[2] = near(1 - t);
    w[3] = far(2 - t);
}

// The taps along one spatial dim of extent `len` for normalized position g.
// Indices are already mapped by the padding mode; -1 marks a zero tap.
std::vector<tap> taps_along(const grid_sample& op, double g, std::size_t len) {
    const auto n = static_cast<double>(len);
    double x = op.align_corners ? (g + 1) / 2 * (n - 1) : ((g + 1) * n - 1) / 2;
    const double lo = op.align_corners ? 0.0 : -0.5;
    const double hi = op.align_corners ? n - 1 : n - 0.5;
    if (op.mode == grid_sample_mode::nearest) x = std::nearbyint(x);  // halves go to even, as in torch
    if (x < lo || x > hi) {
        if (op.padding_mode == grid_padding::border) x = std::clamp(x, 0.0, n - 1);
        if (op.padding_mode == grid_padding::reflection) x = reflect_into(x, lo, hi);
    }
    std::vector<tap> taps;
    const double base = std::floor(x);
    const double t = x - base;
    if (op.mode == grid_sample_mode::nearest) {
        taps.push_back({static_cast<std::int64_t>(x), 1.0});  // x is whole unless reflected; truncate like torch
    } else if (op.mode == grid_sample_mode::linear) {
        taps.push_back({static_cast<std::int64_t>(base), 1 - t});
        taps.push_back({static_cast<std::int64_t>(base) + 1, t});
    } else {
        double w[4];
        cubic_weights(t, w);
        for (int k = 0; k < 4; ++k) taps.push_back({static_cast<std::int64_t>(base) - 1 + k, w[k]});
    }
    const auto last = static_cast<std::int64_t>(len) - 1;
    for (auto& tp : taps) {
        if (tp.index >= 0 && tp.index <= last) continue;
        if (op.padding_mode == grid_padding::zeros) {
            tp.index = -1;
        } else if (op.padding_mode == grid_padding::border) {
            tp.index = std::clamp<std::int64_t>(tp.index, 0, last);
        } else {
            const auto mirrored = static_cast<std::int64_t>(reflect_into(static_cast<double>(tp.index), lo, hi));
            tp.index = std::clamp<std::int64_t>(mirrored, 0, last);
        }
    }
    return taps;
}

}  // namespace

shape grid_sample::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 2);
    const shape& x = inputs[0];
    const shape& grid = inputs[1];
    ops::expect_floating(name(), x, "x");
    ops::expect_floating(name(), grid, "grid");
    if (x.ndim() < 3) fail(name() + ": x must be [N, C, d1, ...], got " + to_string(x.lens()));
    const std::size_t r = x.ndim() - 2;
    if (grid.ndim() != x.ndim() || grid.lens()[0] != x.lens()[0] || grid.lens().back() != r)
        fail(name() + ": grid must be [N, D1, ..., D" + std::to_string(r) + ", " + std::to_string(r) + "] for x " +
             to_string(x.lens()) + ", got " + to_string(grid.lens()));
    std::vector<std::size_t> lens{x.lens()[0], x.lens()[1]};
    lens.insert(lens.end(), grid.lens().begin() + 1, grid.lens().end() - 1);
    return {x.type(), lens};
}

void grid_sample::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape& xs = inputs[0].get_shape();
    const shape& gs = inputs[1].get_shape();
    if (result.get_shape().elements() == 0) return;
    const std::size_t rank = xs.ndim() - 2;
    const std::size_t batch = xs.lens()[0], channels = xs.lens()[1];
    const std::size_t points = gs.elements() / (batch * rank);
    std::vector<double> grid(gs.elements());
    for (std::size_t i = 0; i < grid.size(); ++i) grid[i] = inputs[1].value_at(i);

    visit_type(xs.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (is_float_like_v<T>) {
            const T* x = inputs[0].data_as<const T>();
            T* y = result.data_as<T>();
            const auto& strides = xs.strides();
            for (std::size_t n = 0; n < batch; ++n) {
                for (std::size_t p = 0; p < points; ++p) {
                    // Every combination of one tap per dim: its offset within x[n, c] and its weight.
                    std::vector<std::size_t> offsets{0};
                    std::vector<double> weights{1.0};
                    for (std::size_t d = 0; d < rank; ++d) {
                        const double g = grid[(n * points + p) * rank + (rank - 1 - d)];
                        std::vector<std::size_t> next_offsets;
                        std::vector<double> next_weights;
                        for (const tap& tp : taps_along(*this, g, xs.lens()[d + 2])) {
                            if (tp.index < 0) continue;
                            for (std::size_t k = 0; k < offsets.size(); ++k) {
                                next_offsets.push_back(offsets[k] +
                                                       static_cast<std::size_t>(tp.index) * strides[d + 2]);
                                next_weights.push_back(weights[k] * tp.weight);
                            }
                        }
                        offsets.swap(next_offsets);
                        weights.swap(next_weights);
                    }
                    for (std::size_t c = 0; c < channels; ++c) {
                        const T* plane = x + n * strides[0] + c * strides[1];
                        double sum = 0;
                        for (std::size_t k = 0; k < offsets.size(); ++k)
                            sum += weights[k] * static_cast<double>(plane[offsets[k]]);
                        y[(n * channels + c) * points + p] = static_cast<T>(sum);
                    }
                }
            }
        }
    });
}

}  // namespace kiln::op
