#pragma once
// Widening narrow weights to float32 for kernels that keep them in float16 /
// bfloat16 (the AVX2 loops where the CPU has them, a portable loop
// elsewhere) or as int8 codes (their integer values; the compiler
// vectorizes the loop).
#include <cstddef>

#include "kiln/dtype.hpp"

namespace kiln {

// Widens `n` values of `type` (float16, bfloat16 or int8) at `in` into `out`.
using widen_function = void (*)(const void* in, float* out, std::size_t n);
widen_function widen_to_float32_function(dtype type);

}  // namespace kiln
