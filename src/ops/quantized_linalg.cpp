#include "ops/quantized_linalg.hpp"

#include <cmath>

#include "ops/linalg.hpp"
#include "ops/op_helpers.hpp"
#include "ops/quant.hpp"

namespace kiln::op {

namespace {

// Checks the operands of a quantized product: `x` int8 / uint8, `w` int8
// and, when given, one zero point of x's dtype, then (up to `max_inputs`)
// one of w's.
void check_operands(const std::string& op, const std::vector<shape>& inputs, const char* x_name, const char* w_name,
                    std::size_t max_inputs = 3) {
    ops::expect_inputs(op, inputs, 2, max_inputs);
    if (!is_8bit_integer(inputs[0].type()))
        fail(error_kind::type_error,
             op + ": " + x_name + " (input 0) must be int8 or uint8, got " + to_string(inputs[0].type()));
    ops::expect_type(op, inputs[1], dtype::int8_type, std::string(w_name) + " (input 1)");
    if (inputs.size() == 3) {
        ops::expect_type(op, inputs[2], inputs[0].type(), "zero point (input 2)");
        if (inputs[2].elements() != 1)
            fail(op + ": the zero point (input 2) must be one value, got " + to_string(inputs[2].lens()));
    }
    if (inputs.size() == 4) {
        ops::expect_type(op, inputs[3], inputs[1].type(), std::string(w_name) + "'s zero point (input 3)");
        if (inputs[3].elements() != 1)
            fail(op + ": " + w_name + "'s zero point (input 3) must be one value, got " + to_string(inputs[3].lens()));
    }
}

// The zero point at input `index`; 0 when absent.
std::int64_t zero_point_of(const std::vector<argument>& inputs, std::size_t index = 2) {
    if (inputs.size() <= index) return 0;
    return static_cast<std::int64_t>(inputs[index].value_at(0));
}

// The values of `a` minus `offset`, as a standard tensor of type `t`. Every
// 8-bit difference and every sum of their products over a layer is exact in
// the wider type (int32 for products that accumulate in int64, double below 2^53).
argument centered_copy(const argument& a, std::int64_t offset, dtype t) {
    const shape& s = a.get_shape();
    argument out(shape{t, s.lens()});
    std::vector<std::vector<std::size_t>> strides{s.strides()};
    visit_type(s.type(), [&](auto in_tag) {
        using I = typename decltype(in_tag)::type;
        if constexpr (std::is_integral_v<I> && !std::is_same_v<I, bool>) {
            const I* p = a.data_as<const I>();
            visit_type(t, [&](auto out_tag) {
                using O = typename decltype(out_tag)::type;
                if constexpr (std::is_same_v<O, double> || std::is_same_v<O, std::int32_t>) {
                    O* q = out.data_as<O>();
                    ops::for_each_broadcast<1>(s.lens(), strides, [&](std::size_t i, const std::size_t* off) {
                        q[i] = static_cast<O>(static_cast<std::int64_t>(p[off[0]]) - offset);
                    });
                }
            });
        }
    });
    return out;
}

}  // namespace

// ---- quant_convolution ----

convolution quant_convolution::as_convolution() const {
    convolution c;
    c.padding = padding;
    c.stride = stride;
    c.dilation = dilation;
    c.group = group;
    return c;
}

shape quant_convolution::compute_shape(const std::vector<shape>& inputs) const {
    check_operands(name(), inputs, "x", "w");
    // The float convolution checks the geometry (ranks, channels, groups, window).
    const shape geometry =
        as_convolution().compute_shape({shape{dtype::float_type, inputs[0].lens()}, shape{dtype::float_type, inputs[1].lens()}});
    return {dtype::int32_type, geometry.lens()};
}

void quant_convolution::compute(const argument& result, const std::vector<argument>& inputs) const {
    // The float convolution over exact doubles: |sum| < 2^53 for any layer
    // that fits in memory, so every value is the integer sum; zero padding
    // there is the centered zero point here.
    const argument x = centered_copy(inputs[0], zero_point_of(inputs), dtype::double_type);
    const argument w = centered_copy(inputs[1], 0, dtype::double_type);
    const convolution conv = as_convolution();
    const argument sums = operation(conv).evaluate(conv.compute_shape({x.get_shape(), w.get_shape()}), {x, w});
    const double* s = sums.data_as<const double>();
    auto* y = result.data_as<std::int32_t>();
    for (std::size_t i = 0; i < result.get_shape().elements(); ++i) y[i] = static_cast<std::int32_t>(s[i]);
}

// ---- quant_dot ----

shape quant_dot::compute_shape(const std::vector<shape>& inputs) const {
    check_operands(name(), inputs, "a", "b", 4);
    const shape product = dot{}.compute_shape({shape{dtype::int32_type, inputs[0].lens()}, shape{dtype::int32_type, inputs[1].lens()}});
    return {dtype::int32_type, product.lens()};
}

void quant_dot::compute(const argument& result, const std::vector<argument>& inputs) const {
    // dot accumulates int32 operands in int64; an 8-bit layer's sums fit int32.
    const argument a = centered_copy(inputs[0], zero_point_of(inputs), dtype::int32_type);
    const argument b = centered_copy(inputs[1], zero_point_of(inputs, 3), dtype::int32_type);
    dot{}.compute(result, {a, b});
}

}  // namespace kiln::op
