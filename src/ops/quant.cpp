#include "ops/quant.hpp"

#include <cmath>
#include <limits>

#include "ops/op_helpers.hpp"

namespace kiln::op {

namespace {

bool is_quantized_type(dtype t) {
    return t == dtype::int8_type || t == dtype::uint8_type || t == dtype::int16_type || t == dtype::uint16_type ||
           t == dtype::int32_type;
}

void expect_quantized_type(const std::string& op, dtype t, const std::string& which) {
    if (!is_quantized_type(t))
        fail(error_kind::type_error,
             op + ": " + which + " must be int8, uint8, int16, uint16 or int32, got " + to_string(t));
}

// Checks scale (and zero point) against x; returns the axis along which they
// vary, or -1 for one value for the whole tensor.
std::int64_t check_scale(const std::string& op, const std::vector<shape>& inputs, std::int64_t axis) {
    ops::expect_inputs(op, inputs, 2, 3);
    const shape& x = inputs[0];
    const shape& scale = inputs[1];
    // One value for the tensor may be held as a scalar or as {1} in either input.
    auto single = [](const shape& s) { return s.elements() == 1 && s.ndim() <= 1; };
    if (inputs.size() == 3 && inputs[2].lens() != scale.lens() && !(single(inputs[2]) && single(scale)))
        fail(op + ": zero_point " + to_string(inputs[2].lens()) + " must have the lens of scale " +
             to_string(scale.lens()));
    if (scale.elements() == 1 && scale.ndim() <= 1) return -1;
    if (scale.ndim() != 1)
        fail(op + ": scale " + to_string(scale.lens()) +
             " must be a scalar or 1-D (blocked quantization is not supported)");
    const std::size_t a = ops::normalize_axis(op, axis, x.ndim());
    if (scale.lens()[0] != x.lens()[a])
        fail(op + ": scale has " + std::to_string(scale.lens()[0]) + " values but axis " + std::to_string(axis) +
             " of input " + to_string(x.lens()) + " has extent " + std::to_string(x.lens()[a]));
    return static_cast<std::int64_t>(a);
}

// Strides that read a scale or zero point as if it had x's lens.
std::vector<std::size_t> spread_strides(const shape& x, const shape& param, std::int64_t axis) {
    std::vector<std::size_t> strides(x.ndim(), 0);
    if (axis >= 0) strides[static_cast<std::size_t>(axis)] = param.strides()[0];
    return strides;
}

template <class T>
std::int64_t integer_at(const argument& a, std::size_t offset) {
    return static_cast<std::int64_t>(a.data_as<const T>()[offset]);
}

// Zero points as int64 in x's layout (0 when absent).
std::int64_t zero_point_at(const std::vector<argument>& inputs, std::size_t offset) {
    if (inputs.size() < 3) return 0;
    return visit_type(inputs[2].get_shape().type(), [&](auto tag) -> std::int64_t {
        using Z = typename decltype(tag)::type;
        if constexpr (std::is_integral_v<Z>) return integer_at<Z>(inputs[2], offset);
        return 0;
    });
}

}  // namespace

// ---- quantize_linear ----

shape quantize_linear::compute_shape(const std::vector<shape>& inputs) const {
    check_scale(name(), inputs, axis);
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
    const std::int64_t a = check_scale(name(), {xs, inputs[1].get_shape()}, axis);
    std::vector<std::vector<std::size_t>> strides{
        xs.strides(), spread_strides(xs, inputs[1].get_shape(), a),
        inputs.size() == 3 ? spread_strides(xs, inputs[2].get_shape(), a) : std::vector<std::size_t>(xs.ndim(), 0)};
    visit_type(xs.type(), [&](auto xtag) {
        using T = typename decltype(xtag)::type;
        if constexpr (is_float_like_v<T>) {
            using C = ops::compute_t<T>;
            const T* x = inputs[0].data_as<const T>();
            const T* scale = inputs[1].data_as<const T>();
            visit_type(result.get_shape().type(), [&](auto otag) {
                using O = typename decltype(otag)::type;
                if constexpr (std::is_integral_v<O> && !std::is_same_v<O, bool> && sizeof(O) <= 4) {
                    O* y = result.data_as<O>();
                    constexpr auto lo = static_cast<double>(std::numeric_limits<O>::min());
                    constexpr auto hi = static_cast<double>(std::numeric_limits<O>::max());
                    ops::for_each_broadcast<3>(xs.lens(), strides, [&](std::size_t i, const std::size_t* off) {
                        // rint rounds half to even in the default rounding mode.
                        const C q = std::rint(static_cast<C>(x[off[0]]) / static_cast<C>(scale[off[1]]));
                        double v = static_cast<double>(q) + static_cast<double>(zero_point_at(inputs, off[2]));
                        if (std::isnan(v)) v = static_cast<double>(zero_point_at(inputs, off[2]));  // no NaN code
                        y[i] = static_cast<O>(std::min(hi, std::max(lo, v)));
                    });
                }
            });
        }
    });
}

// ---- dequantize_linear ----

shape dequantize_linear::compute_shape(const std::vector<shape>& inputs) const {
    check_scale(name(), inputs, axis);
    expect_quantized_type(name(), inputs[0].type(), "x (input 0)");
    ops::expect_floating(name(), inputs[1], "scale (input 1)");
    if (inputs.size() == 3 && inputs[2].type() != inputs[0].type())
        fail(error_kind::type_error, name() + ": zero_point (input 2) has dtype " + to_string(inputs[2].type()) +
                                         " but x has " + to_string(inputs[0].type()));
    return {inputs[1].type(), inputs[0].lens()};
}

void dequantize_linear::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape& xs = inputs[0].get_shape();
    const std::int64_t a = check_scale(name(), {xs, inputs[1].get_shape()}, axis);
    std::vector<std::vector<std::size_t>> strides{
        xs.strides(), spread_strides(xs, inputs[1].get_shape(), a),
        inputs.size() == 3 ? spread_strides(xs, inputs[2].get_shape(), a) : std::vector<std::size_t>(xs.ndim(), 0)};
    visit_type(xs.type(), [&](auto xtag) {
        using X = typename decltype(xtag)::type;
        if constexpr (std::is_integral_v<X> && !std::is_same_v<X, bool>) {
            visit_type(result.get_shape().type(), [&](auto stag) {
                using S = typename decltype(stag)::type;
                if constexpr (is_float_like_v<S>) {
                    using C = ops::compute_t<S>;
                    const S* scale = inputs[1].data_as<const S>();
                    S* y = result.data_as<S>();
                    ops::for_each_broadcast<3>(xs.lens(), strides, [&](std::size_t i, const std::size_t* off) {
                        // The difference is exact in int64 before it meets the scale.
                        const std::int64_t d = integer_at<X>(inputs[0], off[0]) - zero_point_at(inputs, off[2]);
                        y[i] = static_cast<S>(static_cast<C>(d) * static_cast<C>(scale[off[1]]));
                    });
                }
            });
        }
    });
}

}  // namespace kiln::op
