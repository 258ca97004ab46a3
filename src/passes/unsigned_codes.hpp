#pragma once
// What the passes that store int8 activation codes as uint8 share: reading
// a QDQ pair's per-tensor constant parameters, and the rewrite itself.
//
// For any int8 zero point z the uint8 zero point z + 128 gives the same
// levels, every code plus 128 (clamp(round(x / s) + z, -128, 127) + 128 =
// clamp(round(x / s) + z + 128, 0, 255), and (q - z) * s = ((q + 128) -
// (z + 128)) * s), so every dequantized value stays what it was.
#include <cstdint>
#include <optional>

#include "kiln/module.hpp"

namespace kiln::unsigned_codes {

// The constant zero point of a per-tensor int8 quantize or dequantize with
// a constant positive scale (not blocked); nothing for anything else.
std::optional<std::int64_t> int8_per_tensor_zero_point(instruction_ref ins);

// Whether `quantize` (with int8_per_tensor_zero_point) has readers and
// every one is a dequantize of its codes with the same scale (bit for bit,
// same float type) and zero point: the QDQ pair, whose readers then see
// real values only.
bool read_only_by_matching_dequantizes(instruction_ref quantize);

// Replaces `quantize` and its dequantize readers by uint8 ones with zero
// point z + 128.
void shift_to_unsigned(module& m, instruction_ref quantize);

}  // namespace kiln::unsigned_codes
