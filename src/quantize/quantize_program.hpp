#pragma once
// The steps quantize_int8 and quantize_fp8 share: choose the values, run
// the calibration for the activations among them, insert the pairs.
#include <string>
#include <vector>

#include "kiln/quantize.hpp"
#include "passes/insert_quantize_dequantize.hpp"

namespace kiln {

struct quantize_request {
    std::string caller;  // "quantize_int8", prefixes errors
    std::vector<std::string> ins_names;
    std::vector<std::string> exclude;
    calibration_method method = calibration_method::max;
    double percentile = 99.99;
    quantization_scheme scheme;
    // Residual adds onto quantized convolutions read the quantized value
    // (add_residual_uses): int8 between ResNet blocks.
    bool residuals_in_int8 = false;
    // A max pooling of a quantized convolution's result that float ops read
    // pools codes (add_max_pooling_uses): DenseNet's stem.
    bool max_pooling_in_int8 = false;
    // Weights' rounding bias taken out of the layers' biases (bias_correction.hpp).
    bool bias_correction = false;
    calibration_progress progress;
};

void quantize_program(program& p, const target& t, const std::vector<parameter_map>& calibration,
                      const quantize_request& request);

}  // namespace kiln
