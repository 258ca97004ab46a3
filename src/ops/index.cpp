#include "ops/index.hpp"

#include <cstring>

#include "ops/op_helpers.hpp"

namespace kiln::op {

shape gather::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 2);
    const shape& data = inputs[0];
    const shape& indices = inputs[1];
    if (indices.type() != dtype::int32_type && indices.type() != dtype::int64_type)
        fail(error_kind::type_error,
             "gather: indices (input 1) must be int32_type or int64_type, got " + to_string(indices.type()));
    const std::size_t a = ops::normalize_axis(name(), axis, data.ndim());
    std::vector<std::size_t> lens(data.lens().begin(), data.lens().begin() + static_cast<std::ptrdiff_t>(a));
    lens.insert(lens.end(), indices.lens().begin(), indices.lens().end());
    lens.insert(lens.end(), data.lens().begin() + static_cast<std::ptrdiff_t>(a) + 1, data.lens().end());
    return {data.type(), lens};
}

namespace {

// Every index, checked and made non-negative, before anything is read.
std::vector<std::size_t> checked_positions(const argument& indices, std::size_t axis, std::size_t extent) {
    const shape& s = indices.get_shape();
    std::vector<std::size_t> out(s.elements());
    const auto n = static_cast<std::int64_t>(extent);
    auto check = [&](auto* p) {
        for (std::size_t j = 0; j < out.size(); ++j) {
            const auto v = static_cast<std::int64_t>(p[s.index(j)]);
            if (v < -n || v >= n)
                fail(error_kind::out_of_range,
                     "gather: index " + std::to_string(v) + " is out of range for axis " + std::to_string(axis) +
                         " of extent " + std::to_string(extent) +
                         (n == 0 ? std::string(" (the axis is empty)")
                                 : " (valid indices are " + std::to_string(-n) + " to " + std::to_string(n - 1) + ")"));
            out[j] = static_cast<std::size_t>(v < 0 ? v + n : v);
        }
    };
    if (s.type() == dtype::int32_type)
        check(indices.data_as<const std::int32_t>());
    else
        check(indices.data_as<const std::int64_t>());
    return out;
}

}  // namespace

void gather::compute(const argument& result, const std::vector<argument>& inputs) const {
    const argument& data = inputs[0];
    const shape& ds = data.get_shape();
    const std::size_t a = ops::normalize_axis(name(), axis, ds.ndim());
    const auto positions = checked_positions(inputs[1], a, ds.lens()[a]);
    if (result.get_shape().elements() == 0) return;

    // data read as [outer, axis, inner], each part keeping its own strides.
    auto part = [&](std::size_t begin, std::size_t end) {
        auto b = static_cast<std::ptrdiff_t>(begin);
        auto e = static_cast<std::ptrdiff_t>(end);
        return shape{ds.type(),
                     {ds.lens().begin() + b, ds.lens().begin() + e},
                     {ds.strides().begin() + b, ds.strides().begin() + e}};
    };
    const shape outer = part(0, a);
    const shape inner = part(a + 1, ds.ndim());
    const std::size_t inner_count = inner.elements();
    const std::size_t size = ds.element_size();
    const bool inner_packed = inner.standard();
    std::byte* out = result.data();
    for (std::size_t o = 0; o < outer.elements(); ++o) {
        const std::size_t outer_offset = outer.index(o);
        for (std::size_t p : positions) {
            const std::byte* src = data.data() + (outer_offset + p * ds.strides()[a]) * size;
            if (inner_packed) {
                std::memcpy(out, src, inner_count * size);
            } else {
                for (std::size_t i = 0; i < inner_count; ++i)
                    std::memcpy(out + i * size, src + inner.index(i) * size, size);
            }
            out += inner_count * size;
        }
    }
}

}  // namespace kiln::op
