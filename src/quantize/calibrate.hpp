#pragma once
// The calibration run of post-training quantization: the program, with the
// values to observe added to its outputs, compiled for the user's target and
// run on every calibration sample, one at a time.
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/program.hpp"
#include "kiln/quantize.hpp"
#include "quantize/activation_statistics.hpp"

namespace kiln {

// Fails with an error naming the sample index and the input when a sample
// misses an input, has an unknown one or a wrong dtype or shape; fails when
// the set is empty. `caller` prefixes the messages.
void check_calibration_set(const program& p, const std::vector<parameter_map>& calibration, const std::string& caller);

// Statistics of each instruction of p's main module in `observed`, in that
// order, over every sample. Memory: one sample's outputs at a time plus a
// fixed-size histogram per observed value, whatever the number of samples.
// `calibration` must have passed check_calibration_set (quantize_program, the
// entry point, checks it before planning). `channel_axes`, empty or one per
// observed value: the axis whose channel means to track, -1 for none.
std::vector<activation_statistics> calibrate(const program& p, const target& t,
                                             const std::vector<instruction_ref>& observed,
                                             const std::vector<parameter_map>& calibration,
                                             const calibration_progress& progress, const std::string& caller,
                                             const std::vector<std::int64_t>& channel_axes = {});

}  // namespace kiln
