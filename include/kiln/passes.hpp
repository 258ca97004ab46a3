#pragma once
// The target-independent passes. Targets list the ones they want in
// get_passes(); each is also usable on its own through run_passes.
#include <cstddef>
#include <memory>
#include <string>

#include "kiln/pass.hpp"

namespace kiln {

// Erases instructions whose results nobody uses (never params or the return).
class dead_code_elimination final : public pass {
public:
    std::string name() const override { return "dead_code_elimination"; }
    void apply(module& m) const override;
};

// Keeps one instruction per (op, attributes, inputs) and one literal per
// (shape, bytes); the duplicates' users move to the survivor.
class common_subexpression_elimination final : public pass {
public:
    std::string name() const override { return "common_subexpression_elimination"; }
    void apply(module& m) const override;
};

// Evaluates instructions computed only from literals with the ops' reference
// compute and replaces them by literals, within size limits.
class constant_propagation final : public pass {
public:
    // No folded literal is larger than this.
    std::size_t max_bytes = std::size_t{64} << 20;
    // A folded literal larger than this must not be larger than the literals
    // it is computed from, so folding never multiplies constant data.
    std::size_t small_bytes = std::size_t{64} << 10;
    // Whether dequantize_linear of a constant folds into a float constant.
    // Pipelines that run fuse_quantized_ops turn it off before that pass,
    // which needs to see the int8 weights.
    bool fold_dequantize = true;

    std::string name() const override { return "constant_propagation"; }
    // Values already folded from the same literals' bytes in this process
    // (passes/shared_derived_values.hpp) are taken, not computed again.
    void apply(module& m) const override;
};

// Cancels and merges transpose, reshape and broadcast chains and removes
// no-op reshape / transpose / contiguous / broadcast / squeeze / unsqueeze.
class simplify_reshapes final : public pass {
public:
    std::string name() const override { return "simplify_reshapes"; }
    void apply(module& m) const override;
};

// Arithmetic identities, constant-chain reassociation and exact folding of
// constant scales into matmul weights (see simplify_algebra.cpp for which
// identities are allowed and why).
class simplify_algebra final : public pass {
public:
    std::string name() const override { return "simplify_algebra"; }
    void apply(module& m) const override;
};

// Turns convolution and dot into fused_convolution / fused_dot and folds the
// bias, activations and residual adds or scales that follow them into the
// fused op's post-op chain (see fuse_post_ops.cpp for the exact rules).
class fuse_post_ops final : public pass {
public:
    // Whether float16 / bfloat16 convolutions and dots fuse too (every value
    // of one fused op in the same 16-bit type); off for targets whose fused
    // kernels are float32 only.
    bool fuse_16bit_floats = false;

    std::string name() const override { return "fuse_post_ops"; }
    void apply(module& m) const override;
};

// A product over rows that a reshape merged from leading dims ([b, s, K]
// viewed as [b * s, K], torch's linear) takes the leading dims themselves,
// and its readers reshape its [b, s, N] result as they reshaped the rows'
// (see products_keep_leading_dims.cpp).
class products_keep_leading_dims final : public pass {
public:
    std::string name() const override { return "products_keep_leading_dims"; }
    void apply(module& m) const override;
};

// Turns int8 quantize -> dequantize pairs with zero point -128 (a
// non-negative range, what ONNX Runtime's S8S8 files write after each ReLU)
// into uint8 pairs with zero point 0: the same levels, every code plus 128,
// so results stay bit-identical while int8 kernels read u8 sources without
// a zero point (see unsigned_activation_codes.cpp for what is left alone).
class unsigned_activation_codes final : public pass {
public:
    std::string name() const override { return "unsigned_activation_codes"; }
    void apply(module& m) const override;
};

// Rewrites int8 QDQ pairs with any per-tensor constant zero point z, whose
// dequantized values are read only as the first (source) input of dots and
// convolutions, into uint8 pairs with zero point z + 128: the same levels,
// so results stay bit-identical, while oneDNN's int8 products read u8
// sources (see unsigned_product_source_codes.cpp). Runs after
// unsigned_activation_codes.
class unsigned_product_source_codes final : public pass {
public:
    std::string name() const override { return "unsigned_product_source_codes"; }
    void apply(module& m) const override;
};

// Rewrites QDQ convolutions and dots (dequantized int8 activations and
// weights) into quant_convolution / quant_dot followed by one dequantize,
// cancels quantize / dequantize pairs and moves dequantize below views,
// max pooling and concats so that int8 flows between quantized layers (see
// fuse_quantized_ops.cpp for the exact rules and what is declined).
class fuse_quantized_ops final : public pass {
public:
    // Whether quantized convolutions become quant_convolution; a target with
    // an int8 matrix product but no int8 convolution keeps them float.
    bool convolutions = true;

    std::string name() const override { return "fuse_quantized_ops"; }
    void apply(module& m) const override;
};

// Replaces the decompositions of GELU that exporters write (erf and tanh
// forms, any association of the products) by the gelu op.
class fuse_gelu final : public pass {
public:
    std::string name() const override { return "fuse_gelu"; }
    void apply(module& m) const override;
};

// Replaces layer normalization spelled out with reduce_mean, sub, pow,
// sqrt and div (and the scale and bias after it) by the layer_norm op.
class fuse_layer_norm final : public pass {
public:
    // Whether a float32 layer_norm between converts from and to one 16-bit
    // type (what quantize_fp16 / quantize_bf16 write, keeping layer_norm in
    // float32) becomes a layer_norm in that type: for targets whose kernel
    // accumulates the statistics in float itself (the gpu target).
    bool fuse_16bit_floats = false;

    std::string name() const override { return "fuse_layer_norm"; }
    void apply(module& m) const override;
};

// Replaces RMS normalization spelled out with pow (or mul), reduce_mean,
// add, rsqrt and mul (and the scale after it) by the rms_norm op. Targets
// with an rms_norm kernel run it (the cpu target).
class fuse_rms_norm final : public pass {
public:
    std::string name() const override { return "fuse_rms_norm"; }
    void apply(module& m) const override;
};

// A softmax (with the mask added before it) or a layer_norm read only by
// per-tensor 8-bit quantize_linear ops becomes softmax_quantize /
// layer_norm_quantize, which write the codes in one pass (see
// fuse_quantized_norm.cpp for what is declined).
class fuse_quantized_norm final : public pass {
public:
    std::string name() const override { return "fuse_quantized_norm"; }
    void apply(module& m) const override;
};

// Replaces scaled dot-product attention, dot(softmax(dot(q, kt) * scale
// (+ mask)), v) with its scales, mask and NaN guard in the forms exporters
// write, by fused_attention.
class fuse_attention final : public pass {
public:
    // Whether 16-bit attention whose softmax runs in float32 between two
    // converts (what quantize_fp16 / quantize_bf16 write) fuses too.
    bool fuse_16bit_floats = false;
    // Whether attention over key/value heads repeated by a copy (grouped-
    // query attention) reads the unrepeated heads instead, over one more
    // batch dimension (passes/attention_repeated_heads.cpp).
    bool read_repeated_heads_in_place = false;

    std::string name() const override { return "fuse_attention"; }
    void apply(module& m) const override;
};

// fused_attention whose mask is a constant that masks out exactly the key
// columns past i + Sk - Sq of each query row i (and adds 0 elsewhere) gets
// the causal flag instead, for targets whose kernel masks by position (see
// causal_attention_masks.cpp).
class causal_attention_masks final : public pass {
public:
    std::string name() const override { return "causal_attention_masks"; }
    void apply(module& m) const override;
};

// Turns groups of elementwise instructions (chains and trees, numpy
// broadcasts included) into single fused_pointwise instructions; see
// fuse_pointwise.cpp for which groups form.
class fuse_pointwise final : public pass {
public:
    // Whether groups of float16 / bfloat16 values (one 16-bit type per group,
    // with bool) fuse too; off for targets whose kernel runs float32 only.
    bool fuse_16bit_floats = false;

    std::string name() const override { return "fuse_pointwise"; }
    void apply(module& m) const override;
};

}  // namespace kiln
