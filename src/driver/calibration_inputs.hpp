#pragma once
// Calibration samples for `kiln compile --int8 / --fp8` from .npz files.
// Each file holds one array per model input, keyed by the input's name,
// either one sample (the input's shape) or a stack of samples (a leading
// sample axis before the input's shape, the same count for every input).
#include <string>
#include <vector>

#include "kiln/program.hpp"

namespace kiln::driver {

// The samples of every file in order. Errors name the file and the input.
std::vector<parameter_map> read_calibration_set(const program& p, const std::vector<std::string>& files);

}  // namespace kiln::driver
