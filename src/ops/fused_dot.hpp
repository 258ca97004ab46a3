#pragma once
// Matrix product (numpy.matmul semantics, as `dot`) with an optional bias
// along the last dimension and a post-op chain: what the cpu target's fusion
// pass turns dot + add + activation chains into. float32, except that the
// weights b may be float16 / bfloat16, or int8 codes read as their integer
// values (ops/narrow_weights.hpp: quantize_int8_weights' scales are a mul
// post-op); or float16 /
// bfloat16 throughout (a, b, bias, operands and result of one type), which
// computes as float32 from the widened inputs and rounds the result to the
// 16-bit type once at the end (ops::compute_in_float32).
// Inputs: a, b [, bias [cols]], then one operand per binary post-op.
#include <string>
#include <vector>

#include "kiln/operation.hpp"
#include "ops/post_ops.hpp"

namespace kiln::op {

struct fused_dot : op_base {
    bool has_bias = false;
    post_op_chain post;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.has_bias, "has_bias");
        f(self.post.kinds, "post_ops");
        f(self.post.alpha, "post_alpha");
        f(self.post.beta, "post_beta");
    }
    std::string name() const { return "fused_dot"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
    // compute for a float32 result.
    void compute_float32(const argument& result, const std::vector<argument>& inputs) const;
    std::size_t first_post_operand() const { return has_bias ? 3 : 2; }
};

}  // namespace kiln::op
