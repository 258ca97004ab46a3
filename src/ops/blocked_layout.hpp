#pragma once
// The channel-blocked activation layout oneDNN's AVX2 convolutions run
// fastest in (nChw8c): a plain [N, C, H, W] tensor is stored as
// [N, C/8, H, W, 8], eight channels innermost. Kiln keeps such values as
// ordinary standard 5-D tensors, so views, elementwise ops and the memory
// planner need no notion of layout; only ops that know the layout (the
// fused convolution, to_blocked, from_blocked) interpret them. Pooling over
// H and W of a blocked tensor is 3-D pooling of the 5-D one with a unit
// window over the last dimension, and per-channel operands of elementwise
// ops are [1, C/8, 1, 1, 8]: ordinary ops on ordinary tensors.
// C must be a multiple of 8: no padding channels, so elementwise ops on two
// blocked tensors of one shape stay correct.
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

enum class tensor_layout { nchw, nchw8c };
inline std::span<const char* const> enum_names(tensor_layout) {
    static constexpr const char* names[] = {"nchw", "nchw8c"};
    return names;
}

}  // namespace kiln::op

namespace kiln::ops {

constexpr std::size_t channel_block = 8;

// Whether a plain shape can be blocked: 4-D float32 with C a multiple of 8.
bool can_block(const shape& plain);
// [N, C, H, W] -> [N, C/8, H, W, 8] (standard); fails naming `op` otherwise.
shape blocked_shape(const std::string& op, const shape& plain);
// [N, C/8, H, W, 8] -> [N, C, H, W] (standard).
shape unblocked_shape(const std::string& op, const shape& blocked);
// Copies values between the layouts (any strides on the plain side).
void block_values(const argument& plain, const argument& blocked);
void unblock_values(const argument& blocked, const argument& plain);

}  // namespace kiln::ops

namespace kiln::op {

// A plain [N, C, H, W] float32 tensor in the blocked layout.
struct to_blocked : op_base {
    std::string name() const { return "to_blocked"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// A blocked tensor back in the plain standard layout.
struct from_blocked : op_base {
    std::string name() const { return "from_blocked"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
