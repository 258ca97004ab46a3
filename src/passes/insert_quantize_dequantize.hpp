#pragma once
// The graph side of post-training quantization (kiln::quantize_int8 / fp8):
// which float inputs of which instructions get quantized, and inserting the
// dequantize_linear(quantize_linear(x, scale[, zero_point])) pairs with
// their scales. Calibration (running the program to learn activation
// ranges) lives above the targets, in src/quantize.
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/module.hpp"

namespace kiln {

// One float value that feeds chosen instructions and is to be quantized.
struct quantized_value {
    instruction_ref value;
    // The (instruction, input index) uses to reroute through the new pair;
    // other users keep reading the float value.
    std::vector<std::pair<instruction_ref, std::size_t>> uses;
    // A constant (computed from literals only): quantized from its own
    // values, without calibration.
    bool is_weight = false;
    // For weights: the axis of output channels (convolution: 0; dot's
    // second input: its last axis), -1 when the value has none.
    std::int64_t channel_axis = -1;
};

// The float inputs to quantize of the instructions in `m` whose op is named
// in `ins_names` ("all" stands for every op in `supported_ops`) and that
// `exclude` does not name. An exclude entry is an instruction's printed name
// ("@12", a parameter's name) or origin (an ONNX node's name, which all the
// node's instructions carry) and must name an instruction of `m`; an op
// name outside `supported_ops` is an error. Inputs that are already the
// result of dequantize_linear are left alone. `caller` prefixes errors.
std::vector<quantized_value> plan_quantized_values(module& m, const std::vector<std::string>& ins_names,
                                                   const std::vector<std::string>& exclude,
                                                   const std::vector<std::string>& supported_ops,
                                                   const std::string& caller);

// For int8 between ResNet blocks, as in ONNX Runtime's QDQ models (at the
// cost of rounding the residual): reroutes, through an activation's pair,
// the residual adds that read it, add(x, convolution(...) [+ constant
// bias]) whose convolution is quantized too; and where two quantized
// convolutions meet in an add (a block and its downsampling shortcut),
// plans the first one's result as an activation to quantize for that add.
// The residual then reaches the other convolution's int8 epilogue in int8.
void add_residual_uses(module& m, std::vector<quantized_value>& planned);

// For int8 through a max pooling that float ops read (DenseNet's stem:
// convolution, ReLU, max pooling, then a concat and a batch norm), as in
// ONNX Runtime's QDQ models: plans the pooling's input, a quantized
// convolution's result (through a constant bias add and a ReLU / clip), as
// an activation to quantize for the pooling. The convolution then writes
// codes, the pooling runs on them and one dequantize after it feeds the
// float readers, instead of a float result 4x the bytes pooled in float.
// Max pooling commutes with the (monotone) rounding, so only the float
// readers see the rounding. A pooling whose result is itself planned (ResNet's
// stem, read only by quantized convolutions) is left as it is.
void add_max_pooling_uses(module& m, std::vector<quantized_value>& planned);

// The quantized type and how its scales are chosen.
struct quantization_scheme {
    dtype type = dtype::int8_type;
    // Largest magnitude of the quantized type that weights use (127 for
    // int8: symmetric, -128 unused; 448 for float8 e4m3fn).
    double weight_limit = 127;
    bool weights_per_channel = true;
    // Activations: int8 maps [min(lo, 0), max(hi, 0)] onto -128..127 with a
    // zero point; without one, [-a, a] (a = max |lo|, |hi|) onto +-activation_limit.
    bool activation_zero_point = true;
    double activation_limit = 127;
    // int8 with a zero point only: an activation never seen below 0 (after
    // a ReLU, ReLU6, a clip at 0 or a max pooling of one) is uint8 with
    // zero point 0 instead, the same levels (scale hi / 255) as int8 with
    // zero point -128. oneDNN's int8 kernels take u8 sources as they are
    // (VNNI's u8 x s8 product) and skip the zero point's compensation
    // (PT2E's x86 quantizer and OpenVINO choose U8S8 likewise).
    bool unsigned_nonnegative_activations = false;
};

// Type, scale and zero point of an activation whose values were seen in
// [lo, hi]. `unsigned_allowed`: whether every use of the value takes
// uint8 codes (accepts_unsigned_codes); when not, a non-negative range
// stays int8. `any_range_unsigned` (with unsigned_nonnegative_activations):
// a range below 0 is uint8 too, with the zero point int8's plus 128 (the
// same scale and levels, so the same values), for sources of int8 products
// (reads_only_as_product_source), which oneDNN's u8 x s8 kernels compute
// about 1.3x faster than s8 x s8 ones.
struct activation_quantization {
    float scale = 1;
    std::int64_t zero_point = 0;
    dtype type = dtype::int8_type;
};
activation_quantization choose_activation_quantization(double lo, double hi, const quantization_scheme& scheme,
                                                       bool unsigned_allowed = true, bool any_range_unsigned = false);

// Whether every chosen use of activation `v` takes uint8 codes once fused:
// a quantized convolution's or dot's source and a quantized residual do;
// the second operand of a dot of two activations (attention's products)
// does not, since oneDNN's int8 matmul wants s8 weights.
bool accepts_unsigned_codes(const quantized_value& v);

// Whether every chosen use of activation `v` is the first input of a dot
// (a product's source rows: a transformer's normalized rows, GELU outputs,
// attention's queries and probabilities).
bool reads_only_as_product_source(const quantized_value& v);

// Per-channel (or per-tensor) symmetric scales for constant `weights`:
// max |w| over each channel / `limit`; 1 for a channel of zeros (any scale
// represents zero exactly).
std::vector<float> choose_weight_scales(const argument& weights, std::int64_t channel_axis, double limit);

// The value of a constant instruction, evaluated with the reference compute
// (no size limit: weights are as large as they are).
argument evaluate_constant(const instruction& ins);

// Inserts the pair for an activation before its first chosen use and
// reroutes the chosen uses through it.
void insert_activation_qdq(module& m, const quantized_value& v, const activation_quantization& q,
                           const quantization_scheme& scheme);

// Inserts dequantize_linear(quantize_linear(w, scales), scales) for a weight
// (the float weights stay in the graph; constant folding turns the
// quantize_linear of a literal into the quantized literal).
void insert_weight_qdq(module& m, const quantized_value& v, const quantization_scheme& scheme);

// The same for float32 weights, int8 symmetric (max |w| / 127 per channel):
// the codes are computed here, as quantize_linear computes them, and
// dequantize_linear(codes, scales) replaces the weights, so that no compile
// evaluates a quantize_linear of the float weights again (quantize_int8_weights).
void insert_int8_weight_codes(module& m, const quantized_value& v);

}  // namespace kiln
