#pragma once
// Scaled dot-product attention as one op: what the fuse_attention pass makes
// of dot(q, kt) * scale (+ mask) -> softmax -> dot(., v), so that a kernel
// keeps each block of scores in cache instead of writing [.., Sq, Sk] out
// three times.
//
// Inputs: q [..., Sq, D], kt [..., D, Sk] (keys already transposed, as the
// first product takes them), v [..., Sk, Dv] and, with has_mask, a mask
// added to the scores, broadcasting to [..., Sq, Sk]. Batch dimensions
// broadcast as in dot. Result [..., Sq, Dv]:
//   softmax(scale * (q @ kt) + mask, last axis) @ v
// With nan_to_zero, probabilities that come out NaN (a row whose scores are
// all -inf, say) are 0: the guard exporters put after the softmax. With
// masked_rows_to_zero, a row whose scores (mask added) are all -inf has
// probabilities 0: PyTorch's guard, which leaves other NaN as they are.
// With causal, query row i sees key columns j <= i + Sk - Sq only (the
// others are masked out as by -inf; the last query sees every key, as in a
// decode step over a cache), Sk >= Sq: a mask by position that follows any
// Sq and Sk, where a constant mask would have fixed them.
// output_order, when not empty, is the order in which the result's dims lie
// in memory, outermost first (a permutation of them): with {0, 2, 1, 3} a
// [B, H, Sq, Dv] result is laid out as [B, Sq, H, Dv], so that the
// transpose exporters write after attention, and the reshape to [B, Sq,
// H * Dv] after it, are views instead of a copy.
// float16 / bfloat16 inputs compute as float32 (widened inputs, scores,
// softmax and product in float32) and the result is rounded to the 16-bit
// type once at the end (ops::compute_in_float32).
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

struct fused_attention : op_base {
    double scale = 1;
    bool has_mask = false;
    bool nan_to_zero = false;
    bool masked_rows_to_zero = false;
    bool causal = false;
    std::vector<std::int64_t> output_order;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.scale, "scale");
        f(self.has_mask, "has_mask");
        f(self.nan_to_zero, "nan_to_zero");
        f(self.masked_rows_to_zero, "masked_rows_to_zero");
        f(self.causal, "causal");
        f(self.output_order, "output_order");
    }
    std::string name() const { return "fused_attention"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    // The unfused ops' reference computes, one after another.
    void compute(const argument& result, const std::vector<argument>& inputs) const;
    // compute with float32 or float64 values.
    void compute_unwidened(const argument& result, const std::vector<argument>& inputs) const;
    // [..., Sq, Sk]
    shape scores_shape(const std::vector<shape>& inputs) const;
};

}  // namespace kiln::op
