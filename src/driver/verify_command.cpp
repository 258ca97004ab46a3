// `kiln verify`: a target against the reference target, by outputs, per
// instruction or pass by pass (kiln/verify.hpp).
#include <algorithm>
#include <iostream>

#include "driver/commands.hpp"
#include "driver/model_file.hpp"
#include "driver/run_inputs.hpp"
#include "kiln/verify.hpp"

namespace kiln::driver {

namespace {

int bisect(const program& model, const run_settings& settings, const parameter_map& inputs, const tolerance& tol) {
    if (model.is_compiled())
        fail(settings.model + " is compiled for target '" + model.target_name() +
             "', so its passes have already run; bisect the uncompiled model");
    const target& t = get_target(settings.target.empty() ? "cpu" : settings.target);
    std::cout << settings.model << "\n";
    bisect_report r = bisect_passes(model, t, inputs, tol);
    std::cout << format_bisect_report(r);
    return r.passed() ? 0 : 1;
}

// An uncompiled model with quantize / dequantize_linear (a compiled one has lost its float32 form).
bool holds_quantization(const program& model) {
    if (model.is_compiled()) return false;
    const module& m = *model.get_main_module();
    return std::any_of(m.begin(), m.end(), [](const auto& ins) { return ins.name() == "dequantize_linear"; });
}

}  // namespace

int verify_command(const run_settings& settings, double rtol, double atol, verify_mode mode) {
    const program loaded = load_model(settings.model, 1, settings.dyn_input_dims);
    const tolerance tol{rtol, atol};
    const parameter_map inputs = make_inputs(loaded, settings);
    // A dynamic model is checked as the static program it runs for these inputs.
    const program model = loaded.specialised_for(inputs);
    if (mode == verify_mode::bisect) return bisect(model, settings, inputs, tol);

    const program p = prepare(model, settings);
    // The model before optimization is the reference, so passes are checked
    // too; a compiled file keeps only its optimized module.
    std::cout << settings.model << " on target " << p.target_name() << " against ref"
              << (model.is_compiled() ? " (a compiled file: ref runs its optimized module)" : "") << "\n";
    output_report outputs = verify_outputs(p, *model.get_main_module(), inputs, tol);
    std::cout << format_output_report(outputs);
    if (mode == verify_mode::outputs) return outputs.passed() ? 0 : 1;

    per_instruction_report r = verify_per_instruction(p, inputs, tol);
    std::cout << "\n" << format_per_instruction_report(r);
    if (!outputs.passed() && r.passed() && !model.is_compiled())
        std::cout << "every instruction matches its reference compute, yet the outputs differ from the unoptimized "
                     "model: a pass changed the numbers; `kiln verify --bisect` names it\n";
    if (holds_quantization(model)) {
        // Where the numbers drift from float32 is the question a quantized model raises; informative, never a failure.
        const target& t = get_target(p.target_name());
        std::cout << "\n" << format_quantization_report(verify_quantization(model, {inputs}, &t));
    }
    return outputs.passed() && r.passed() ? 0 : 1;
}

}  // namespace kiln::driver
