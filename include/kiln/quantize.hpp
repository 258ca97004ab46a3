#pragma once
// Reduced precision by rewriting a program's graph in place (MIGraphX's
// quantize_* functions): half types for the float computation, int8 /
// fp8 quantize-dequantize pairs around chosen ops with scales taken from
// running calibration inputs, or int8 weights alone. Targets then lower the rewritten graph to
// their real kernels (DESIGN.md: reduced precision is a property of the graph).
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "kiln/program.hpp"
#include "kiln/target.hpp"

namespace kiln {

// Float32 computation to float16 (quantize_fp16) or bfloat16 (quantize_bf16):
// the chosen instructions read their float32 inputs converted to the 16-bit
// type (float32 literals, the weights, become 16-bit literals) and compute in
// it. Program inputs and outputs keep their float32 types (converts at the
// boundary), and the ops that need float32 range stay in float32 with
// converts around them: sums and means, products, softmax, batch and layer
// normalization, attention. `ins_names` lists op names to convert, or
// {"all"}; an unknown name is an error.
void quantize_fp16(program& p, const std::vector<std::string>& ins_names = {"all"});
void quantize_bf16(program& p, const std::vector<std::string>& ins_names = {"all"});

// How an activation's range is chosen from its calibration statistics.
enum class calibration_method {
    max,         // the smallest and largest value seen
    percentile,  // cut `percentile` of the values: (100 - percentile) / 2 percent from each tail
    entropy,     // the clipping threshold whose int8 histogram is nearest (KL divergence) to the float one
    mse,         // the range whose int8 round trip has the least mean squared error
};

// "max", "percentile", "entropy" or "mse"; anything else raises an error naming the choices.
calibration_method to_calibration_method(const std::string& name);
std::string to_string(calibration_method m);

// Called after each calibration sample has run: (samples done, samples in all).
using calibration_progress = std::function<void(std::size_t done, std::size_t total)>;

struct quantize_int8_options {
    // Op names whose float inputs are quantized: "dot", "convolution", or "all" (both).
    std::vector<std::string> ins_names{"dot", "convolution"};
    calibration_method method = calibration_method::max;
    // The percentile of the values kept by calibration_method::percentile (above 50, at most 100).
    double percentile = 99.99;
    // Weights get one scale per output channel (else one per tensor).
    bool per_channel = true;
    // Instructions kept in float: printed names ("@12") or origins (ONNX node names).
    std::vector<std::string> exclude;
    // Activations never seen below 0 (after a ReLU) as uint8 with zero point
    // 0 (U8S8, oneDNN's fast path), where every use takes uint8, and those
    // read only as the source of products (dot's first input) as uint8 with
    // int8's zero point plus 128 whatever their range (the same levels);
    // false keeps every activation int8 (S8S8).
    bool unsigned_activations = true;
    // Each quantized convolution's and dot's output shifted by -(W_q - W) E[x]
    // (E[x]: its input's per-channel mean over the calibration set), so that
    // rounding the weights leaves every output channel's mean where it was.
    bool bias_correction = true;
    calibration_progress progress;
};

// Runs every calibration input ({parameter name: value}) through a copy of
// `p` compiled for `t`, collects the range of each chosen op's float
// activation inputs in bounded memory, and inserts
// dequantize_linear(quantize_linear(x, scale, zero_point)) before them: int8
// per tensor with a zero point for activations (uint8 with zero point 0 for
// non-negative ones and for products' sources, see unsigned_activations), int8 symmetric per output
// channel (or per tensor) for constant weights. An empty calibration set,
// a sample with a missing, unknown or misshapen input, an unknown op name
// or exclude name raise errors.
void quantize_int8(program& p, const target& t, const std::vector<parameter_map>& calibration,
                   const quantize_int8_options& options = {});

struct quantize_int8_weights_options {
    // Op names whose constant weights are quantized: "dot" (the only one).
    std::vector<std::string> ins_names{"dot"};
    // Instructions kept in float: printed names ("@12") or origins (ONNX node names).
    std::vector<std::string> exclude;
};

// Weight-only int8 (OpenVINO's weight compression, torchao's
// Int8WeightOnlyConfig): each chosen dot's constant weights become
// dequantize_linear(codes, scales), int8 codes computed here, symmetric with
// one scale per output column (max |w| / 127); activations stay float, so no
// calibration is needed. What bounds a decoder's one-token step is reading
// its weights, and the cpu target's products read these at 1 byte a
// weight. An unknown op name or exclude name, or an op other than dot,
// raises an error; a compiled program too.
void quantize_int8_weights(program& p, const quantize_int8_weights_options& options = {});

struct quantize_fp8_options {
    std::vector<std::string> ins_names{"dot", "convolution"};
    std::vector<std::string> exclude;
    bool bias_correction = true;  // as quantize_int8_options::bias_correction
    calibration_progress progress;
};

// Like quantize_int8 with float8 e4m3fn: one scale per tensor (amax / 448),
// no zero point, for activations and weights alike.
void quantize_fp8(program& p, const target& t, const std::vector<parameter_map>& calibration,
                  const quantize_fp8_options& options = {});

}  // namespace kiln
