#include "ops/cumsum.hpp"

#include "ops/op_helpers.hpp"

namespace kiln::op {

shape cumsum::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 1);
    if (inputs[0].type() == dtype::bool_type)
        fail(error_kind::type_error, name() + ": input must be numeric, got bool_type");
    ops::normalize_axis(name(), axis, inputs[0].ndim());
    return inputs[0].as_standard();
}

void cumsum::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape& xs = inputs[0].get_shape();
    const shape& rs = result.get_shape();
    const std::size_t a = ops::normalize_axis(name(), axis, xs.ndim());
    const std::size_t n = xs.lens()[a];
    auto lines = xs.lens();
    lines[a] = 1;
    auto x_strides = xs.strides();
    auto r_strides = rs.strides();
    x_strides[a] = 0;
    r_strides[a] = 0;
    visit_type(xs.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (!std::is_same_v<T, bool>) {
            using C = ops::compute_t<T>;
            const T* x = inputs[0].data_as<const T>();
            T* y = result.data_as<T>();
            ops::for_each_broadcast<2>(lines, {x_strides, r_strides}, [&](std::size_t, const std::size_t* off) {
                C sum = 0;
                for (std::size_t step = 0; step < n; ++step) {
                    const std::size_t i = reverse ? n - 1 - step : step;
                    const C v = static_cast<C>(x[off[0] + i * xs.strides()[a]]);
                    if (!exclusive) sum = static_cast<C>(sum + v);
                    y[off[1] + i * rs.strides()[a]] = static_cast<T>(sum);
                    if (exclusive) sum = static_cast<C>(sum + v);
                }
            });
        }
    });
}

}  // namespace kiln::op
