#pragma once
// A program as the compile cache keys it: its saved metadata (modules,
// instructions, attributes, shapes and dtypes) and a 128-bit hash of its
// literals' bytes, computed in place rather than by writing the file.
#include <string>

#include "kiln/program.hpp"

namespace kiln::io {

std::string program_fingerprint(const program& p);

}  // namespace kiln::io
