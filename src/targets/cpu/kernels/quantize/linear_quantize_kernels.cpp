// quantize_linear (float32 -> int8 / uint8) and dequantize_linear (int8 /
// uint8 -> float32) on standard tensors with constant parameters, per
// tensor or along one axis: where a quantized graph keeps them (a float
// input entering the first quantized layer, values leaving the int8
// region). Threaded loops the compiler vectorizes; the same arithmetic as
// the ops' reference compute: rint(x / scale) + zero point in float32,
// saturated, and (q - zero point) * scale.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "ops/quant.hpp"
#include "targets/cpu/kernels/cpu_kernels.hpp"

namespace kiln {

namespace {

// Per-channel parameters as floats (scale) and ints (zero point), with the
// extent of the block of consecutive elements sharing one channel.
struct channel_parameters {
    std::vector<float> scale;
    std::vector<float> zero_point;
    std::size_t inner = 1;     // elements after the axis
    std::size_t channels = 1;  // 1 for per tensor
};

std::optional<channel_parameters> read_parameters(const kernel_request& r, const shape& x, std::int64_t axis) {
    if (r.constant_inputs[1].empty() || (r.input_shapes.size() > 2 && r.constant_inputs[2].empty())) return std::nullopt;
    const argument& s = r.constant_inputs[1];
    if (s.get_shape().type() != dtype::float_type || !s.get_shape().standard()) return std::nullopt;
    channel_parameters p;
    p.channels = s.get_shape().elements();
    if (p.channels > 1) {
        if (s.get_shape().ndim() != 1 || x.ndim() == 0) return std::nullopt;
        const auto rank = static_cast<std::int64_t>(x.ndim());
        const auto a = static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
        if (a >= x.ndim() || x.lens()[a] != p.channels) return std::nullopt;
        for (std::size_t d = a + 1; d < x.ndim(); ++d) p.inner *= x.lens()[d];
    }
    const float* sp = s.data_as<const float>();
    p.scale.assign(sp, sp + p.channels);
    p.zero_point.assign(p.channels, 0.f);
    if (r.input_shapes.size() > 2) {
        const argument& z = r.constant_inputs[2];
        if (!z.get_shape().standard() || z.get_shape().elements() != p.channels) return std::nullopt;
        for (std::size_t c = 0; c < p.channels; ++c)
            p.zero_point[c] = z.get_shape().type() == dtype::uint8_type ? z.data_as<const std::uint8_t>()[c]
                                                                          : z.data_as<const std::int8_t>()[c];
    }
    return p;
}

// Calls f(begin, end, channel) over runs of elements sharing one channel's
// parameters, in parallel: fixed-size chunks per tensor, one run per block
// of `inner` elements per axis.
template <class F>
void for_each_run(const channel_parameters& p, std::size_t n, F&& f) {
    const std::size_t run = p.channels == 1 ? 16384 : p.inner;
    const auto runs = static_cast<std::ptrdiff_t>((n + run - 1) / run);
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t r = 0; r < runs; ++r) {
        const auto begin = static_cast<std::size_t>(r) * run;
        f(begin, std::min(n, begin + run), p.channels == 1 ? 0 : static_cast<std::size_t>(r) % p.channels);
    }
}

// rint without a libm call (which kept the loop scalar): adding and taking
// away 1.5 * 2^23 rounds to an integer, half to even, in the default rounding
// mode; values beyond +-2^22 are clamped first (they saturate anyway).
inline float round_half_even(float v) {
    constexpr float magic = 12582912.0f;
    constexpr float bound = 4194304.0f;
    v = v > bound ? bound : (v < -bound ? -bound : v);
    return (v + magic) - magic;
}

template <class Q>
class quantize_kernel final : public cpu_kernel {
public:
    explicit quantize_kernel(channel_parameters p) : p_(std::move(p)) {}
    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        const float* x = inputs[0].data_as<const float>();
        Q* y = result.data_as<Q>();
        for_each_run(p_, result.get_shape().elements(), [&](std::size_t begin, std::size_t end, std::size_t c) {
            constexpr float lo = std::numeric_limits<Q>::min(), hi = std::numeric_limits<Q>::max();
            const float s = p_.scale[c], z = p_.zero_point[c];
            for (std::size_t i = begin; i < end; ++i) {
                const float q = std::fmin(hi, std::fmax(lo, round_half_even(x[i] / s) + z));
                y[i] = static_cast<Q>(x[i] != x[i] ? z : q);  // NaN has no code: the zero point
            }
        });
    }

private:
    channel_parameters p_;
};

template <class Q>
class dequantize_kernel final : public cpu_kernel {
public:
    explicit dequantize_kernel(channel_parameters p) : p_(std::move(p)) {}
    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        const Q* q = inputs[0].data_as<const Q>();
        float* y = result.data_as<float>();
        for_each_run(p_, result.get_shape().elements(), [&](std::size_t begin, std::size_t end, std::size_t c) {
            const float s = p_.scale[c], z = p_.zero_point[c];
            for (std::size_t i = begin; i < end; ++i) y[i] = (static_cast<float>(q[i]) - z) * s;
        });
    }

private:
    channel_parameters p_;
};

}  // namespace

std::shared_ptr<const cpu_kernel> make_quantize_kernel(const kernel_request& r) {
    const auto* op = r.op.get_if<op::quantize_linear>();
    const shape& x = r.input_shapes[0];
    const dtype t = r.output_shape.type();
    if (op == nullptr || x.type() != dtype::float_type || !x.standard() || !op::is_8bit_integer(t)) return nullptr;
    auto p = read_parameters(r, x, op->axis);
    if (!p) return nullptr;
    if (t == dtype::uint8_type) return std::make_shared<quantize_kernel<std::uint8_t>>(std::move(*p));
    return std::make_shared<quantize_kernel<std::int8_t>>(std::move(*p));
}

std::shared_ptr<const cpu_kernel> make_dequantize_kernel(const kernel_request& r) {
    const auto* op = r.op.get_if<op::dequantize_linear>();
    const shape& x = r.input_shapes[0];
    if (op == nullptr || !op::is_8bit_integer(x.type()) || !x.standard() || r.output_shape.type() != dtype::float_type) return nullptr;
    auto p = read_parameters(r, x, op->axis);
    if (!p) return nullptr;
    if (x.type() == dtype::uint8_type) return std::make_shared<dequantize_kernel<std::uint8_t>>(std::move(*p));
    return std::make_shared<dequantize_kernel<std::int8_t>>(std::move(*p));
}

}  // namespace kiln
