// `kiln run`: runs a model and summarises its outputs.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <limits>

#include "driver/commands.hpp"
#include "driver/model_file.hpp"
#include "driver/npy.hpp"
#include "driver/run_inputs.hpp"

namespace kiln::driver {

namespace {

void print_summary(std::size_t index, const argument& a) {
    const shape& sh = a.get_shape();
    std::cout << "output " << index << ": " << to_string(sh.type()) << " " << to_string(sh.lens()) << "\n";
    std::size_t n = sh.elements();
    double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0;
    std::size_t nans = 0;
    for (std::size_t i = 0; i < n; ++i) {
        double v = a.value_at(i);
        if (std::isnan(v)) {
            ++nans;
            continue;
        }
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        sum += v;
    }
    std::cout << std::setprecision(6);
    if (n > nans) std::cout << "  min " << lo << "  max " << hi << "  mean " << sum / static_cast<double>(n - nans);
    if (nans > 0) std::cout << "  (" << nans << " NaN)";
    std::cout << "\n  values " << format_values(a, 8) << "\n";
}

// NumPy has no bfloat16, so such outputs are saved as float32.
argument npy_compatible(const argument& a) {
    if (a.get_shape().type() != dtype::bf16_type) return a;
    argument f(shape(dtype::float_type, a.get_shape().lens()));
    float* p = f.data_as<float>();
    for (std::size_t i = 0; i < f.get_shape().elements(); ++i) p[i] = static_cast<float>(a.value_at(i));
    return f;
}

}  // namespace

int run_command(const run_settings& settings, const std::string& save_dir) {
    program p = prepare(load_model(settings.model, 1, settings.dyn_input_dims), settings);
    auto outputs = on_host(p, p.eval(make_inputs(p, settings)));
    if (!save_dir.empty()) std::filesystem::create_directories(save_dir);
    for (std::size_t i = 0; i < outputs.size(); ++i) {
        print_summary(i, outputs[i]);
        if (!save_dir.empty()) {
            auto path = (std::filesystem::path(save_dir) / ("output_" + std::to_string(i) + ".npy")).string();
            write_npy(npy_compatible(outputs[i]), path);
            std::cout << "  saved " << path << "\n";
        }
    }
    return 0;
}

}  // namespace kiln::driver
