#include "kiln/quantize.hpp"
#include "quantize/quantize_program.hpp"

namespace kiln {

void quantize_int8(program& p, const target& t, const std::vector<parameter_map>& calibration,
                   const quantize_int8_options& options) {
    quantize_request request;
    request.caller = "quantize_int8";
    request.ins_names = options.ins_names;
    request.exclude = options.exclude;
    request.method = options.method;
    request.percentile = options.percentile;
    request.progress = options.progress;
    // Activations: int8 with a zero point, or uint8 where never negative;
    // weights: int8 symmetric in [-127, 127] (ONNX Runtime's S8S8 / U8S8 QDQ
    // forms, -128 unused by weights).
    request.scheme.type = dtype::int8_type;
    request.scheme.weight_limit = 127;
    request.scheme.weights_per_channel = options.per_channel;
    request.scheme.activation_zero_point = true;
    request.scheme.unsigned_nonnegative_activations = options.unsigned_activations;
    request.residuals_in_int8 = true;
    request.max_pooling_in_int8 = true;
    request.bias_correction = options.bias_correction;
    quantize_program(p, t, calibration, request);
}

}  // namespace kiln
