#include "kiln/quantize.hpp"
#include "quantize/calibrate.hpp"
#include "quantize/quantize_program.hpp"

namespace kiln {

void quantize_fp8(program& p, const target& t, const std::vector<parameter_map>& calibration,
                  const quantize_fp8_options& options) {
    // float8 e4m3fn's largest finite value is 448: scales are amax / 448,
    // one per tensor, with no zero point (ONNX allows only 0 for float8).
    quantize_request request;
    request.caller = "quantize_fp8";
    request.ins_names = options.ins_names;
    request.exclude = options.exclude;
    request.method = calibration_method::max;
    request.progress = options.progress;
    request.scheme.weight_limit = 448;
    request.scheme.weights_per_channel = false;
    request.scheme.activation_zero_point = false;
    request.scheme.activation_limit = 448;
    // The float8 dtypes come with the IR's new types (issue 21, part 1).
    check_calibration_set(p, calibration, request.caller);
    (void)t;  // quantize_program(p, t, calibration, request) once float8 exists
    fail(error_kind::not_implemented, "quantize_fp8: this build of Kiln has no float8 e4m3fn type yet");
}

}  // namespace kiln
