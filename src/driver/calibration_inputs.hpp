#pragma once
// Calibration samples for `kiln compile --int8 / --fp8` from .npz files.
// Each file holds one array per model input, keyed by the input's name:
// one sample (the input's shape), a stack of samples (a new leading axis
// before the input's shape) or samples concatenated along the input's first
// axis (np.concatenate of batches); every input holds as many samples.
#include <string>
#include <vector>

#include "kiln/program.hpp"

namespace kiln::driver {

// The samples of every file in order. Errors name the file and the input.
std::vector<parameter_map> read_calibration_set(const program& p, const std::vector<std::string>& files);

}  // namespace kiln::driver
