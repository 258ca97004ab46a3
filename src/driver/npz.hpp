#pragma once
// Reading NumPy .npz files (np.savez / np.savez_compressed): a zip archive
// with one .npy member per array, named "<key>.npy". libzip reads the archive.
#include <map>
#include <string>

#include "kiln/argument.hpp"

namespace kiln::driver {

// The arrays of an .npz file by key (the member name without ".npy").
// Errors are kiln::error parse_error (file_not_found when missing) naming the path.
std::map<std::string, argument> read_npz(const std::string& path);

}  // namespace kiln::driver
