#pragma once
// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0):
// magic "\x93NUMPY", version, a little-endian header length, a Python dict
// literal {'descr': ..., 'fortran_order': ..., 'shape': (...)} and the raw data.
#include <string>

#include "kiln/argument.hpp"

namespace kiln::driver {

// Reads an array of a dtype Kiln has (little-endian or single-byte descr).
// Fortran-ordered arrays are returned in standard (row-major) layout.
// Errors are kiln::error parse_error (file_not_found when missing) naming the path.
argument read_npy(const std::string& path);
argument parse_npy(const std::string& bytes, const std::string& source);

// Writes `a` (any strides) as a row-major .npy file. bfloat16 has no NumPy
// type and is rejected.
void write_npy(const argument& a, const std::string& path);
std::string format_npy(const argument& a);

}  // namespace kiln::driver
