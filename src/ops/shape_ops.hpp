#pragma once
// Shape ops: reshape, transpose, broadcast, slice, concat, squeeze, unsqueeze,
// flatten, split, contiguous and pad.
//
// Most of them are views: output_alias() returns 0 and compute_alias() points
// into input 0's memory with new lens, strides and a byte offset. Targets plan
// views by calling compute_alias on fake pointers, so it never reads data.
// Their compute() still works (it copies the view) for callers that want a
// materialized result.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

// Where a view lies in its input's memory: its shape (lens, strides) and the
// element offset of its first element.
struct view_layout {
    shape s;
    std::size_t offset = 0;
};

#define KILN_VIEW_OP_METHODS                                                         \
    view_layout layout(const shape& input) const;                                    \
    shape compute_shape(const std::vector<shape>& inputs) const;                     \
    void compute(const argument& result, const std::vector<argument>& inputs) const; \
    int output_alias(const std::vector<shape>&) const {                              \
        return 0;                                                                    \
    }                                                                                \
    argument compute_alias(const shape& out, const std::vector<argument>& inputs) const;

// New lens with the same elements in row-major order. A dim of -1 is inferred
// (at most one); 0 copies the input's extent at that index, as in ONNX.
// A view of a standard input; a standard copy otherwise.
struct reshape : op_base {
    std::vector<std::int64_t> dims;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.dims, "dims");
    }
    std::string name() const { return "reshape"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
    int output_alias(const std::vector<shape>& inputs) const;
    argument compute_alias(const shape& out, const std::vector<argument>& inputs) const;
};

// Output dim i is input dim permutation[i]; an empty permutation reverses the dims.
struct transpose : op_base {
    std::vector<std::int64_t> permutation;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.permutation, "permutation");
    }
    std::string name() const { return "transpose"; }
    KILN_VIEW_OP_METHODS
};

// numpy broadcasting to out_lens: dims align to the right; a dim of 1 repeats (stride 0).
struct broadcast : op_base {
    std::vector<std::size_t> out_lens;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.out_lens, "out_lens");
    }
    std::string name() const { return "broadcast"; }
    KILN_VIEW_OP_METHODS
};

// ONNX Slice: starts and ends are clamped to the dim (negative counts from
// the end); axes defaults to the first starts.size() dims, steps to 1.
struct slice : op_base {
    std::vector<std::int64_t> axes;
    std::vector<std::int64_t> starts;
    std::vector<std::int64_t> ends;
    std::vector<std::int64_t> steps;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axes, "axes");
        f(self.starts, "starts");
        f(self.ends, "ends");
        f(self.steps, "steps");
    }
    std::string name() const { return "slice"; }
    KILN_VIEW_OP_METHODS
};

// Joins inputs of one dtype along `axis`; the other dims must be equal.
struct concat : op_base {
    std::int64_t axis = 0;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
    }
    std::string name() const { return "concat"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// Removes dims of extent 1: those in `axes`, or all of them when it is empty.
struct squeeze : op_base {
    std::vector<std::int64_t> axes;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axes, "axes");
    }
    std::string name() const { return "squeeze"; }
    KILN_VIEW_OP_METHODS
};

// Inserts dims of extent 1 at `axes`, positions in the output.
struct unsqueeze : op_base {
    std::vector<std::int64_t> axes;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axes, "axes");
    }
    std::string name() const { return "unsqueeze"; }
    KILN_VIEW_OP_METHODS
};

// 2-D [prod(lens[:axis]), prod(lens[axis:])]. A view of a standard input; a copy otherwise.
struct flatten : op_base {
    std::int64_t axis = 1;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
    }
    std::string name() const { return "flatten"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
    int output_alias(const std::vector<shape>& inputs) const;
    argument compute_alias(const shape& out, const std::vector<argument>& inputs) const;
};

// One piece of a split along `axis`: piece `output` of `sizes` (which sum to
// the extent), or of `num_outputs` equal pieces when `sizes` is empty. A graph
// uses one split instruction per piece.
struct split : op_base {
    std::int64_t axis = 0;
    std::vector<std::int64_t> sizes;
    std::int64_t num_outputs = 0;
    std::int64_t output = 0;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.axis, "axis");
        f(self.sizes, "sizes");
        f(self.num_outputs, "num_outputs");
        f(self.output, "output");
    }
    std::string name() const { return "split"; }
    KILN_VIEW_OP_METHODS
};

// A standard-strided copy of any input.
struct contiguous : op_base {
    std::string name() const { return "contiguous"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

#undef KILN_VIEW_OP_METHODS

// What pad writes outside the input: a constant, the mirror image without the
// edge (numpy "reflect"), or the edge repeated.
enum class pad_mode { constant, reflect, edge };
inline std::span<const char* const> enum_names(pad_mode) {
    static constexpr const char* names[] = {"constant", "reflect", "edge"};
    return names;
}

// pads = [begin_0, ..., begin_{r-1}, end_0, ..., end_{r-1}], all non-negative.
struct pad : op_base {
    std::vector<std::int64_t> pads;
    pad_mode mode = pad_mode::constant;
    double value = 0.0;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.pads, "pads");
        f(self.mode, "mode");
        f(self.value, "value");
    }
    std::string name() const { return "pad"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
