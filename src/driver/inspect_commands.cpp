// Commands that look at or convert a model without running it.
#include <filesystem>
#include <iostream>
#include <map>

#include "driver/commands.hpp"
#include "driver/model_file.hpp"
#include "driver/apply_precision.hpp"
#include "kiln/op_registry.hpp"
#include "kiln/perf.hpp"
#include "kiln/serialize.hpp"

namespace kiln::driver {

int read_command(const std::string& model, const std::vector<std::string>& dyn_input_dims) {
    program p = load_model(model, 1, dyn_input_dims);
    std::cout << p;
    if (!p.is_compiled()) return 0;
    std::map<std::string, std::string> precision;
    for (const auto& ip : instruction_precisions(p)) precision[ip.instruction] = ip.text();
    const auto choices = p.kernel_choices();
    if (!choices.empty()) {
        // What the file recorded (tuned or by rule at compile) and loading used without timing;
        // an instruction that could not use its record was warned about on stderr.
        const auto& stored = p.get_compile_options().pinned_algorithms;
        std::size_t used = 0;
        for (const auto& c : choices)
            if (auto it = stored.find(c.instruction); it != stored.end() && it->second == c.algorithm) ++used;
        std::cout << "kernel algorithms stored in the file: " << used << " of " << choices.size() << " instructions\n";
        std::cout << "kernels (" << p.target_name() << "; precision: arithmetic -> result type):\n";
        for (const auto& c : choices)
            std::cout << "  " << c.instruction << " = " << c.op << ": " << c.algorithm << " ["
                      << precision[c.instruction] << "]\n";
    } else {
        std::cout << "precision (" << p.target_name() << "; arithmetic -> result type):\n";
        for (const auto& ip : instruction_precisions(p))
            std::cout << "  " << ip.instruction << " = " << ip.op << ": " << ip.text() << "\n";
    }
    return 0;
}

int params_command(const std::string& model, const std::vector<std::string>& dyn_input_dims) {
    program p = load_model(model, 1, dyn_input_dims);
    if (p.is_compiled()) std::cout << "compiled for: " << p.target_name() << "\n";
    std::cout << "inputs:\n";
    auto shapes = p.get_parameter_shapes();
    for (const auto& name : p.get_parameter_names()) std::cout << "  " << name << ": " << shapes.at(name) << "\n";
    std::cout << "outputs:\n";
    auto outputs = p.get_output_shapes();
    for (std::size_t i = 0; i < outputs.size(); ++i) std::cout << "  " << i << ": " << outputs[i] << "\n";
    return 0;
}

int ops_command() {
    for (const auto& name : get_operators()) std::cout << name << "\n";
    return 0;
}

int compile_command(const std::string& model, const std::string& output, const std::string& target,
                    const precision_settings& precision, const std::vector<std::string>& dyn_input_dims,
                    const compile_options& options) {
    program p = load_model(model, 1, dyn_input_dims);
    if (p.is_compiled())
        fail(model + " is already compiled for target '" + p.target_name() + "'; compile the original model instead");
    apply_precision(p, get_target(target), precision);
    p.compile(get_target(target), options);
    save(p, output);
    std::cout << "wrote " << output << " (compiled for " << target << ", " << std::filesystem::file_size(output)
              << " bytes" << (p.compiled_from_cache() ? ", from the compile cache" : "") << ")\n";
    return 0;
}

}  // namespace kiln::driver
