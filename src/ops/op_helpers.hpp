#pragma once
// Checks and loops shared by the op families.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/argument.hpp"
#include "kiln/operation.hpp"

namespace kiln::ops {

// Throws unless there are exactly `n` inputs.
void expect_inputs(const std::string& op, const std::vector<shape>& inputs, std::size_t n);
// Throws unless the input count is in [lo, hi].
void expect_inputs(const std::string& op, const std::vector<shape>& inputs, std::size_t lo, std::size_t hi);
// Throws unless every input has the dtype of the first.
void expect_same_type(const std::string& op, const std::vector<shape>& inputs);
void expect_floating(const std::string& op, const shape& s, const std::string& which = "input");
void expect_type(const std::string& op, const shape& s, dtype t, const std::string& which = "input");
// Maps a possibly negative axis into [0, rank); throws naming the op otherwise.
std::size_t normalize_axis(const std::string& op, std::int64_t axis, std::size_t rank);
std::vector<std::size_t> normalize_axes(const std::string& op, const std::vector<std::int64_t>& axes, std::size_t rank);

// Whether every byte of `a`'s data is 0: an integer tensor (a zero point) of zeros.
inline bool all_bytes_zero(const argument& a) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(a.data());
    for (std::size_t i = 0; i < a.get_shape().bytes(); ++i)
        if (bytes[i] != 0) return false;
    return true;
}

// numpy broadcasting of several lens; throws naming the op on a mismatch.
std::vector<std::size_t> broadcast_lens(const std::string& op, const std::vector<shape>& inputs);
// Strides that read `in` as if it had lens `out_lens` (0 on broadcast dims).
std::vector<std::size_t> broadcast_strides(const shape& in, const std::vector<std::size_t>& out_lens);

// Calls f(out_index, in_offsets) for every element of `out_lens` in row-major
// order, where in_offsets[k] is the element offset into input k given its
// (broadcast) strides. Dims of length 1 are dropped and neighbours that every
// input walks contiguously are merged first, and the innermost dim runs as a
// plain loop: constant folding evaluates masks of millions of elements with
// it (GPT-2's causal mask at 2048 positions is 4M), and a per-element walk
// of every dim made those evaluations most of a compile.
template <std::size_t N, class F>
void for_each_broadcast(const std::vector<std::size_t>& out_lens,
                        const std::vector<std::vector<std::size_t>>& in_strides, F&& f) {
    std::size_t total = 1;
    for (auto l : out_lens) total *= l;
    if (total == 0) return;
    // The walk's dims, outermost first: lens and each input's strides.
    std::vector<std::size_t> lens;
    std::vector<std::array<std::size_t, N>> strides;
    for (std::size_t d = 0; d < out_lens.size(); ++d) {
        if (out_lens[d] == 1) continue;
        std::array<std::size_t, N> at{};
        for (std::size_t k = 0; k < N; ++k) at[k] = in_strides[k][d];
        bool merges = !lens.empty();
        for (std::size_t k = 0; k < N && merges; ++k) merges = strides.back()[k] == at[k] * out_lens[d];
        if (merges) {
            lens.back() *= out_lens[d];
            strides.back() = at;
        } else {
            lens.push_back(out_lens[d]);
            strides.push_back(at);
        }
    }
    std::size_t offsets[N] = {};
    if (lens.empty()) {
        f(0, static_cast<const std::size_t*>(offsets));
        return;
    }
    const std::size_t rank = lens.size();
    const std::size_t inner = lens[rank - 1];
    const std::array<std::size_t, N> step = strides[rank - 1];
    std::vector<std::size_t> idx(rank, 0);
    std::size_t base[N] = {};
    for (std::size_t i = 0; i < total; i += inner) {
        for (std::size_t k = 0; k < N; ++k) offsets[k] = base[k];
        for (std::size_t j = 0; j < inner; ++j) {
            f(i + j, static_cast<const std::size_t*>(offsets));
            for (std::size_t k = 0; k < N; ++k) offsets[k] += step[k];
        }
        for (std::size_t d = rank - 1; d-- > 0;) {
            ++idx[d];
            for (std::size_t k = 0; k < N; ++k) base[k] += strides[d][k];
            if (idx[d] < lens[d]) break;
            for (std::size_t k = 0; k < N; ++k) base[k] -= strides[d][k] * idx[d];
            idx[d] = 0;
        }
    }
}

// The arithmetic type used to evaluate T: float for 16-bit floats.
template <class T>
struct compute_type {
    using type = T;
};
template <>
struct compute_type<half> {
    using type = float;
};
template <>
struct compute_type<bfloat16> {
    using type = float;
};
template <class T>
using compute_t = typename compute_type<T>::type;

}  // namespace kiln::ops
