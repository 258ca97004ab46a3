#include "quantize/quantize_program.hpp"

#include "kiln/verifier.hpp"
#include "quantize/bias_correction.hpp"
#include "quantize/calibrate.hpp"

namespace kiln {

namespace {

// The ops whose inputs post-training quantization rewrites.
const std::vector<std::string> quantizable_ops{"dot", "convolution"};

}  // namespace

void quantize_program(program& p, const target& t, const std::vector<parameter_map>& calibration,
                      const quantize_request& request) {
    const std::string& caller = request.caller;
    if (p.is_compiled())
        fail(caller + ": the program is already compiled for target '" + p.target_name() +
             "'; quantize the program before compiling it");
    if (p.is_dynamic())
        fail(error_kind::not_implemented,
             caller + ": the program has dynamic parameters, which quantization does not handle yet; import it with "
                      "fixed dims (map_input_dims) to quantize it");
    if (request.method == calibration_method::percentile && !(request.percentile > 50 && request.percentile <= 100))
        fail(caller + ": percentile must be above 50 and at most 100, got " + std::to_string(request.percentile));
    check_calibration_set(p, calibration, caller);
    module& m = *p.get_main_module();
    std::vector<quantized_value> planned =
        plan_quantized_values(m, request.ins_names, request.exclude, quantizable_ops, caller);
    if (request.residuals_in_int8) add_residual_uses(m, planned);
    if (request.max_pooling_in_int8) add_max_pooling_uses(m, planned);

    std::vector<instruction_ref> activations;
    for (const auto& v : planned)
        if (!v.is_weight) activations.push_back(v.value);
    std::vector<std::int64_t> channel_axes(activations.size(), -1);
    const std::vector<bias_correction_site> corrected = request.bias_correction
                                                            ? plan_bias_corrections(planned, activations, channel_axes)
                                                            : std::vector<bias_correction_site>{};
    const std::vector<activation_statistics> stats =
        calibrate(p, t, activations, calibration, request.progress, caller, channel_axes);

    std::size_t next_activation = 0;
    for (const auto& v : planned) {
        if (v.is_weight) {
            insert_weight_qdq(m, v, request.scheme);
            continue;
        }
        const auto [lo, hi] = stats[next_activation++].range(request.method, request.percentile);
        insert_activation_qdq(m, v,
                              choose_activation_quantization(lo, hi, request.scheme, accepts_unsigned_codes(v),
                                                             reads_only_as_product_source(v)),
                              request.scheme);
    }
    for (const auto& site : corrected) correct_weight_rounding_bias(m, site, stats[site.activation].channel_means());
    verify_module(m, caller);
}

}  // namespace kiln
