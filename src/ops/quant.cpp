#include "ops/quant.hpp"

#include <cmath>
#include <limits>

#include "ops/op_helpers.hpp"

namespace kiln::op {

namespace {

bool is_quantized_type(dtype t) {
    switch (t) {
    case dtype::int8_type:
    case dtype::uint8_type:
    case dtype::int16_type:
    case dtype::uint16_type:
    case dtype::int32_type:
    case dtype::int4_type:
    case dtype::uint4_type:
    case dtype::int2_type:
    case dtype::uint2_type:
    case dtype::fp8e4m3fn_type:
    case dtype::fp8e4m3fnuz_type:
    case dtype::fp8e5m2_type:
    case dtype::fp8e5m2fnuz_type:
    case dtype::fp4e2m1_type: return true;
    default: return false;
    }
}

void expect_quantized_type(const std::string& op, dtype t, const std::string& which) {
    if (!is_quantized_type(t))
        fail(error_kind::type_error, op + ": " + which +
                                         " must be int8, uint8, int16, uint16, int32, int4, uint4, int2, uint2, "
                                         "fp8e4m3fn, fp8e4m3fnuz, fp8e5m2, fp8e5m2fnuz or fp4e2m1, got " +
                                         to_string(t));
}

// Which scale (and zero point) element each element of x uses.
struct scale_layout {
    enum class kind { tensor, axis, blocked } k = kind::tensor;
    std::size_t extent = 1;  // x's extent along the axis
    std::size_t inner = 1;   // elements of x per step along the axis
    std::size_t blocks = 1;  // scale's extent along the axis (blocked)
    std::size_t block_size = 1;

    // Calls f(i, s) for each of x's `n` elements in row-major order: `i` the
    // element's index, `s` the index (row-major) of the scale it uses. Steps
    // outer / along the axis / inner, so the scale row is found once per step
    // along the axis rather than divided out of each index.
    template <class F>
    void for_each(std::size_t n, F&& f) const {
        if (k == kind::tensor) {
            for (std::size_t i = 0; i < n; ++i) f(i, std::size_t{0});
            return;
        }
        if (n == 0) return;
        const std::size_t outer = n / (inner * extent);
        std::size_t i = 0;
        for (std::size_t o = 0; o < outer; ++o) {
            for (std::size_t along = 0; along < extent; ++along) {
                if (k == kind::axis) {
                    for (std::size_t j = 0; j < inner; ++j, ++i) f(i, along);
                } else {
                    const std::size_t row = (o * blocks + along / block_size) * inner;
                    for (std::size_t j = 0; j < inner; ++j, ++i) f(i, row + j);
                }
            }
        }
    }
};

// Checks scale (and zero point) against x.
scale_layout check_scale(const std::string& op, const std::vector<shape>& inputs, std::int64_t axis,
                         std::int64_t block_size) {
    ops::expect_inputs(op, inputs, 2, 3);
    const shape& x = inputs[0];
    const shape& scale = inputs[1];
    // One value for the tensor may be held as a scalar or as {1} in either input.
    auto single = [](const shape& s) { return s.elements() == 1 && s.ndim() <= 1; };
    if (inputs.size() == 3 && inputs[2].lens() != scale.lens() && !(single(inputs[2]) && single(scale)))
        fail(op + ": zero_point " + to_string(inputs[2].lens()) + " must have the lens of scale " +
             to_string(scale.lens()));
    if (block_size < 0) fail(op + ": block_size must not be negative, got " + std::to_string(block_size));
    scale_layout layout;
    if (block_size == 0 && single(scale)) return layout;
    const std::size_t a = ops::normalize_axis(op, axis, x.ndim());
    layout.extent = x.lens()[a];
    for (std::size_t d = a + 1; d < x.ndim(); ++d) layout.inner *= x.lens()[d];
    if (block_size == 0) {
        if (scale.ndim() != 1)
            fail(op + ": scale " + to_string(scale.lens()) +
                 " must be a scalar or 1-D (or have x's rank, with block_size for blocked quantization)");
        if (scale.lens()[0] != layout.extent)
            fail(op + ": scale has " + std::to_string(scale.lens()[0]) + " values but axis " + std::to_string(axis) +
                 " of input " + to_string(x.lens()) + " has extent " + std::to_string(layout.extent));
        layout.k = scale_layout::kind::axis;
        return layout;
    }
    layout.k = scale_layout::kind::blocked;
    layout.block_size = static_cast<std::size_t>(block_size);
    layout.blocks = (layout.extent + layout.block_size - 1) / layout.block_size;
    std::vector<std::size_t> expected = x.lens();
    expected[a] = layout.blocks;
    if (scale.lens() != expected)
        fail(op + ": with block_size " + std::to_string(block_size) + " along axis " + std::to_string(axis) +
             ", scale of input " + to_string(x.lens()) + " must have lens " + to_string(expected) + ", got " +
             to_string(scale.lens()));
    return layout;
}

template <class T>
const T* standard_data(const argument& a, argument& keep) {
    if (a.get_shape().standard()) return a.data_as<const T>();
    keep = a.contiguous();
    return keep.data_as<const T>();
}

template <class O>
constexpr bool is_integer_output_v = is_small_int_v<O> || (std::is_integral_v<O> && !std::is_same_v<O, bool>);

}  // namespace

// ---- quantize_linear ----

shape quantize_linear::compute_shape(const std::vector<shape>& inputs) const {
    check_scale(name(), inputs, axis, block_size);
    ops::expect_floating(name(), inputs[0], "x (input 0)");
    if (inputs[1].type() != inputs[0].type())
        fail(error_kind::type_error, name() + ": scale (input 1) has dtype " + to_string(inputs[1].type()) +
                                         " but x has " + to_string(inputs[0].type()));
    const dtype out = inputs.size() == 3 ? inputs[2].type() : output_type;
    expect_quantized_type(name(), out, inputs.size() == 3 ? "zero_point (input 2)" : "output_type");
    return {out, inputs[0].lens()};
}

void quantize_linear::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape& xs = inputs[0].get_shape();
    const bool has_zero_point = inputs.size() == 3;
    std::vector<shape> shapes{xs, inputs[1].get_shape()};
    if (has_zero_point) shapes.push_back(inputs[2].get_shape());
    const scale_layout layout = check_scale(name(), shapes, axis, block_size);
    const std::size_t n = xs.elements();
    visit_type(xs.type(), [&](auto xtag) {
        using T = typename decltype(xtag)::type;
        if constexpr (is_float_like_v<T>) {
            using C = ops::compute_t<T>;
            argument x_copy, scale_copy, zero_copy;
            const T* x = standard_data<T>(inputs[0], x_copy);
            const T* scale = standard_data<T>(inputs[1], scale_copy);
            // x / scale, rounded to x's type as ONNX's reference computes it.
            [[maybe_unused]] auto quotient = [&](std::size_t i, std::size_t s) {
                return static_cast<C>(static_cast<T>(static_cast<C>(x[i]) / static_cast<C>(scale[s])));
            };
            visit_any_type(result.get_shape().type(), [&](auto otag) {
                using O = typename decltype(otag)::type;
                [[maybe_unused]] O* y = result.data_as<O>();
                [[maybe_unused]] const O* zero = has_zero_point ? standard_data<O>(inputs[2], zero_copy) : nullptr;
                if constexpr (is_small_float_v<O> && !std::is_same_v<O, float8_e8m0fnu>) {
                    layout.for_each(n, [&](std::size_t i, std::size_t s) {
                        double v = static_cast<double>(quotient(i, s));
                        if constexpr (std::is_same_v<O, float4_e2m1fn>)
                            if (zero != nullptr) v += static_cast<double>(static_cast<float>(zero[s]));
                        y[i] = O::from_double(v, saturate);
                    });
                } else if constexpr (is_integer_output_v<O> && sizeof(O) <= 4) {
                    double lo = 0;
                    double hi = 0;
                    if constexpr (is_small_int_v<O>) {
                        lo = O::min;
                        hi = O::max;
                    } else {
                        lo = static_cast<double>(std::numeric_limits<O>::min());
                        hi = static_cast<double>(std::numeric_limits<O>::max());
                    }
                    layout.for_each(n, [&](std::size_t i, std::size_t s) {
                        const double z = zero != nullptr ? static_cast<double>(convert_element<std::int64_t>(zero[s])) : 0.0;
                        const double v = saturated_code(static_cast<double>(quotient(i, s)), z, lo, hi);
                        y[i] = convert_element<O>(static_cast<std::int64_t>(v));
                    });
                }
            });
        }
    });
}

// ---- dequantize_linear ----

shape dequantize_linear::compute_shape(const std::vector<shape>& inputs) const {
    check_scale(name(), inputs, axis, block_size);
    expect_quantized_type(name(), inputs[0].type(), "x (input 0)");
    ops::expect_floating(name(), inputs[1], "scale (input 1)");
    if (inputs.size() == 3 && inputs[2].type() != inputs[0].type())
        fail(error_kind::type_error, name() + ": zero_point (input 2) has dtype " + to_string(inputs[2].type()) +
                                         " but x has " + to_string(inputs[0].type()));
    return {inputs[1].type(), inputs[0].lens()};
}

void dequantize_linear::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape& xs = inputs[0].get_shape();
    const bool has_zero_point = inputs.size() == 3;
    std::vector<shape> shapes{xs, inputs[1].get_shape()};
    if (has_zero_point) shapes.push_back(inputs[2].get_shape());
    const scale_layout layout = check_scale(name(), shapes, axis, block_size);
    const std::size_t n = xs.elements();
    visit_any_type(xs.type(), [&](auto xtag) {
        using X = typename decltype(xtag)::type;
        if constexpr (is_integer_output_v<X> || is_small_float_v<X>) {
            argument x_copy, scale_copy, zero_copy;
            const X* x = standard_data<X>(inputs[0], x_copy);
            const X* zero = has_zero_point ? standard_data<X>(inputs[2], zero_copy) : nullptr;
            visit_type(result.get_shape().type(), [&](auto stag) {
                using S = typename decltype(stag)::type;
                if constexpr (is_float_like_v<S>) {
                    using C = ops::compute_t<S>;
                    const S* scale = standard_data<S>(inputs[1], scale_copy);
                    S* y = result.data_as<S>();
                    layout.for_each(n, [&](std::size_t i, std::size_t s) {
                        C d{};
                        if constexpr (is_small_float_v<X>) {
                            // float32, as ONNX's reference; subtracting a zero point of 0 keeps -0.
                            const float v = static_cast<float>(x[i]) - (zero ? static_cast<float>(zero[s]) : 0.0f);
                            d = static_cast<C>(v);
                        } else {
                            // The difference is exact in int64 before it meets the scale.
                            const std::int64_t v = convert_element<std::int64_t>(x[i]) -
                                                   (zero ? convert_element<std::int64_t>(zero[s]) : 0);
                            d = static_cast<C>(v);
                        }
                        y[i] = static_cast<S>(d * static_cast<C>(scale[s]));
                    });
                }
            });
        }
    });
}

}  // namespace kiln::op
