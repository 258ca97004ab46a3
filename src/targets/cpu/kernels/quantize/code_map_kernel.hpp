#pragma once
// An int8 layer whose epilogue rounds to an intermediate quantized tensor
// and then needs the real value again (ONNX Runtime's QDQ files quantize a
// transformer's first FFN product before its GELU: round, GELU, round). The
// part after the rounding sees only 256 codes, so a map computed once with
// the reference arithmetic (requantize_epilogue::code_map) replaces it: the
// int8 kernel stops at the rounding, and the map runs over its codes in
// place. On Zen 4 oneDNN's gelu_erf post-op made BERT-base's FFN-1 product
// ~18% slower; the map costs a few instructions per 64 codes.
#include <cstdint>
#include <memory>
#include <vector>

#include "ops/fused_quantized_linalg.hpp"
#include "targets/cpu/kernels/cpu_kernel.hpp"

namespace kiln {

// Whether the map pays for `e`: its steps after the rounding include one
// that needs the real value (not a ReLU or clip, which oneDNN's integer
// units do cheaply), and the CPU has the byte permutes (AVX-512 VBMI).
bool code_map_pays(const op::requantize_epilogue& e);

// `e` ending at its rounding: the intermediate codes are the result.
op::requantize_epilogue epilogue_up_to_rounding(const op::requantize_epilogue& e);

// Runs `inner` (which writes the intermediate codes into the result, a
// standard 8-bit tensor), then maps the result's codes through `map`.
std::shared_ptr<const cpu_kernel> with_code_map(std::shared_ptr<const cpu_kernel> inner, std::vector<std::uint8_t> map);

}  // namespace kiln
