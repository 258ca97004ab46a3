#pragma once
// A map from every 8-bit code to another, applied 64 codes at a time with
// AVX-512 VBMI's two-table byte permutes (vpermi2b): an int8 layer's
// epilogue after its intermediate rounding (code_map_kernel.hpp). Units
// named *_avx512vbmi.cpp are built with -mavx512f -mavx512bw -mavx512vbmi;
// callers check avx512::vbmi_enabled() first (cpu_features.hpp).
#include <cstddef>
#include <cstdint>

namespace kiln::avx512 {

// out[i] = map[in[i]] for i < n; `in` and `out` may be the same memory.
void map_codes(const std::uint8_t* map, const std::uint8_t* in, std::uint8_t* out, std::size_t n);

}  // namespace kiln::avx512
