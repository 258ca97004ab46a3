// Commands that run a model: run (print outputs) and verify (compare a target with ref).
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
#include "targets/ref/ref_target.hpp"

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

// allclose-style comparison of one output; NaNs match NaNs.
struct comparison {
    double max_abs = 0;
    double max_rel = 0;
    std::size_t mismatches = 0;
    std::size_t first_bad = 0;
};

comparison compare(const argument& got, const argument& expected, double rtol, double atol) {
    comparison c;
    for (std::size_t i = 0; i < got.get_shape().elements(); ++i) {
        double a = got.value_at(i), b = expected.value_at(i);
        bool ok;
        double abs_err = 0, rel_err = 0;
        if (std::isnan(a) || std::isnan(b)) {
            ok = std::isnan(a) && std::isnan(b);
            abs_err = rel_err = ok ? 0 : std::numeric_limits<double>::infinity();
        } else if (a == b) {  // also equal infinities
            ok = true;
        } else {
            abs_err = std::fabs(a - b);
            rel_err = b != 0 ? abs_err / std::fabs(b) : std::numeric_limits<double>::infinity();
            ok = abs_err <= atol + rtol * std::fabs(b);
        }
        c.max_abs = std::max(c.max_abs, abs_err);
        c.max_rel = std::max(c.max_rel, rel_err);
        if (!ok && c.mismatches++ == 0) c.first_bad = i;
    }
    return c;
}

}  // namespace

int run_command(const run_settings& settings, const std::string& save_dir) {
    program p = prepare(load_model(settings.model), settings);
    auto outputs = p.eval(make_inputs(p, settings));
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

int verify_command(const run_settings& settings, double rtol, double atol) {
    program p = prepare(load_model(settings.model), settings);
    parameter_map inputs = make_inputs(p, settings);
    // The target first: eval checks the inputs before the interpreter sees them.
    auto got = p.eval(inputs);
    auto expected = evaluate_module(*p.get_main_module(), inputs);
    if (got.size() != expected.size())
        fail(error_kind::runtime, "target '" + p.target_name() + "' returned " + std::to_string(got.size()) +
                                      " outputs, ref " + std::to_string(expected.size()));
    bool all_ok = true;
    std::cout << std::setprecision(3);
    for (std::size_t i = 0; i < got.size(); ++i) {
        const shape& gs = got[i].get_shape();
        const shape& es = expected[i].get_shape();
        std::cout << "output " << i << ": ";
        if (gs.type() != es.type() || gs.lens() != es.lens()) {
            std::cout << "MISMATCH: " << p.target_name() << " gives " << to_string(gs.type()) << " "
                      << to_string(gs.lens()) << ", ref " << to_string(es.type()) << " " << to_string(es.lens())
                      << "\n";
            all_ok = false;
            continue;
        }
        comparison c = compare(got[i], expected[i], rtol, atol);
        std::cout << "max abs error " << c.max_abs << ", max rel error " << c.max_rel;
        if (c.mismatches == 0) {
            std::cout << ": ok\n";
            continue;
        }
        all_ok = false;
        std::cout << ": MISMATCH in " << c.mismatches << " of " << gs.elements() << " elements (first at index "
                  << c.first_bad << ": " << p.target_name() << " " << got[i].value_at(c.first_bad) << ", ref "
                  << expected[i].value_at(c.first_bad) << ")\n";
    }
    std::cout << "verify " << p.target_name() << " against ref (rtol " << rtol << ", atol " << atol
              << "): " << (all_ok ? "PASSED" : "FAILED") << "\n";
    return all_ok ? 0 : 1;
}

}  // namespace kiln::driver
