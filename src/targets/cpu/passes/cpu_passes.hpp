#pragma once
// Passes only the cpu target runs: they choose layouts its kernels want.
#include <cstddef>

#include "kiln/pass.hpp"

namespace kiln {

// Runs float16 / bfloat16 programs in float32 with their weights kept 16-bit
// (this CPU computes 16-bit types no faster than float32): activations are
// float32, dot / convolution read 16-bit literal weights directly, and the
// program's inputs and outputs keep their types (compute_16bit_in_float32.cpp).
class compute_16bit_in_float32 final : public pass {
public:
    std::string name() const override { return "compute_16bit_in_float32"; }
    void apply(module& m) const override;
};

// Turns dot(a, dequantize_linear(int8 codes, scale)) with constant codes
// [K, N], symmetric, one scale per column or per tensor (what
// quantize_int8_weights writes), into fused_dot(a, codes) with the scales
// as a mul post-op: the product's kernels stream the codes, a quarter of
// float32's bytes, and widen them in registers (int8_weight_products.cpp).
class int8_weight_products final : public pass {
public:
    std::string name() const override { return "int8_weight_products"; }
    void apply(module& m) const override;
};

// Moves convolutions (and the concats and elementwise ops between them) to
// a channel-blocked layout, so that a chain of convolutions stays blocked
// with no reorder in between: nChw16c where the CPU has AVX-512 (oneDNN's
// AVX-512 kernels want a 512-bit vector of channels), nChw8c otherwise
// (oneDNN's AVX2 kernels and Kiln's own blocked ones). A module runs in one
// block, so no reorders between blocks arise: values of C a multiple of 8
// block, padded with zero channels to whole blocks of 16 where needed (the
// 24-channel layers of MobileNetV2).
// Values leave the blocked region through from_blocked where a plain-layout
// op reads them; the ones nobody reads are removed.
class propagate_blocked_layout final : public pass {
public:
    propagate_blocked_layout() = default;
    explicit propagate_blocked_layout(std::size_t preferred_block) : preferred_block_(preferred_block) {}
    std::string name() const override { return "propagate_blocked_layout"; }
    void apply(module& m) const override;

private:
    std::size_t preferred_block_ = 8;
};

// Turns a float32 convolution whose kernel tiles its input exactly (stride
// equal to a kernel of at least 4 taps, no padding or dilation, one group:
// ViT's patch embedding) into a matrix product of its input's patches by its
// weights, which oneDNN's matmul runs at several times the convolution's
// rate (patch_convolutions_as_products.cpp).
class patch_convolutions_as_products final : public pass {
public:
    std::string name() const override { return "patch_convolutions_as_products"; }
    void apply(module& m) const override;
};

// Turns a fused_pointwise that reads a concat nobody else reads into one
// fused_concat_pointwise, when the cpu kernel for it can run the program:
// the concatenation is then never stored (DenseNet's pre-activation batch
// norm + ReLU over each dense layer's concatenated features). A per-tensor
// quantize_linear that alone reads such an op joins it as its quantized
// result (int8 DenseNet quantizes that value for the next convolution),
// stored channels-last for that convolution where its readers allow; an
// int8 convolution whose float result only such ops read (DenseNet's new
// features) then stores it channels-last too: no reorders around them;
// where that float result is its own codes dequantized (QDQ's quantize ->
// dequantize), it stores the codes, which those ops read as coded pieces.
// A 4-D program over a single feature map that only such a quantize reads
// (DenseNet's transitions and stem) becomes the fused op of one piece, so
// that it too writes channels-last codes in one pass.
class fuse_concat_pointwise final : public pass {
public:
    std::string name() const override { return "fuse_concat_pointwise"; }
    void apply(module& m) const override;
};

}  // namespace kiln

namespace kiln {

// An int8 convolution with a float result that only a 2-D average pool reads
// (a DenseNet transition) stores it channels-last, and the pool pools it into a
// channels-last result: no reorder of the convolution's result, and the next
// block reads the pool's result without a copy (channels_last_average_pools.cpp).
class channels_last_average_pools final : public pass {
public:
    std::string name() const override { return "channels_last_average_pools"; }
    void apply(module& m) const override;
};

// An int8 convolution with a float result that only reductions read (a
// global average pool) stores it channels-last where the cpu reduce kernel
// reads that layout: no reorder of the result (channels_last_spatial_reductions.cpp).
class channels_last_spatial_reductions final : public pass {
public:
    std::string name() const override { return "channels_last_spatial_reductions"; }
    void apply(module& m) const override;
};

// A float32 NCHW value that several channels-last fused_concat_pointwise
// ops read as a piece (a DenseNet block's input, read by every layer of the
// block) is copied once into channels-last order, which they read instead
// of each gathering its strided channels (channels_last_concat_pieces.cpp).
class channels_last_concat_pieces final : public pass {
public:
    std::string name() const override { return "channels_last_concat_pieces"; }
    void apply(module& m) const override;
};

// Folds the dequantize, bias, activations, residual add and quantize after
// each quant_convolution / quant_dot into one fused_quant_convolution /
// fused_quant_dot that oneDNN's int8 kernels run (see
// fuse_quantized_epilogues.cpp); 4-D int8 results are stored channels-last.
class fuse_quantized_epilogues final : public pass {
public:
    std::string name() const override { return "fuse_quantized_epilogues"; }
    void apply(module& m) const override;
};

}  // namespace kiln

namespace kiln {

// Float32 weight literals take the layout their products' algorithm reads
// (product_weight_layouts.cpp), made once: one read only through
// transposes (nn.Linear's [N, K] weight used as x . W^T) by products of two
// rows or more (oneDNN, the few-row streaming loop) becomes its transposed
// values, row-major [K, N], as from an ONNX MatMul initializer; a row-major
// [K, N] one that only one-row products read (a decode step: GPT-2's Conv1D,
// an ONNX decoder) becomes [N, K] read through a transpose, for the column
// loop. Weights another reader needs as they are (a tied embedding's
// gather) keep their layout and are stored once.
class product_weight_layouts final : public pass {
public:
    // One layout for every extent of a dynamic program: every transposed
    // weight view that products alone read becomes row-major, also where a
    // column loop would read it as stored (its one-row extents then run the
    // row-major streaming loop), and row-major weights stay so.
    bool for_every_extent = false;
    // In a program optimised at an extent of a range: the column loop keeps
    // one to three rows, as the extents 1..3 then share the [N, K] layout (so
    // that the range's cuts do not part them into programs of their own),
    // and row-major weights are never copied to [N, K] (no second copy of the
    // weights for the one-row extent).
    bool within_a_range = false;

    std::string name() const override { return "product_weight_layouts"; }
    void apply(module& m) const override;
};

}  // namespace kiln
