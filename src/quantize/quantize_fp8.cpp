#include "kiln/quantize.hpp"
#include "quantize/quantize_program.hpp"

namespace kiln {

void quantize_fp8(program& p, const target& t, const std::vector<parameter_map>& calibration,
                  const quantize_fp8_options& options) {
    // float8 e4m3fn's largest finite value is 448: scales are max |x| / 448,
    // one per tensor, with no zero point (ONNX allows only 0 for float8).
    // Values quantize by rounding to the nearest float8 and saturate at +-448.
    quantize_request request;
    request.caller = "quantize_fp8";
    request.ins_names = options.ins_names;
    request.exclude = options.exclude;
    request.method = calibration_method::max;
    request.progress = options.progress;
    request.scheme.type = dtype::fp8e4m3fn_type;
    request.scheme.weight_limit = 448;
    request.scheme.weights_per_channel = false;
    request.scheme.activation_zero_point = false;
    request.scheme.activation_limit = 448;
    request.bias_correction = options.bias_correction;
    quantize_program(p, t, calibration, request);
}

}  // namespace kiln
