#pragma once
// Widening 16-bit float values to float32 for kernels that keep weights in
// float16 / bfloat16: the AVX2 loops where the CPU has them, a portable loop
// elsewhere.
#include <cstddef>

#include "kiln/dtype.hpp"

namespace kiln {

// Widens `n` values of `type` (float16 or bfloat16) at `in` into `out`.
using widen_function = void (*)(const void* in, float* out, std::size_t n);
widen_function widen_16bit_function(dtype type);

}  // namespace kiln
