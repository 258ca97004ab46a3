#include "ops/norm.hpp"

#include <cmath>
#include <limits>

#include "ops/op_helpers.hpp"

namespace kiln::op {

namespace {

using ops::compute_t;

template <class T>
double load(const T* p, std::size_t offset) {
    return static_cast<double>(static_cast<compute_t<T>>(p[offset]));
}

template <class T>
T narrow(double v) {
    return T(static_cast<compute_t<T>>(v));
}

// Calls f with the element type of a floating-point dtype.
template <class F>
void visit_floating(dtype t, F&& f) {
    visit_type(t, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (is_float_like_v<T>) f(tag);
    });
}

shape softmax_shape(const std::string& op, const std::vector<shape>& inputs, std::int64_t axis) {
    ops::expect_inputs(op, inputs, 1);
    ops::expect_floating(op, inputs[0]);
    ops::normalize_axis(op, axis, inputs[0].ndim());
    return {inputs[0].type(), inputs[0].lens()};
}

// Softmax along `axis`, or its logarithm. Works in double from the slice
// maximum so that large inputs do not overflow exp.
void softmax_compute(const std::string& op, bool take_log, std::int64_t axis, const argument& result,
                     const argument& input) {
    const shape& in = input.get_shape();
    const std::size_t a = ops::normalize_axis(op, axis, in.ndim());
    auto slice_lens = in.lens();
    slice_lens[a] = 1;
    auto in_strides = in.strides();
    auto out_strides = result.get_shape().strides();
    const std::size_t length = in.lens()[a];
    const std::size_t in_step = in_strides[a];
    const std::size_t out_step = out_strides[a];
    visit_floating(in.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* x = input.data_as<T>();
        T* y = result.data_as<T>();
        // One call per slice along the axis: off[0] is its start in x, off[1] in y.
        ops::for_each_broadcast<2>(slice_lens, {in_strides, out_strides}, [&](std::size_t, const std::size_t* off) {
            double max = -std::numeric_limits<double>::infinity();
            for (std::size_t k = 0; k < length; ++k) max = std::fmax(max, load(x, off[0] + k * in_step));
            double sum = 0;
            for (std::size_t k = 0; k < length; ++k) sum += std::exp(load(x, off[0] + k * in_step) - max);
            for (std::size_t k = 0; k < length; ++k) {
                double shifted = load(x, off[0] + k * in_step) - max;
                y[off[1] + k * out_step] = narrow<T>(take_log ? shifted - std::log(sum) : std::exp(shifted) / sum);
            }
        });
    });
}

}  // namespace

shape softmax::compute_shape(const std::vector<shape>& inputs) const {
    return softmax_shape(name(), inputs, axis);
}
void softmax::compute(const argument& result, const std::vector<argument>& inputs) const {
    softmax_compute(name(), false, axis, result, inputs[0]);
}

shape log_softmax::compute_shape(const std::vector<shape>& inputs) const {
    return softmax_shape(name(), inputs, axis);
}
void log_softmax::compute(const argument& result, const std::vector<argument>& inputs) const {
    softmax_compute(name(), true, axis, result, inputs[0]);
}

shape batch_norm_inference::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 5);
    const shape& x = inputs[0];
    ops::expect_floating(name(), x, "input x");
    ops::expect_same_type(name(), inputs);
    if (x.ndim() < 2) fail("batch_norm_inference: input x must be [N, C, ...], got " + to_string(x.lens()));
    const char* names[] = {"x", "scale", "bias", "mean", "variance"};
    for (std::size_t i = 1; i < 5; ++i)
        if (inputs[i].lens() != std::vector<std::size_t>{x.lens()[1]})
            fail("batch_norm_inference: " + std::string(names[i]) + " must have shape {" + std::to_string(x.lens()[1]) +
                 "} (the channels of x " + to_string(x.lens()) + "), got " + to_string(inputs[i].lens()));
    return {x.type(), x.lens()};
}

void batch_norm_inference::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape& in = inputs[0].get_shape();
    const std::size_t channels = in.lens()[1];
    std::size_t inner = 1;  // elements per (batch, channel) pair
    for (std::size_t d = 2; d < in.ndim(); ++d) inner *= in.lens()[d];
    visit_floating(in.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        // Per-channel parameter c of input k (1 = scale ... 4 = variance), any stride.
        auto param = [&](std::size_t k, std::size_t c) {
            return load(inputs[k].data_as<T>(), c * inputs[k].get_shape().strides()[0]);
        };
        const T* x = inputs[0].data_as<T>();
        T* y = result.data_as<T>();
        ops::for_each_broadcast<1>(in.lens(), {in.strides()}, [&](std::size_t i, const std::size_t* off) {
            std::size_t c = (i / inner) % channels;
            double normalized = (load(x, off[0]) - param(3, c)) / std::sqrt(param(4, c) + epsilon);
            y[i] = narrow<T>(normalized * param(1, c) + param(2, c));
        });
    });
}

namespace {

std::vector<std::size_t> trailing(const std::vector<std::size_t>& v, std::size_t from) {
    return {v.begin() + static_cast<std::ptrdiff_t>(from), v.end()};
}

// The shape of a layer_norm or rms_norm (`op`) of inputs x and up to
// `max_parameters` (scale, bias) broadcasting against the normalized
// dimensions axis..rank-1.
shape normalized_shape(const std::string& op, std::int64_t axis, const std::vector<shape>& inputs,
                       std::size_t max_parameters) {
    ops::expect_inputs(op, inputs, 1, 1 + max_parameters);
    const shape& x = inputs[0];
    ops::expect_floating(op, x, "input x");
    ops::expect_same_type(op, inputs);
    const std::size_t a = ops::normalize_axis(op, axis, x.ndim());
    const auto normalized = trailing(x.lens(), a);
    const char* names[] = {"x", "scale", "bias"};
    for (std::size_t i = 1; i < inputs.size(); ++i) {
        const auto& lens = inputs[i].lens();
        bool fits = lens.size() <= normalized.size();
        for (std::size_t j = 0; fits && j < lens.size(); ++j) {
            std::size_t target = normalized[normalized.size() - lens.size() + j];
            fits = lens[j] == target || lens[j] == 1;
        }
        if (!fits)
            fail(op + ": " + std::string(names[i]) + " " + to_string(lens) +
                 " does not broadcast to the normalized dimensions " + to_string(normalized) + " of x " +
                 to_string(x.lens()));
    }
    return {x.type(), x.lens()};
}

// (x - mean) / sqrt(mean((x - mean)^2) + epsilon) * scale + bias over the
// dimensions from `axis` on, in double; without `centered` the mean is 0
// (rms_norm). inputs: x, optional scale, optional bias.
void normalize(const std::string& op, std::int64_t axis, double epsilon, bool centered, const argument& result,
               const std::vector<argument>& inputs) {
    const shape& in = inputs[0].get_shape();
    const std::size_t a = ops::normalize_axis(op, axis, in.ndim());
    const auto outer_lens =
        std::vector<std::size_t>(in.lens().begin(), in.lens().begin() + static_cast<std::ptrdiff_t>(a));
    const auto outer_strides =
        std::vector<std::size_t>(in.strides().begin(), in.strides().begin() + static_cast<std::ptrdiff_t>(a));
    const auto norm_lens = trailing(in.lens(), a);
    std::size_t count = 1;
    for (auto l : norm_lens) count *= l;
    // Strides over the normalized dims of x, scale and bias (0 where absent or broadcast).
    std::vector<std::vector<std::size_t>> strides{trailing(in.strides(), a),
                                                  std::vector<std::size_t>(norm_lens.size(), 0),
                                                  std::vector<std::size_t>(norm_lens.size(), 0)};
    for (std::size_t k = 1; k < inputs.size(); ++k)
        strides[k] = ops::broadcast_strides(inputs[k].get_shape(), norm_lens);
    visit_floating(in.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* x = inputs[0].data_as<T>();
        const T* scale = inputs.size() > 1 ? inputs[1].data_as<T>() : nullptr;
        const T* bias = inputs.size() > 2 ? inputs[2].data_as<T>() : nullptr;
        T* y = result.data_as<T>();
        ops::for_each_broadcast<1>(outer_lens, {outer_strides}, [&](std::size_t row, const std::size_t* base) {
            const T* xr = x + base[0];
            double mean = 0;
            if (centered) {
                double sum = 0;
                ops::for_each_broadcast<3>(norm_lens, strides,
                                           [&](std::size_t, const std::size_t* off) { sum += load(xr, off[0]); });
                mean = sum / static_cast<double>(count);
            }
            double squares = 0;
            ops::for_each_broadcast<3>(norm_lens, strides, [&](std::size_t, const std::size_t* off) {
                double d = load(xr, off[0]) - mean;
                squares += d * d;
            });
            const double inv_std = 1.0 / std::sqrt(squares / static_cast<double>(count) + epsilon);
            T* yr = y + row * count;
            ops::for_each_broadcast<3>(norm_lens, strides, [&](std::size_t i, const std::size_t* off) {
                double v = (load(xr, off[0]) - mean) * inv_std;
                if (scale) v *= load(scale, off[1]);
                if (bias) v += load(bias, off[2]);
                yr[i] = narrow<T>(v);
            });
        });
    });
}

}  // namespace

shape layer_norm::compute_shape(const std::vector<shape>& inputs) const {
    return normalized_shape(name(), axis, inputs, 2);
}

void layer_norm::compute(const argument& result, const std::vector<argument>& inputs) const {
    normalize(name(), axis, epsilon, true, result, inputs);
}

shape rms_norm::compute_shape(const std::vector<shape>& inputs) const {
    return normalized_shape(name(), axis, inputs, 1);
}

void rms_norm::compute(const argument& result, const std::vector<argument>& inputs) const {
    normalize(name(), axis, epsilon, false, result, inputs);
}

}  // namespace kiln::op
