#include "ops/linalg.hpp"

#include <type_traits>

#include "ops/op_helpers.hpp"

namespace kiln::ops {

matrices as_matrices(const shape& s, bool left) {
    matrices m;
    const auto& lens = s.lens();
    const auto& strides = s.strides();
    const std::size_t n = s.ndim();
    if (n == 1) {
        if (left) {
            m.cols = lens[0];
            m.col_stride = strides[0];
        } else {
            m.rows = lens[0];
            m.row_stride = strides[0];
        }
        return m;
    }
    m.batch_lens.assign(lens.begin(), lens.end() - 2);
    m.batch_strides.assign(strides.begin(), strides.end() - 2);
    m.rows = lens[n - 2];
    m.cols = lens[n - 1];
    m.row_stride = strides[n - 2];
    m.col_stride = strides[n - 1];
    return m;
}

}  // namespace kiln::ops

namespace kiln::op {

namespace {

// Strides reading `m`'s batch as if it had lens `out` (0 on broadcast dims).
std::vector<std::size_t> batch_strides_for(const ops::matrices& m, const std::vector<std::size_t>& out) {
    std::vector<std::size_t> strides(out.size(), 0);
    const std::size_t pad = out.size() - m.batch_lens.size();
    for (std::size_t i = 0; i < m.batch_lens.size(); ++i)
        if (m.batch_lens[i] != 1) strides[pad + i] = m.batch_strides[i];
    return strides;
}

std::vector<std::size_t> broadcast_batch(const shape& a, const shape& b) {
    ops::matrices ma = ops::as_matrices(a, true);
    ops::matrices mb = ops::as_matrices(b, false);
    try {
        return ops::broadcast_lens("dot", {shape{a.type(), ma.batch_lens}, shape{b.type(), mb.batch_lens}});
    } catch (const error&) {
        fail("dot: batch dimensions of " + to_string(a.lens()) + " and " + to_string(b.lens()) +
             " cannot be broadcast together");
    }
}

template <class T>
using accumulator_t = std::conditional_t<is_float_like_v<T>, double,
                                         std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>>;

}  // namespace

shape dot::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 2);
    ops::expect_same_type(name(), inputs);
    const shape& a = inputs[0];
    const shape& b = inputs[1];
    if (a.type() == dtype::bool_type)
        fail(error_kind::type_error, "dot: inputs must be a numeric type, got " + to_string(a.type()));
    if (a.ndim() == 0 || b.ndim() == 0)
        fail("dot: operands must have at least one dimension, got " + to_string(a.lens()) + " and " +
             to_string(b.lens()));
    ops::matrices ma = ops::as_matrices(a, true);
    ops::matrices mb = ops::as_matrices(b, false);
    if (ma.cols != mb.rows)
        fail("dot: inner dimensions of " + to_string(a.lens()) + " and " + to_string(b.lens()) + " do not match (" +
             std::to_string(ma.cols) + " vs " + std::to_string(mb.rows) + ")");
    auto lens = broadcast_batch(a, b);
    if (a.ndim() > 1) lens.push_back(ma.rows);
    if (b.ndim() > 1) lens.push_back(mb.cols);
    return {a.type(), lens};
}

void dot::compute(const argument& result, const std::vector<argument>& inputs) const {
    const shape& sa = inputs[0].get_shape();
    const shape& sb = inputs[1].get_shape();
    ops::matrices ma = ops::as_matrices(sa, true);
    ops::matrices mb = ops::as_matrices(sb, false);
    auto batch = broadcast_batch(sa, sb);
    const std::size_t rows = ma.rows, cols = mb.cols, inner = ma.cols;
    visit_type(sa.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (!std::is_same_v<T, bool>) {
            using A = accumulator_t<T>;
            const T* x = inputs[0].data_as<T>();
            const T* w = inputs[1].data_as<T>();
            T* y = result.data_as<T>();
            ops::for_each_broadcast<2>(
                batch, {batch_strides_for(ma, batch), batch_strides_for(mb, batch)},
                [&](std::size_t i, const std::size_t* off) {
                    T* out = y + i * rows * cols;
                    for (std::size_t r = 0; r < rows; ++r)
                        for (std::size_t c = 0; c < cols; ++c) {
                            A acc = 0;
                            for (std::size_t k = 0; k < inner; ++k)
                                acc += static_cast<A>(x[off[0] + r * ma.row_stride + k * ma.col_stride]) *
                                       static_cast<A>(w[off[1] + k * mb.row_stride + c * mb.col_stride]);
                            out[r * cols + c] = T(static_cast<ops::compute_t<T>>(acc));
                        }
                });
        }
    });
}

}  // namespace kiln::op
