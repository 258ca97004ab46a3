#include "kiln/quantize.hpp"
#include "kiln/verifier.hpp"
#include "passes/insert_quantize_dequantize.hpp"

namespace kiln {

void quantize_int8_weights(program& p, const quantize_int8_weights_options& options) {
    const std::string caller = "quantize_int8_weights";
    if (p.is_compiled())
        fail(caller + ": the program is already compiled for target '" + p.target_name() +
             "'; quantize the program before compiling it");
    // Only products: the cpu target reads int8 weights of a dot directly;
    // a convolution's would be widened back to float32 on every run.
    const std::vector<std::string> supported_ops{"dot"};
    module& m = *p.get_main_module();
    quantization_scheme scheme;
    scheme.type = dtype::int8_type;
    scheme.weight_limit = 127;
    scheme.weights_per_channel = true;
    for (const auto& v : plan_quantized_values(m, options.ins_names, options.exclude, supported_ops, caller)) {
        if (!v.is_weight) continue;
        // float32 weights get their codes now; other float types the pair, which compile folds.
        if (v.value->get_shape().type() == dtype::float_type)
            insert_int8_weight_codes(m, v);
        else
            insert_weight_qdq(m, v, scheme);
    }
    verify_module(m, caller);
}

}  // namespace kiln
