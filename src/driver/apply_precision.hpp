#pragma once
// `kiln compile --fp16 | --bf16 | --int8 | --fp8`: the quantize_* call the
// flags ask for, with its calibration samples read from .npz files.
#include "driver/commands.hpp"
#include "kiln/program.hpp"

namespace kiln::driver {

// Rewrites `p` as `settings` asks (nothing for an empty precision); int8 and
// fp8 calibrate on `t`. A calibration bar goes to stderr when it is a terminal.
void apply_precision(program& p, const target& t, const precision_settings& settings);

}  // namespace kiln::driver
