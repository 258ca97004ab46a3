#include "ops/index_scatter.hpp"

#include <algorithm>
#include <cstring>

#include "ops/op_helpers.hpp"

namespace kiln::op {

namespace {

using lens_t = std::vector<std::size_t>;

void expect_index_type(const std::string& op, const shape& s, const std::string& which) {
    if (s.type() != dtype::int32_type && s.type() != dtype::int64_type)
        fail(error_kind::type_error,
             op + ": " + which + " must be int32_type or int64_type, got " + to_string(s.type()));
}

void expect_reducible(const std::string& op, scatter_reduction r, const shape& data) {
    if (r != scatter_reduction::none && data.type() == dtype::bool_type)
        fail(error_kind::type_error, op + ": reduction '" + std::string(enum_names(r)[static_cast<std::size_t>(r)]) +
                                         "' is not defined for bool_type data");
}

std::int64_t read_index(const argument& indices, std::size_t offset) {
    if (indices.get_shape().type() == dtype::int32_type) return indices.data_as<const std::int32_t>()[offset];
    return indices.data_as<const std::int64_t>()[offset];
}

// `v` made non-negative, or an out_of_range error naming the op and the index.
std::size_t checked_index(const std::string& op, std::int64_t v, std::size_t axis, std::size_t extent) {
    const auto n = static_cast<std::int64_t>(extent);
    if (v < -n || v >= n)
        fail(error_kind::out_of_range,
             op + ": index " + std::to_string(v) + " is out of range for axis " + std::to_string(axis) + " of extent " +
                 std::to_string(extent) +
                 (n == 0 ? std::string(" (the axis is empty)")
                         : " (valid indices are " + std::to_string(-n) + " to " + std::to_string(n - 1) + ")"));
    return static_cast<std::size_t>(v < 0 ? v + n : v);
}

// Row-major walk over `lens` keeping the multi-index.
struct position {
    explicit position(lens_t l) : lens(std::move(l)), idx(lens.size(), 0) {}
    void next() {
        for (std::size_t d = lens.size(); d-- > 0;) {
            if (++idx[d] < lens[d]) return;
            idx[d] = 0;
        }
    }
    std::size_t offset(const lens_t& strides, std::size_t first = 0, std::size_t count = SIZE_MAX) const {
        std::size_t off = 0;
        const std::size_t end = std::min(idx.size(), first + std::min(count, idx.size()));
        for (std::size_t d = first; d < end; ++d) off += idx[d] * strides[d];
        return off;
    }
    lens_t lens;
    lens_t idx;
};

std::size_t product(const lens_t& lens) {
    std::size_t n = 1;
    for (auto l : lens) n *= l;
    return n;
}

lens_t tail(const lens_t& v, std::size_t from) {
    return {v.begin() + static_cast<std::ptrdiff_t>(from), v.end()};
}

template <class T>
T combine(scatter_reduction r, T old_value, T update) {
    using C = ops::compute_t<T>;
    if constexpr (std::is_same_v<T, bool>) {
        return update;
    } else {
        const auto a = static_cast<C>(old_value);
        const auto b = static_cast<C>(update);
        switch (r) {
            case scatter_reduction::none:
                return update;
            case scatter_reduction::add:
                return static_cast<T>(a + b);
            case scatter_reduction::mul:
                return static_cast<T>(a * b);
            case scatter_reduction::max:
                return static_cast<T>(std::max(a, b));
            case scatter_reduction::min:
                return static_cast<T>(std::min(a, b));
        }
        return update;
    }
}

// Writes update element `from[k]` into result element `to[k]` for every k,
// in order, so repeated targets see every update.
void scatter_into(scatter_reduction r, const argument& result, const argument& updates,
                  const std::vector<std::size_t>& to, const std::vector<std::size_t>& from) {
    visit_type(result.get_shape().type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* y = result.data_as<T>();
        const T* u = updates.data_as<const T>();
        for (std::size_t k = 0; k < to.size(); ++k) y[to[k]] = combine(r, y[to[k]], u[from[k]]);
    });
}

// Indices rank-matched to data, no larger than it off the axis.
void expect_element_indices(const std::string& op, const shape& data, const shape& indices, std::size_t axis) {
    if (indices.ndim() != data.ndim())
        fail(op + ": indices " + to_string(indices.lens()) + " must have the rank of data " + to_string(data.lens()));
    for (std::size_t d = 0; d < data.ndim(); ++d)
        if (d != axis && indices.lens()[d] > data.lens()[d])
            fail(op + ": indices " + to_string(indices.lens()) + " are larger than data " + to_string(data.lens()) +
                 " in dimension " + std::to_string(d) + " (only the axis " + std::to_string(axis) + " may differ)");
}

}  // namespace

// ---- gather_elements ----

shape gather_elements::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 2);
    expect_index_type(name(), inputs[1], "indices (input 1)");
    const std::size_t a = ops::normalize_axis(name(), axis, inputs[0].ndim());
    expect_element_indices(name(), inputs[0], inputs[1], a);
    return {inputs[0].type(), inputs[1].lens()};
}

void gather_elements::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape& ds = inputs[0].get_shape();
    const shape& is = inputs[1].get_shape();
    const std::size_t a = ops::normalize_axis(name(), axis, ds.ndim());
    std::vector<std::size_t> sources(is.elements());
    position p(is.lens());
    for (std::size_t j = 0; j < sources.size(); ++j, p.next()) {
        const std::size_t v = checked_index(name(), read_index(inputs[1], p.offset(is.strides())), a, ds.lens()[a]);
        sources[j] = p.offset(ds.strides()) - p.idx[a] * ds.strides()[a] + v * ds.strides()[a];
    }
    const std::size_t size = ds.element_size();
    for (std::size_t j = 0; j < sources.size(); ++j)
        std::memcpy(result.data() + j * size, inputs[0].data() + sources[j] * size, size);
}

// ---- gather_nd ----

shape gather_nd::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 2);
    const shape& data = inputs[0];
    const shape& indices = inputs[1];
    expect_index_type(name(), indices, "indices (input 1)");
    if (data.ndim() == 0 || indices.ndim() == 0)
        fail(name() + ": data " + to_string(data.lens()) + " and indices " + to_string(indices.lens()) +
             " must both have at least one dimension");
    const auto b = static_cast<std::size_t>(std::max<std::int64_t>(batch_dims, 0));
    if (batch_dims < 0 || b >= std::min(data.ndim(), indices.ndim()))
        fail(name() + ": batch_dims " + std::to_string(batch_dims) + " must be in [0, " +
             std::to_string(std::min(data.ndim(), indices.ndim())) + ") for data " + to_string(data.lens()) +
             " and indices " + to_string(indices.lens()));
    for (std::size_t d = 0; d < b; ++d)
        if (data.lens()[d] != indices.lens()[d])
            fail(name() + ": batch dimension " + std::to_string(d) + " differs between data " + to_string(data.lens()) +
                 " and indices " + to_string(indices.lens()));
    const std::size_t m = indices.lens().back();
    if (m < 1 || m > data.ndim() - b)
        fail(name() + ": the last dimension of indices " + to_string(indices.lens()) + " is " + std::to_string(m) +
             "; it must be between 1 and " + std::to_string(data.ndim() - b) + " (the rank of data after batch_dims)");
    lens_t lens(indices.lens().begin(), indices.lens().end() - 1);
    const lens_t rest = tail(data.lens(), b + m);
    lens.insert(lens.end(), rest.begin(), rest.end());
    return {data.type(), lens};
}

void gather_nd::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape& ds = inputs[0].get_shape();
    const shape& is = inputs[1].get_shape();
    const auto b = static_cast<std::size_t>(batch_dims);
    const std::size_t m = is.lens().back();
    const std::size_t last_stride = is.strides().back();
    // Offset of each addressed slice; all checked before copying.
    position p(lens_t(is.lens().begin(), is.lens().end() - 1));
    std::vector<std::size_t> bases(product(p.lens));
    for (std::size_t t = 0; t < bases.size(); ++t, p.next()) {
        std::size_t base = p.offset(ds.strides(), 0, b);
        const std::size_t row = p.offset(is.strides());
        for (std::size_t k = 0; k < m; ++k) {
            const std::int64_t v = read_index(inputs[1], row + k * last_stride);
            base += checked_index(name(), v, b + k, ds.lens()[b + k]) * ds.strides()[b + k];
        }
        bases[t] = base;
    }
    const shape inner{ds.type(), tail(ds.lens(), b + m), tail(ds.strides(), b + m)};
    const std::size_t count = inner.elements();
    const std::size_t size = ds.element_size();
    std::byte* out = result.data();
    for (std::size_t base : bases)
        for (std::size_t i = 0; i < count; ++i, out += size)
            std::memcpy(out, inputs[0].data() + (base + inner.index(i)) * size, size);
}

// ---- scatter_elements ----

shape scatter_elements::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 3);
    const shape& data = inputs[0];
    expect_index_type(name(), inputs[1], "indices (input 1)");
    if (inputs[2].type() != data.type())
        fail(error_kind::type_error, name() + ": updates (input 2) have dtype " + to_string(inputs[2].type()) +
                                         " but data has " + to_string(data.type()));
    if (inputs[2].lens() != inputs[1].lens())
        fail(name() + ": updates " + to_string(inputs[2].lens()) + " must have the lens of indices " +
             to_string(inputs[1].lens()));
    expect_reducible(name(), reduction, data);
    const std::size_t a = ops::normalize_axis(name(), axis, data.ndim());
    expect_element_indices(name(), data, inputs[1], a);
    return data.as_standard();
}

void scatter_elements::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape& is = inputs[1].get_shape();
    const shape& us = inputs[2].get_shape();
    const shape& rs = result.get_shape();
    const std::size_t a = ops::normalize_axis(name(), axis, rs.ndim());
    std::vector<std::size_t> to(is.elements()), from(is.elements());
    position p(is.lens());
    for (std::size_t j = 0; j < to.size(); ++j, p.next()) {
        const std::size_t v = checked_index(name(), read_index(inputs[1], p.offset(is.strides())), a, rs.lens()[a]);
        to[j] = p.offset(rs.strides()) - p.idx[a] * rs.strides()[a] + v * rs.strides()[a];
        from[j] = p.offset(us.strides());
    }
    copy_values(inputs[0], result);
    scatter_into(reduction, result, inputs[2], to, from);
}

// ---- scatter_nd ----

shape scatter_nd::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 3);
    const shape& data = inputs[0];
    const shape& indices = inputs[1];
    expect_index_type(name(), indices, "indices (input 1)");
    if (inputs[2].type() != data.type())
        fail(error_kind::type_error, name() + ": updates (input 2) have dtype " + to_string(inputs[2].type()) +
                                         " but data has " + to_string(data.type()));
    expect_reducible(name(), reduction, data);
    if (indices.ndim() == 0 || indices.lens().back() < 1 || indices.lens().back() > data.ndim())
        fail(name() + ": the last dimension of indices " + to_string(indices.lens()) +
             " must be between 1 and the rank of data " + to_string(data.lens()));
    lens_t expected(indices.lens().begin(), indices.lens().end() - 1);
    const lens_t rest = tail(data.lens(), indices.lens().back());
    expected.insert(expected.end(), rest.begin(), rest.end());
    if (inputs[2].lens() != expected)
        fail(name() + ": updates are " + to_string(inputs[2].lens()) + " but data " + to_string(data.lens()) +
             " and indices " + to_string(indices.lens()) + " need " + to_string(expected));
    return data.as_standard();
}

namespace {

// Writes each update slice of scatter_nd(_in_place) into `result`, which
// holds data's values already (a copy, or data itself).
void scatter_slices(const std::string& op, scatter_reduction reduction, const argument& result,
                    const std::vector<argument>& inputs) {
    const shape& is = inputs[1].get_shape();
    const shape& us = inputs[2].get_shape();
    const shape& rs = result.get_shape();
    const std::size_t k = is.lens().back();
    const shape inner = shape{rs.type(), tail(rs.lens(), k)};
    const std::size_t count = inner.elements();
    position p(lens_t(is.lens().begin(), is.lens().end() - 1));
    const std::size_t slices = product(p.lens);
    std::vector<std::size_t> to(slices * count), from(slices * count);
    for (std::size_t t = 0; t < slices; ++t, p.next()) {
        std::size_t base = 0;
        const std::size_t row = p.offset(is.strides());
        for (std::size_t d = 0; d < k; ++d) {
            const std::int64_t v = read_index(inputs[1], row + d * is.strides().back());
            base += checked_index(op, v, d, rs.lens()[d]) * rs.strides()[d];
        }
        for (std::size_t i = 0; i < count; ++i) {
            to[t * count + i] = base + i;  // the result is standard, so its inner slice is packed
            from[t * count + i] = us.index(t * count + i);
        }
    }
    scatter_into(reduction, result, inputs[2], to, from);
}

}  // namespace

void scatter_nd::compute(const argument& result, const std::vector<argument>& inputs) const {
    copy_values(inputs[0], result);
    scatter_slices(name(), reduction, result, inputs);
}

// ---- scatter_nd_in_place ----

shape scatter_nd_in_place::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 3);
    if (!inputs[0].standard())
        fail(name() + ": data (input 0) must be standard-strided to be written in place, got " +
             to_string(inputs[0]));
    scatter_nd checks;
    return checks.compute_shape(inputs);
}

argument scatter_nd_in_place::compute_alias(const shape& out, const std::vector<argument>& inputs) const {
    return inputs.at(0).reshaped(out, 0);
}

void scatter_nd_in_place::compute(const argument& result, const std::vector<argument>& inputs) const {
    // All indices are checked before the first write: an out-of-range one
    // leaves the caller's data as it was.
    scatter_slices(name(), scatter_reduction::none, result, inputs);
}

}  // namespace kiln::op
