#include "driver/apply_precision.hpp"

#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "driver/calibration_inputs.hpp"
#include "kiln/quantize.hpp"

namespace kiln::driver {

namespace {

// "calibrating [#########      ] 16/32" on stderr, redrawn in place; nothing when stderr is no terminal.
calibration_progress terminal_progress() {
    if (isatty(STDERR_FILENO) == 0) return {};
    return [](std::size_t done, std::size_t total) {
        constexpr std::size_t width = 30;
        const std::size_t filled = total == 0 ? width : std::min(width, done * width / total);
        std::cerr << "\rcalibrating [" << std::string(filled, '#') << std::string(width - filled, ' ') << "] " << done
                  << "/" << total << (done >= total ? "\n" : "") << std::flush;
    };
}

std::vector<parameter_map> calibration_set(const program& p, const precision_settings& s) {
    if (s.calibration.empty())
        fail("--" + s.precision +
             " needs calibration inputs: give --calibration file.npz (one array per model "
             "input: one sample, a stack of samples, or samples concatenated along the input's first axis)");
    return read_calibration_set(p, s.calibration);
}

}  // namespace

void apply_precision(program& p, const target& t, const precision_settings& s) {
    const bool calibrated = s.precision == "int8" || s.precision == "fp8";
    if (!calibrated && !s.calibration.empty()) fail("--calibration is for --int8 and --fp8 only");
    if (!calibrated && !s.exclude.empty()) fail("--exclude is for --int8 and --fp8 only");
    if (!calibrated && !s.bias_correction) fail("--no-bias-correction is for --int8 and --fp8 only");
    if (s.precision.empty()) return;
    if (s.precision == "int8") {
        quantize_int8_options options;
        options.method = to_calibration_method(s.calibration_method);
        options.bias_correction = s.bias_correction;
        options.exclude = s.exclude;
        options.progress = terminal_progress();
        quantize_int8(p, t, calibration_set(p, s), options);
    } else if (s.precision == "fp16") {
        quantize_fp16(p);
    } else if (s.precision == "bf16") {
        quantize_bf16(p);
    } else if (s.precision == "int8-weights") {
        quantize_int8_weights(p);
    } else if (s.precision == "fp8") {
        quantize_fp8_options options;
        options.bias_correction = s.bias_correction;
        options.exclude = s.exclude;
        options.progress = terminal_progress();
        quantize_fp8(p, t, calibration_set(p, s), options);
    } else {
        fail("unknown precision '" + s.precision + "'");
    }
}

}  // namespace kiln::driver
