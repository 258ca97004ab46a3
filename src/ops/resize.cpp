#include "ops/resize.hpp"

#include <cmath>

#include "ops/op_helpers.hpp"

namespace kiln::op {

namespace {

struct tap {
    std::size_t index;
    double weight;
};

// The taps of one output coordinate along one dim; `outside` marks a
// tf_crop_and_resize coordinate that left the input (extrapolated).
struct taps {
    std::vector<tap> list;
    bool outside = false;
};

double scale_of(const resize& op, std::size_t d, std::size_t in, std::size_t out) {
    return op.scales.empty() ? static_cast<double>(out) / static_cast<double>(in) : op.scales[d];
}

// Input coordinate of output coordinate x along a dim (ONNX formulas).
double source_coordinate(const resize& op, std::size_t d, std::size_t rank, double x, std::size_t in, std::size_t out,
                         double scale) {
    const double in_len = static_cast<double>(in);
    // The resized length as the scale gives it, which may be fractional (ONNX's reference).
    const double out_len = scale * in_len;
    switch (op.coordinate_transformation_mode) {
        case resize_coordinates::half_pixel:
            return (x + 0.5) / scale - 0.5;
        case resize_coordinates::half_pixel_symmetric: {
            const double adjustment = static_cast<double>(out) / out_len;
            const double offset = in_len / 2 * (1 - adjustment);
            return offset + (x + 0.5) / scale - 0.5;
        }
        case resize_coordinates::pytorch_half_pixel:
            return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
        case resize_coordinates::align_corners:
            return out == 1 ? 0.0 : x * (in_len - 1) / (out_len - 1);
        case resize_coordinates::asymmetric:
            return x / scale;
        case resize_coordinates::tf_crop_and_resize: {
            const double start = op.roi[d];
            const double end = op.roi[rank + d];
            if (out_len == 1) return (start + end) / 2 * (in_len - 1);
            return start * (in_len - 1) + x * (end - start) * (in_len - 1) / (out_len - 1);
        }
    }
    return x;
}

std::size_t clamp_index(double i, std::size_t in) {
    if (i < 0) return 0;
    return std::min(static_cast<std::size_t>(i), in - 1);
}

std::size_t nearest_index(resize_rounding rounding, double x, std::size_t in) {
    const double base = std::floor(x);
    const double frac = x - base;
    bool up = false;
    switch (rounding) {
        case resize_rounding::round_prefer_floor:
            up = frac > 0.5;
            break;
        case resize_rounding::round_prefer_ceil:
            up = frac >= 0.5;
            break;
        case resize_rounding::floor:
            up = false;
            break;
        case resize_rounding::ceil:
            up = frac > 0;
            break;
    }
    return clamp_index(base + (up ? 1 : 0), in);
}

// Keys' cubic convolution weights of the four neighbours floor(x)-1 .. floor(x)+2.
std::vector<double> cubic_weights(double a, double t) {
    auto near = [a](double s) { return ((a + 2) * s - (a + 3)) * s * s + 1; };       // |s| <= 1
    auto far = [a](double s) { return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a; };  // 1 < |s| < 2
    return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

double cubic_kernel(double a, double s) {
    s = std::abs(s);
    if (s <= 1) return ((a + 2) * s - (a + 3)) * s * s + 1;
    if (s < 2) return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a;
    return 0.0;
}

// Antialiased linear / cubic taps: the kernel is evaluated at (offset) * scale
// for scale < 1, which widens its support to 1 / scale (linear) or 2 / scale
// (cubic) input pixels on each side; the weights are renormalized. An exact
// integer coordinate is treated as the previous pixel at fraction 1, so the
// window's extra tap falls on the left (ONNX's reference).
taps antialias_taps(const resize& op, double x, std::size_t in, double scale) {
    taps result;
    const double s = std::min(scale, 1.0);
    double base = std::floor(x);
    double frac = x - base;
    if (frac == 0) {
        base -= 1;
        frac = 1;
    }
    const double reach = op.mode == resize_mode::linear ? 1.0 : 2.0;
    const auto first = static_cast<std::int64_t>(std::floor(-reach / s) + 1);
    const std::int64_t last = 1 - first;  // the window is symmetric about frac = 0.5
    double total = 0;
    for (std::int64_t k = first; k <= last; ++k) {
        const double arg = s * (static_cast<double>(k) - frac);
        const double w =
            op.mode == resize_mode::linear ? std::max(0.0, 1.0 - std::abs(arg)) : cubic_kernel(op.cubic_coeff_a, arg);
        const double i = base + static_cast<double>(k);
        if (op.exclude_outside && (i < 0 || i >= static_cast<double>(in))) continue;
        result.list.push_back({clamp_index(i, in), w});
        total += w;
    }
    for (auto& tp : result.list) tp.weight /= total;
    return result;
}

taps taps_for(const resize& op, std::size_t d, std::size_t rank, std::size_t o, std::size_t in, std::size_t out) {
    taps result;
    const double x = source_coordinate(op, d, rank, static_cast<double>(o), in, out, scale_of(op, d, in, out));
    if (op.coordinate_transformation_mode == resize_coordinates::tf_crop_and_resize &&
        (x < 0 || x > static_cast<double>(in - 1))) {
        result.outside = true;
        return result;
    }
    const double base = std::floor(x);
    const double t = x - base;
    if (op.antialias && op.mode != resize_mode::nearest) return antialias_taps(op, x, in, scale_of(op, d, in, out));
    if (op.mode == resize_mode::nearest) {
        result.list.push_back({nearest_index(op.nearest_mode, x, in), 1.0});
    } else if (op.mode == resize_mode::linear) {
        result.list.push_back({clamp_index(base, in), 1 - t});
        result.list.push_back({clamp_index(base + 1, in), t});
    } else {
        auto w = cubic_weights(op.cubic_coeff_a, t);
        double kept = 0;
        for (int k = 0; k < 4; ++k) {
            const double i = base - 1 + k;
            const bool inside = i >= 0 && i < static_cast<double>(in);
            if (op.exclude_outside && !inside) continue;
            result.list.push_back({clamp_index(i, in), w[static_cast<std::size_t>(k)]});
            kept += w[static_cast<std::size_t>(k)];
        }
        if (op.exclude_outside)
            for (auto& tp : result.list) tp.weight /= kept;
    }
    return result;
}

}  // namespace

shape resize::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 1);
    const shape& x = inputs[0];
    const std::size_t rank = x.ndim();
    if (out_lens.size() != rank)
        fail("resize: out_lens has " + std::to_string(out_lens.size()) + " values but the input " +
             to_string(x.lens()) + " has rank " + std::to_string(rank));
    if (!scales.empty() && scales.size() != rank)
        fail("resize: scales has " + std::to_string(scales.size()) + " values; expected none or " +
             std::to_string(rank));
    for (double s : scales)
        if (!(s > 0)) fail("resize: scales must be positive, got " + std::to_string(s));
    if (mode != resize_mode::nearest) ops::expect_floating(name(), x, "input x (linear and cubic modes)");
    if (coordinate_transformation_mode == resize_coordinates::tf_crop_and_resize && roi.size() != 2 * rank)
        fail("resize: tf_crop_and_resize needs roi with " + std::to_string(2 * rank) + " values (starts, ends), got " +
             std::to_string(roi.size()));
    std::vector<std::size_t> lens;
    for (std::size_t d = 0; d < rank; ++d) {
        if (out_lens[d] <= 0)
            fail("resize: out_lens must be positive, got " + std::to_string(out_lens[d]) + " for dim " +
                 std::to_string(d));
        if (x.lens()[d] == 0)
            fail("resize: cannot resize the empty dim " + std::to_string(d) + " of " + to_string(x.lens()));
        lens.push_back(static_cast<std::size_t>(out_lens[d]));
    }
    return {x.type(), lens};
}

void resize::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape& in = inputs[0].get_shape();
    const auto& out_shape = result.get_shape().lens();
    const std::size_t rank = in.ndim();
    // Per dim, the taps of every output coordinate.
    std::vector<std::vector<taps>> table(rank);
    for (std::size_t d = 0; d < rank; ++d)
        for (std::size_t o = 0; o < out_shape[d]; ++o)
            table[d].push_back(taps_for(*this, d, rank, o, in.lens()[d], out_shape[d]));
    visit_type(in.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* x = inputs[0].data_as<T>();
        T* y = result.data_as<T>();
        std::vector<std::size_t> o(rank, 0);
        std::vector<std::size_t> pick(rank, 0);
        for (std::size_t i = 0; i < result.get_shape().elements(); ++i) {
            bool outside = false;
            for (std::size_t d = 0; d < rank; ++d) outside = outside || table[d][o[d]].outside;
            double acc = extrapolation_value;
            if (!outside && mode == resize_mode::nearest) {
                // One tap per dim: copy exactly (int64 values do not survive a trip through double).
                std::size_t offset = 0;
                for (std::size_t d = 0; d < rank; ++d) offset += table[d][o[d]].list[0].index * in.strides()[d];
                y[i] = x[offset];
            } else if (!outside) {
                // Sum over every combination of one tap per dim.
                acc = 0;
                std::fill(pick.begin(), pick.end(), 0);
                while (true) {
                    double weight = 1;
                    std::size_t offset = 0;
                    for (std::size_t d = 0; d < rank; ++d) {
                        const tap& tp = table[d][o[d]].list[pick[d]];
                        weight *= tp.weight;
                        offset += tp.index * in.strides()[d];
                    }
                    if (weight != 0) acc += weight * static_cast<double>(static_cast<ops::compute_t<T>>(x[offset]));
                    std::size_t d = rank;
                    while (d-- > 0 && ++pick[d] == table[d][o[d]].list.size()) pick[d] = 0;
                    if (d == static_cast<std::size_t>(-1)) break;
                }
            }
            if (outside || mode != resize_mode::nearest) {
                if constexpr (is_float_like_v<T>)
                    y[i] = T(static_cast<ops::compute_t<T>>(acc));
                else
                    y[i] = static_cast<T>(acc);  // extrapolation_value of a nearest resize
            }
            for (std::size_t d = rank; d-- > 0;) {
                if (++o[d] < out_shape[d]) break;
                o[d] = 0;
            }
        }
    });
}

}  // namespace kiln::op
