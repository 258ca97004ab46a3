// quantize_linear (float32 -> int8 / uint8) and dequantize_linear (int8 /
// uint8 -> float32) with constant parameters, per tensor or along one axis:
// where a quantized graph keeps them (a float input entering the first
// quantized layer, values leaving the int8 region). The input may be any
// view (transposed, sliced, broadcast): chunks of it are gathered into a
// per-thread buffer first. Threaded; AVX2 loops where the CPU has it
// (linear_quantize_avx2.hpp); the same arithmetic as the ops' reference
// compute: rint(x / scale) + zero point in float32, saturated, and
// (q - zero point) * scale.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

#include "ops/quant.hpp"
#include "targets/cpu/kernels/copy/strided_copy.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/cpu_kernels.hpp"
#include "targets/cpu/kernels/quantize/linear_quantize_avx2.hpp"

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

// Elements per chunk of the row-major order: one thread's unit of work, and
// the size of the buffer a strided input's chunk is gathered into.
constexpr std::size_t chunk_elements = 4096;

// The input as the kernel reads it: its first element, and how to gather a
// chunk when it is not a standard tensor.
template <class T>
struct input_view {
    const T* data;
    const std::optional<strided_copy>& gather;
};

// Calls f(values, begin, end) over chunks [begin, end) of the row-major
// order, in parallel; values[i - begin] is element i: the input itself when
// it is standard, else a per-thread buffer the chunk was gathered into.
template <class T, class F>
void for_each_chunk(input_view<T> in, std::size_t n, F&& f) {
    const auto chunks = static_cast<std::ptrdiff_t>((n + chunk_elements - 1) / chunk_elements);
    // One chunk (a tiny tensor) stays on this thread: no team to wake.
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (std::ptrdiff_t k = 0; k < chunks; ++k) {
        const std::size_t begin = static_cast<std::size_t>(k) * chunk_elements;
        const std::size_t end = std::min(n, begin + chunk_elements);
        if (!in.gather) {
            f(in.data + begin, begin, end);
            continue;
        }
        alignas(64) T buffer[chunk_elements];
        in.gather->gather_range(reinterpret_cast<const std::byte*>(in.data), reinterpret_cast<std::byte*>(buffer),
                                begin, end);
        f(static_cast<const T*>(buffer), begin, end);
    }
}

// Calls g(first, last, channel) over the runs of [begin, end) whose elements
// share one channel's parameters.
template <class G>
void for_each_channel_run(const channel_parameters& p, std::size_t begin, std::size_t end, G&& g) {
    if (p.channels == 1) return g(begin, end, std::size_t{0});
    for (std::size_t i = begin; i < end;) {
        const std::size_t block = i / p.inner;
        const std::size_t last = std::min(end, (block + 1) * p.inner);
        g(i, last, block % p.channels);
        i = last;
    }
}

// How to gather a view that is not standard; nothing for a standard one.
std::optional<strided_copy> gather_for(const shape& x) {
    if (x.standard()) return std::nullopt;
    return strided_copy(x);
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

// One run of values sharing a scale and zero point.
template <class Q>
using quantize_loop = void (*)(const float* x, Q* y, std::size_t n, float scale, float zero_point);
template <class Q>
using dequantize_loop = void (*)(const Q* q, float* y, std::size_t n, float scale, float zero_point);

template <class Q>
void quantize_portable(const float* x, Q* y, std::size_t n, float s, float z) {
    constexpr float lo = std::numeric_limits<Q>::min(), hi = std::numeric_limits<Q>::max();
    for (std::size_t i = 0; i < n; ++i) {
        const float q = std::fmin(hi, std::fmax(lo, round_half_even(x[i] / s) + z));
        y[i] = static_cast<Q>(x[i] != x[i] ? z : q);  // NaN has no code: the zero point
    }
}

template <class Q>
void dequantize_portable(const Q* q, float* y, std::size_t n, float s, float z) {
    for (std::size_t i = 0; i < n; ++i) y[i] = (static_cast<float>(q[i]) - z) * s;
}

template <class Q>
quantize_loop<Q> quantize_loop_for_this_cpu() {
    if (!avx2::supported()) return quantize_portable<Q>;
    if constexpr (std::is_same_v<Q, std::uint8_t>)
        return avx2::quantize_to_uint8;
    else
        return avx2::quantize_to_int8;
}

template <class Q>
dequantize_loop<Q> dequantize_loop_for_this_cpu() {
    if (!avx2::supported()) return dequantize_portable<Q>;
    if constexpr (std::is_same_v<Q, std::uint8_t>)
        return avx2::dequantize_uint8;
    else
        return avx2::dequantize_int8;
}

template <class Q>
class quantize_kernel final : public cpu_kernel {
public:
    quantize_kernel(channel_parameters p, const shape& x) : p_(std::move(p)), gather_(gather_for(x)) {}
    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        Q* y = result.data_as<Q>();
        const input_view<float> in{inputs[0].data_as<const float>(), gather_};
        for_each_chunk(in, result.get_shape().elements(), [&](const float* values, std::size_t begin, std::size_t end) {
            for_each_channel_run(p_, begin, end, [&](std::size_t first, std::size_t last, std::size_t c) {
                loop_(values + (first - begin), y + first, last - first, p_.scale[c], p_.zero_point[c]);
            });
        });
    }

private:
    channel_parameters p_;
    std::optional<strided_copy> gather_;
    quantize_loop<Q> loop_ = quantize_loop_for_this_cpu<Q>();
};

template <class Q>
class dequantize_kernel final : public cpu_kernel {
public:
    dequantize_kernel(channel_parameters p, const shape& x) : p_(std::move(p)), gather_(gather_for(x)) {}
    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        float* y = result.data_as<float>();
        const input_view<Q> in{inputs[0].data_as<const Q>(), gather_};
        for_each_chunk(in, result.get_shape().elements(), [&](const Q* values, std::size_t begin, std::size_t end) {
            for_each_channel_run(p_, begin, end, [&](std::size_t first, std::size_t last, std::size_t c) {
                loop_(values + (first - begin), y + first, last - first, p_.scale[c], p_.zero_point[c]);
            });
        });
    }

private:
    channel_parameters p_;
    std::optional<strided_copy> gather_;
    dequantize_loop<Q> loop_ = dequantize_loop_for_this_cpu<Q>();
};

// The kernels write a standard result of the input's extents, from any view
// of at most 16 dimensions (what strided_copy walks).
bool gatherable(const shape& x, const shape& result) {
    return result.standard() && result.lens() == x.lens() && x.ndim() <= 16;
}

}  // namespace

std::shared_ptr<const cpu_kernel> make_quantize_kernel(const kernel_request& r) {
    const auto* op = r.op.get_if<op::quantize_linear>();
    const shape& x = r.input_shapes[0];
    const dtype t = r.output_shape.type();
    if (op == nullptr || x.type() != dtype::float_type || !op::is_8bit_integer(t) || !gatherable(x, r.output_shape))
        return nullptr;
    auto p = read_parameters(r, x, op->axis);
    if (!p) return nullptr;
    if (t == dtype::uint8_type) return std::make_shared<quantize_kernel<std::uint8_t>>(std::move(*p), x);
    return std::make_shared<quantize_kernel<std::int8_t>>(std::move(*p), x);
}

std::shared_ptr<const cpu_kernel> make_dequantize_kernel(const kernel_request& r) {
    const auto* op = r.op.get_if<op::dequantize_linear>();
    const shape& x = r.input_shapes[0];
    if (op == nullptr || !op::is_8bit_integer(x.type()) || r.output_shape.type() != dtype::float_type ||
        !gatherable(x, r.output_shape))
        return nullptr;
    auto p = read_parameters(r, x, op->axis);
    if (!p) return nullptr;
    if (x.type() == dtype::uint8_type) return std::make_shared<dequantize_kernel<std::uint8_t>>(std::move(*p), x);
    return std::make_shared<dequantize_kernel<std::int8_t>>(std::move(*p), x);
}

}  // namespace kiln
