// `kiln perf`: profiles a model with kiln::measure_performance.
#include <iostream>

#include "driver/commands.hpp"
#include "driver/model_file.hpp"
#include "driver/run_inputs.hpp"
#include "kiln/perf.hpp"

namespace kiln::driver {

int perf_command(const run_settings& settings, std::size_t batch, std::size_t runs) {
    program p = prepare(load_model(settings.model, batch, settings.dyn_input_dims), settings);
    parameter_map inputs = make_inputs(p, settings);
    perf_report report = measure_performance(p, inputs, runs, 3, batch);
    std::cout << settings.model << " on target " << p.target_name()
              << (settings.offload_copy ? "" : " (offload copy off: inputs and outputs in device memory)") << "\n\n"
              << format_perf_report(report);
    return 0;
}

}  // namespace kiln::driver
