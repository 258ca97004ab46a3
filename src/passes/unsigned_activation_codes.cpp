// int8 codes with zero point -128 become uint8 codes with zero point 0.
//
// ONNX Runtime's S8S8 QDQ files quantize every non-negative activation (after
// a ReLU, a ReLU6, a max pooling of one) to int8 with zero point -128: the
// representable real range, [0, 255 * scale], starts at 0. The same levels
// are uint8 with zero point 0, and the codes differ by exactly 128:
//   quantize:   clamp(round(x / s) - 128, -128, 127) + 128 = clamp(round(x / s), 0, 255)
//   dequantize: (q - (-128)) * s = ((q + 128) - 0) * s
// so the rewrite changes no real value anywhere, whatever the quantize reads
// (a value below 0 saturates to the lowest code either way). It pays on the
// cpu target: oneDNN's int8 kernels take u8 sources with zero point 0 as
// they are (VNNI / AMX u8 x s8), while s8 sources with a zero point need
// the zero point's compensation computed and subtracted for every output.
//
// Rewritten: a per-tensor quantize_linear to int8 whose constant zero point
// is -128, when every reader is a per-tensor dequantize_linear with the
// same constant scale and zero point (the QDQ pair ONNX Runtime writes).
// Anything else (another zero point, per-channel or blocked parameters, a
// reader that sees the codes themselves: the return, a cast) keeps int8.
#include <vector>

#include "kiln/passes.hpp"
#include "passes/rewriter.hpp"
#include "passes/unsigned_codes.hpp"

namespace kiln {

void unsigned_activation_codes::apply(module& m) const {
    std::vector<instruction_ref> shiftable;
    for (auto ins = m.begin(); ins != m.end(); ++ins)
        if (ins->name() == "quantize_linear" && unsigned_codes::int8_per_tensor_zero_point(ins) == -128 &&
            unsigned_codes::read_only_by_matching_dequantizes(ins))
            shiftable.push_back(ins);
    for (const instruction_ref quantize : shiftable) unsigned_codes::shift_to_unsigned(m, quantize);
    if (!shiftable.empty()) remove_dead_instructions(m);
}

}  // namespace kiln
