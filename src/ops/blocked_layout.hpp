#pragma once
// The channel-blocked activation layouts oneDNN's convolutions run fastest
// in: nChw8c on AVX2 (a plain [N, C, H, W] tensor stored as
// [N, C/8, H, W, 8], eight channels innermost) and nChw16c on AVX-512
// ([N, C/16, H, W, 16], one 512-bit vector of channels); the block of a
// blocked tensor is its last dimension. Kiln keeps such values as
// ordinary standard 5-D tensors, so views, elementwise ops and the memory
// planner need no notion of layout; only ops that know the layout (the
// fused convolution, to_blocked, from_blocked) interpret them. Pooling over
// H and W of a blocked tensor is 3-D pooling of the 5-D one with a unit
// window over the last dimension, and per-channel operands of elementwise
// ops are [1, C/8, 1, 1, 8]: ordinary ops on ordinary tensors.
// C that is not a multiple of the block is padded up to the next block with
// channels that hold zeros (oneDNN's padded blocked layout): a 24-channel
// tensor in 16-channel blocks is [N, 2, H, W, 16]. Every op that writes a
// padded tensor keeps those channels zero (convolutions zero them; only
// elementwise ops that map zeros to zero run on one), so a convolution that
// reads them multiplies zeros by its zero-padded weights. Only a fused
// convolution (from its weights) and from_blocked (its `channels`) know how
// many channels are real.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

enum class tensor_layout { nchw, nchw8c, nchw16c };
inline std::span<const char* const> enum_names(tensor_layout) {
    static constexpr const char* names[] = {"nchw", "nchw8c", "nchw16c"};
    return names;
}

}  // namespace kiln::op

namespace kiln::ops {

// The block of the AVX2 layout; Kiln's own blocked kernels (8-float AVX2
// vectors) run only in it.
constexpr std::size_t avx2_channel_block = 8;
constexpr std::size_t avx512_channel_block = 16;

// The channels per block of a layout (0 for nchw) and the layout of a block.
std::size_t channel_block(op::tensor_layout layout);
bool is_blocked(op::tensor_layout layout);
op::tensor_layout blocked_layout(const std::string& op, std::size_t block);

// Whether a plain shape can be blocked without padding: 4-D float32 with C a
// multiple of `block`.
bool can_block(const shape& plain, std::size_t block);
// The blocks that hold `channels` channels: ceil(channels / block).
std::size_t padded_blocks(std::size_t channels, std::size_t block);
// [N, C, H, W] -> [N, ceil(C/b), H, W, b] (standard); fails naming `op`
// unless `plain` is 4-D float32 with C > 0.
shape blocked_shape(const std::string& op, const shape& plain, std::size_t block);
// [N, B, H, W, b] -> [N, C, H, W] (standard), b 8 or 16, where C is
// `channels` (which must need exactly B blocks) or B * b when 0.
shape unblocked_shape(const std::string& op, const shape& blocked, std::size_t channels = 0);
// Copies values between the layouts (any strides on the plain side; the
// block is the blocked side's last dimension); block_values writes zeros to
// the padding channels.
void block_values(const argument& plain, const argument& blocked);
void unblock_values(const argument& blocked, const argument& plain);
// Sets the channels of a blocked tensor from `channels` on to zero.
void zero_channel_padding(const argument& blocked, std::size_t channels);

}  // namespace kiln::ops

namespace kiln::op {

// A plain [N, C, H, W] float32 tensor in the blocked layout of `block`
// channels (8 or 16).
struct to_blocked : op_base {
    std::int64_t block = ops::avx2_channel_block;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.block, "block");
    }
    std::string name() const { return "to_blocked"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

// A blocked tensor back in the plain standard layout: its first `channels`
// channels (all of them when 0; fewer where the blocked tensor is padded).
struct from_blocked : op_base {
    std::int64_t channels = 0;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.channels, "channels");
    }
    std::string name() const { return "from_blocked"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
