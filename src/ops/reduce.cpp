#include "ops/reduce.hpp"

#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/op_helpers.hpp"

namespace kiln::op {

namespace {

using ops::compute_t;

void expect_numeric(const std::string& op, const shape& s) {
    if (s.type() == dtype::bool_type)
        fail(error_kind::type_error, op + ": input must be a numeric type, got " + to_string(s.type()));
}

// Reference accumulation: double for every float type, 64-bit for integers
// (integer results wrap to the input type as numpy's do).
template <class T>
using accumulator_t = std::conditional_t<is_float_like_v<T>, double,
                                         std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>>;

template <class A>
bool is_nan(A v) {
    if constexpr (std::is_floating_point_v<A>)
        return std::isnan(v);
    else
        return false;
}

template <class A, class T>
A to_accumulator(T x) {
    if constexpr (is_float_like_v<T>)
        return static_cast<A>(static_cast<compute_t<T>>(x));
    else
        return static_cast<A>(x);
}

template <class T, class A>
T from_accumulator(A a) {
    if constexpr (is_float_like_v<T>)
        return T(static_cast<compute_t<T>>(a));
    else
        return static_cast<T>(a);
}

// The value a reduction over no elements yields (ONNX: -inf / lowest for max).
template <class T, class A>
A initial_value(reduction kind) {
    switch (kind) {
        case reduction::sum:
        case reduction::mean:
            return A(0);
        case reduction::prod:
            return A(1);
        case reduction::max:
            if constexpr (is_float_like_v<T>)
                return -std::numeric_limits<A>::infinity();
            else
                return static_cast<A>(std::numeric_limits<T>::lowest());
        case reduction::min:
            if constexpr (is_float_like_v<T>)
                return std::numeric_limits<A>::infinity();
            else
                return static_cast<A>(std::numeric_limits<T>::max());
    }
    return A(0);
}

// max and min propagate NaN, as numpy's do.
template <class A>
A combine(reduction kind, A acc, A x) {
    switch (kind) {
        case reduction::sum:
        case reduction::mean:
            return acc + x;
        case reduction::prod:
            return acc * x;
        case reduction::max:
            return is_nan(acc) ? acc : (is_nan(x) || x > acc ? x : acc);
        case reduction::min:
            return is_nan(acc) ? acc : (is_nan(x) || x < acc ? x : acc);
    }
    return acc;
}

// lens with every reduced dimension set to 1.
std::vector<std::size_t> kept_lens(const shape& in, const std::vector<bool>& reduced) {
    auto lens = in.lens();
    for (std::size_t d = 0; d < lens.size(); ++d)
        if (reduced[d]) lens[d] = 1;
    return lens;
}

shape output_shape(dtype type, const std::vector<std::size_t>& lens, const std::vector<bool>& reduced, bool keepdims) {
    std::vector<std::size_t> out;
    for (std::size_t d = 0; d < lens.size(); ++d) {
        if (!reduced[d])
            out.push_back(lens[d]);
        else if (keepdims)
            out.push_back(1);
    }
    return {type, out};
}

std::vector<bool> reduced_mask(const std::string& op, const std::vector<std::int64_t>& axes, std::size_t rank) {
    std::vector<bool> reduced(rank, axes.empty());
    for (auto a : ops::normalize_axes(op, axes, rank)) reduced[a] = true;
    return reduced;
}

}  // namespace

shape reduce_op::reduce_shape(const std::string& op, const std::vector<shape>& inputs) const {
    ops::expect_inputs(op, inputs, 1);
    expect_numeric(op, inputs[0]);
    auto reduced = reduced_mask(op, axes, inputs[0].ndim());
    return output_shape(inputs[0].type(), kept_lens(inputs[0], reduced), reduced, keepdims);
}

void reduce_op::reduce_compute(reduction kind, const argument& result, const std::vector<argument>& inputs) const {
    const shape& in = inputs[0].get_shape();
    auto reduced = reduced_mask("reduce", axes, in.ndim());
    // Output strides laid over the input's lens: 0 along reduced axes, so
    // every input element finds the output element it folds into.
    auto out_strides = shape::standard_strides(kept_lens(in, reduced));
    std::size_t count = 1;
    for (std::size_t d = 0; d < in.ndim(); ++d)
        if (reduced[d]) {
            out_strides[d] = 0;
            count *= in.lens()[d];
        }
    visit_type(in.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (!std::is_same_v<T, bool>) {
            using A = accumulator_t<T>;
            const T* x = inputs[0].data_as<T>();
            T* y = result.data_as<T>();
            std::vector<A> acc(result.get_shape().elements(), initial_value<T, A>(kind));
            ops::for_each_broadcast<2>(in.lens(), {in.strides(), out_strides},
                                       [&](std::size_t, const std::size_t* off) {
                                           acc[off[1]] = combine(kind, acc[off[1]], to_accumulator<A>(x[off[0]]));
                                       });
            for (std::size_t i = 0; i < acc.size(); ++i) {
                A v = acc[i];
                if (kind == reduction::mean) {
                    if constexpr (std::is_floating_point_v<A>)
                        v = v / static_cast<A>(count);
                    else
                        v = count == 0 ? A(0) : v / static_cast<A>(count);
                }
                y[i] = from_accumulator<T>(v);
            }
        }
    });
}

shape arg_reduce_op::arg_shape(const std::string& op, const std::vector<shape>& inputs) const {
    ops::expect_inputs(op, inputs, 1);
    expect_numeric(op, inputs[0]);
    const shape& in = inputs[0];
    std::size_t a = ops::normalize_axis(op, axis, in.ndim());
    if (in.lens()[a] == 0) fail(op + ": axis " + std::to_string(axis) + " of " + to_string(in.lens()) + " is empty");
    std::vector<bool> reduced(in.ndim(), false);
    reduced[a] = true;
    return output_shape(dtype::int64_type, kept_lens(in, reduced), reduced, keepdims);
}

void arg_reduce_op::arg_compute(bool want_max, const argument& result, const std::vector<argument>& inputs) const {
    const shape& in = inputs[0].get_shape();
    std::size_t a = ops::normalize_axis(want_max ? "argmax" : "argmin", axis, in.ndim());
    std::vector<bool> reduced(in.ndim(), false);
    reduced[a] = true;
    // Offsets of the first element of each slice along the axis.
    auto base_strides = in.strides();
    base_strides[a] = 0;
    const std::size_t length = in.lens()[a];
    const std::size_t step = in.strides()[a];
    std::int64_t* y = result.data_as<std::int64_t>();
    visit_type(in.type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        using C = compute_t<T>;
        const T* x = inputs[0].data_as<T>();
        auto better = [&](C v, C best) {
            if (is_nan(v)) return !is_nan(best) || select_last_index;
            if (is_nan(best)) return false;
            if (v == best) return select_last_index;
            return want_max ? best < v : v < best;
        };
        ops::for_each_broadcast<1>(kept_lens(in, reduced), {base_strides}, [&](std::size_t i, const std::size_t* off) {
            C best = static_cast<C>(x[off[0]]);
            std::size_t best_k = 0;
            for (std::size_t k = 1; k < length; ++k) {
                C v = static_cast<C>(x[off[0] + k * step]);
                if (better(v, best)) {
                    best = v;
                    best_k = k;
                }
            }
            y[i] = static_cast<std::int64_t>(best_k);
        });
    });
}

}  // namespace kiln::op
