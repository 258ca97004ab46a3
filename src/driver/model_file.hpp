#pragma once
// The one place where the driver turns a model path into a program, so that
// each new model format is one more branch here.
#include <string>

#include "kiln/program.hpp"

namespace kiln::driver {

program load_model(const std::string& path);

}  // namespace kiln::driver
