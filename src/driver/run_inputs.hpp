#pragma once
// Preparing a model and its inputs for the commands that run it.
#include "driver/commands.hpp"
#include "kiln/program.hpp"

namespace kiln::driver {

// Named .npy inputs first; every other parameter gets seeded random data
// (seed + its position in sorted order, so each parameter differs).
parameter_map make_inputs(const program& p, const run_settings& s);

// The program ready to run on the requested target.
program prepare(program p, const run_settings& s);

}  // namespace kiln::driver
