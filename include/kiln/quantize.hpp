#pragma once
// Reduced precision, chosen by rewriting a program before it is compiled (as
// MIGraphX's quantize_* do). Each function rewrites the program in place.
#include <string>
#include <vector>

#include "kiln/program.hpp"

namespace kiln {

// Float32 computation to float16 (quantize_fp16) or bfloat16 (quantize_bf16):
// the chosen instructions read their float32 inputs converted to the 16-bit
// type (float32 literals, the weights, become 16-bit literals) and compute in
// it. Program inputs and outputs keep their float32 types (converts at the
// boundary), and the ops that need float32 range stay in float32 with
// converts around them: sums and means, products, softmax, batch and layer
// normalization, attention. `ins_names` lists op names to convert, or
// {"all"}; an unknown name is an error.
void quantize_fp16(program& p, const std::vector<std::string>& ins_names = {"all"});
void quantize_bf16(program& p, const std::vector<std::string>& ins_names = {"all"});

}  // namespace kiln
