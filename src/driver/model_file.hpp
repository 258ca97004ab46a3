#pragma once
// The one place where the driver turns a model path into a program, so that
// each new model format is one more branch here.
#include <string>
#include <utility>
#include <vector>

#include "kiln/program.hpp"

namespace kiln::driver {

// `batch` is the extent given to symbolic dimensions of an ONNX model's
// inputs; `dyn_input_dims` ("name:dims", see parse_dyn_input_dim) give
// inputs ranges. A .kiln file keeps the shapes it was saved with.
program load_model(const std::string& path, std::size_t batch = 1,
                   const std::vector<std::string>& dyn_input_dims = {});

// "x:1..64@{1,8},3,224,224": each dim an extent, a range MIN..MAX, or a range
// with optimals MIN..MAX@{A,B} (the form kiln read prints).
std::pair<std::string, std::vector<dynamic_dimension>> parse_dyn_input_dim(const std::string& spec);

}  // namespace kiln::driver
