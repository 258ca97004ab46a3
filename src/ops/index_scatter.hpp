#pragma once
// Element-wise and n-dimensional gathers and scatters (ONNX GatherElements,
// GatherND, ScatterElements, ScatterND). Indices are int32 or int64 and may be
// negative (counting from the end); every index is checked before any element
// is read or written, and one outside its axis raises error_kind::out_of_range.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

// How a scatter combines an update with the value already there.
enum class scatter_reduction { none, add, mul, max, min };
inline std::span<const char* const> enum_names(scatter_reduction) {
    static constexpr const char* names[] = {"none", "add", "mul", "max", "min"};
    return names;
}

// gather_elements(data, indices): result[p] = data[p with p[axis] replaced by
// indices[p]]. indices has data's rank; the result has indices' lens.
struct gather_elements : op_base {
    std::int64_t axis = 0;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
    }
    std::string name() const { return "gather_elements"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// gather_nd(data, indices): the last dim of indices (length m) addresses the
// m dims of data after the first `batch_dims` (which data and indices share).
// The result has lens indices.lens[:-1] + data.lens[batch_dims + m:].
struct gather_nd : op_base {
    std::int64_t batch_dims = 0;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.batch_dims, "batch_dims");
    }
    std::string name() const { return "gather_nd"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// scatter_elements(data, indices, updates): a copy of data where, for each
// position p of indices, the element at p with p[axis] = indices[p] is
// replaced by (or combined with) updates[p]. With reduction none and repeated
// indices the last update wins.
struct scatter_elements : op_base {
    std::int64_t axis = 0;
    scatter_reduction reduction = scatter_reduction::none;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
        f(self.reduction, "reduction");
    }
    std::string name() const { return "scatter_elements"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// scatter_nd(data, indices, updates): indices [..., k] address slices
// data[i0, ..., ik-1, :...]; updates has lens indices.lens[:-1] + data.lens[k:].
struct scatter_nd : op_base {
    scatter_reduction reduction = scatter_reduction::none;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.reduction, "reduction");
    }
    std::string name() const { return "scatter_nd"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// scatter_nd_in_place(data, indices, updates): scatter_nd without a
// reduction that writes the updates into data's own memory; the result is
// data, updated (a view of it). What a language model's static KV cache
// update lowers to: the caller's cache is written where it lies, a few rows
// per token, instead of copied whole. data must be standard-strided and read
// by nothing else (the verifier checks it): whoever reads data's new value
// reads this result, so every read follows the write.
struct scatter_nd_in_place : op_base {
    std::string name() const { return "scatter_nd_in_place"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
    int output_alias(const std::vector<shape>&) const { return 0; }
    argument compute_alias(const shape& out, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
