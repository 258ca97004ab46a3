#include "ops/topk.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/op_helpers.hpp"

namespace kiln::op {

shape topk::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 1);
    const shape& x = inputs[0];
    if (x.type() == dtype::bool_type) fail(error_kind::type_error, name() + ": input must be numeric, got bool_type");
    const std::size_t a = ops::normalize_axis(name(), axis, x.ndim());
    if (k < 0 || static_cast<std::size_t>(k) > x.lens()[a])
        fail(name() + ": k = " + std::to_string(k) + " must be between 0 and the extent " +
             std::to_string(x.lens()[a]) + " of axis " + std::to_string(axis) + " of " + to_string(x.lens()));
    if (output != 0 && output != 1)
        fail(name() + ": output must be 0 (values) or 1 (indices), got " + std::to_string(output));
    auto lens = x.lens();
    lens[a] = static_cast<std::size_t>(k);
    return {output == 0 ? x.type() : dtype::int64_type, lens};
}

void topk::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape& xs = inputs[0].get_shape();
    const shape& rs = result.get_shape();
    const std::size_t a = ops::normalize_axis(name(), axis, xs.ndim());
    const std::size_t n = xs.lens()[a];
    const auto count = static_cast<std::size_t>(k);
    // One line along the axis per position of the other dims.
    auto lines = xs.lens();
    lines[a] = 1;
    auto x_strides = xs.strides();
    auto r_strides = rs.strides();
    x_strides[a] = 0;
    r_strides[a] = 0;
    std::vector<std::size_t> order(n);
    visit_type(xs.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        using C = ops::compute_t<T>;
        const T* x = inputs[0].data_as<const T>();
        auto nan = [](C v) {
            if constexpr (std::is_floating_point_v<C>) return std::isnan(v);
            return false;
        };
        // Strict weak orders with NaN above every number; stable sorting keeps
        // lower indices first among equal values.
        auto before = [&](C u, C v) {
            if (largest) return nan(u) ? !nan(v) : (!nan(v) && u > v);
            return nan(u) ? false : (nan(v) || u < v);
        };
        ops::for_each_broadcast<2>(lines, {x_strides, r_strides}, [&](std::size_t, const std::size_t* off) {
            std::iota(order.begin(), order.end(), std::size_t{0});
            auto at = [&](std::size_t i) { return static_cast<C>(x[off[0] + i * xs.strides()[a]]); };
            std::stable_sort(order.begin(), order.end(),
                             [&](std::size_t i, std::size_t j) { return before(at(i), at(j)); });
            for (std::size_t i = 0; i < count; ++i) {
                const std::size_t dst = off[1] + i * rs.strides()[a];
                if (output == 0)
                    result.data_as<T>()[dst] = x[off[0] + order[i] * xs.strides()[a]];
                else
                    result.data_as<std::int64_t>()[dst] = static_cast<std::int64_t>(order[i]);
            }
        });
    });
}

}  // namespace kiln::op
