#pragma once
// Creating ops by name. The list of ops is explicit, in src/ops/registry.cpp.
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln {

// The op called `name` with the attributes in the map `attributes` (others
// keep their defaults). Unknown names and bad attributes raise errors.
operation make_op(const std::string& name, const value& attributes = {});
bool has_op(const std::string& name);
// Names of the ops a graph can use (excludes the internal @param, @literal, @return).
std::vector<std::string> get_operators();

}  // namespace kiln
