#pragma once
// Convolution with an optional per-channel bias and a post-op chain, in
// plain or blocked layout: what the cpu target's fusion and layout passes
// turn convolution + add + activation + residual chains into. float32, except
// that the weights may be float16 / bfloat16 (ops/narrow_weights.hpp); or
// float16 / bfloat16 throughout (x, w, bias, operands and result of one
// type), which computes as float32 from the widened inputs and rounds the
// result to the 16-bit type once at the end (ops::compute_in_float32).
//
// Inputs: x, w [, bias [M]], then one operand per binary post-op (in the
// output's layout). x and the result are [N, C, ...] plain or, with a
// blocked layout, [N, C/8, H, W, 8] (nchw8c) or [N, C/16, H, W, 16] (nchw16c)
// (ops/blocked_layout.hpp), padded with zero channels where C is not a
// multiple of the block: the weights say how many input channels are real,
// and the padding channels of a blocked result are zero.
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/operation.hpp"
#include "ops/blocked_layout.hpp"
#include "ops/conv.hpp"
#include "ops/post_ops.hpp"

namespace kiln::op {

struct fused_convolution : op_base {
    convolution conv;  // the convolution before its bias and post-ops
    bool has_bias = false;
    post_op_chain post;
    tensor_layout input_layout = tensor_layout::nchw;
    tensor_layout output_layout = tensor_layout::nchw;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        // The convolution's own attributes keep their names, unnested.
        convolution::reflect(self.conv, f);
        f(self.has_bias, "has_bias");
        f(self.post.kinds, "post_ops");
        f(self.post.alpha, "post_alpha");
        f(self.post.beta, "post_beta");
        f(self.input_layout, "input_layout");
        f(self.output_layout, "output_layout");
    }
    std::string name() const { return "fused_convolution"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
    // compute for a float32 result.
    void compute_float32(const argument& result, const std::vector<argument>& inputs) const;

    // The shapes of x (inputs[0]) and of the convolution's result in the plain
    // layout; a blocked x has as many channels as the weights read.
    shape plain_input_shape(const std::vector<shape>& inputs) const;
    shape plain_output_shape(const std::vector<shape>& inputs) const;
    std::size_t first_post_operand() const { return has_bias ? 3 : 2; }
};

}  // namespace kiln::op
