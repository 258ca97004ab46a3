#pragma once
// Preparing a model and its inputs for the commands that run it.
#include "driver/commands.hpp"
#include "kiln/program.hpp"

namespace kiln::driver {

// Named .npy inputs first; every other parameter gets seeded random data
// (seed + its position in sorted order, so each parameter differs). Without
// offload copy they are copied to the target's device memory.
parameter_map make_inputs(const program& p, const run_settings& s);

// The program ready to run on the requested target, with s.offload_copy
// (a compiled file is lowered again when it was compiled with the other).
program prepare(program p, const run_settings& s);

// `outputs` in host memory (a program without offload copy returns device memory).
std::vector<argument> on_host(const program& p, std::vector<argument> outputs);

}  // namespace kiln::driver
