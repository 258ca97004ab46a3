#pragma once
// The one place where the driver turns a model path into a program, so that
// each new model format is one more branch here.
#include <string>

#include "kiln/program.hpp"

namespace kiln::driver {

// `batch` is the extent given to symbolic dimensions of an ONNX model's
// inputs (a .kiln file's shapes are fixed).
program load_model(const std::string& path, std::size_t batch = 1);

}  // namespace kiln::driver
