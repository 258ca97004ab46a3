#pragma once
// Whom a compiled file's packed weights are laid out for: the machine as its
// target identifies it, and the Kiln version whose kernels chose the layout.
// Kernels anywhere else may expect other layouts, so a load elsewhere
// restores the plain values and packs them again.
#include <string>

#include "kiln/target.hpp"
#include "kiln/version.hpp"

namespace kiln::io {

inline std::string packed_weights_owner(const target& t) {
    return t.identity() + " | kiln " + version;
}

}  // namespace kiln::io
