#include "ops/cumsum.hpp"

#include "ops/op_helpers.hpp"

namespace kiln::op {

namespace {

shape scan_shape(const std::string& op, std::int64_t axis, const std::vector<shape>& inputs) {
    ops::expect_inputs(op, inputs, 1);
    if (inputs[0].type() == dtype::bool_type)
        fail(error_kind::type_error, op + ": input must be numeric, got bool_type");
    ops::normalize_axis(op, axis, inputs[0].ndim());
    return inputs[0].as_standard();
}

// Runs `combine` along every line of `axis`, starting from `identity`.
// 16-bit floats accumulate in float.
template <class Combine>
void scan(const std::string& op, std::int64_t axis, bool exclusive, bool reverse, double identity,
          const argument& result, const std::vector<argument>& inputs, Combine combine) {
    const shape& xs = inputs[0].get_shape();
    const shape& rs = result.get_shape();
    const std::size_t a = ops::normalize_axis(op, axis, xs.ndim());
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
                C acc = static_cast<C>(identity);
                for (std::size_t step = 0; step < n; ++step) {
                    const std::size_t i = reverse ? n - 1 - step : step;
                    const C v = static_cast<C>(x[off[0] + i * xs.strides()[a]]);
                    if (!exclusive) acc = static_cast<C>(combine(acc, v));
                    y[off[1] + i * rs.strides()[a]] = static_cast<T>(acc);
                    if (exclusive) acc = static_cast<C>(combine(acc, v));
                }
            });
        }
    });
}

}  // namespace

shape cumsum::compute_shape(const std::vector<shape>& inputs) const {
    return scan_shape(name(), axis, inputs);
}

void cumsum::compute(const argument& result, const std::vector<argument>& inputs) const {
    scan(name(), axis, exclusive, reverse, 0.0, result, inputs, [](auto acc, auto v) { return acc + v; });
}

shape cumprod::compute_shape(const std::vector<shape>& inputs) const {
    return scan_shape(name(), axis, inputs);
}

void cumprod::compute(const argument& result, const std::vector<argument>& inputs) const {
    scan(name(), axis, exclusive, reverse, 1.0, result, inputs, [](auto acc, auto v) { return acc * v; });
}

}  // namespace kiln::op
