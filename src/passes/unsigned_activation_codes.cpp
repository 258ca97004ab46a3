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
#include "ops/quant.hpp"
#include "passes/constant_value.hpp"
#include "passes/matcher.hpp"
#include "passes/rewriter.hpp"

namespace kiln {

namespace {

constexpr double signed_zero_point = -128;

// A constant one-value input `i` of `ins` (a scale or a zero point) and its value.
std::optional<double> one_value(instruction_ref ins, std::size_t i) {
    if (ins->inputs().size() <= i) return std::nullopt;
    const instruction_ref v = ins->inputs()[i];
    if (v->get_shape().elements() != 1 || !match::is_constant_instruction(*v)) return std::nullopt;
    return scalar_constant(*v);
}

// Per tensor, a constant positive scale and zero point -128 (int8 codes).
bool has_signed_nonnegative_parameters(instruction_ref ins, dtype codes) {
    if (codes != dtype::int8_type || ins->inputs().size() != 3) return false;
    const auto* q = ins->get_operator().get_if<op::quantize_linear>();
    const auto* d = ins->get_operator().get_if<op::dequantize_linear>();
    if ((q != nullptr && q->block_size != 0) || (d != nullptr && d->block_size != 0)) return false;
    const auto scale = one_value(ins, 1);
    return scale && *scale > 0 && one_value(ins, 2) == signed_zero_point;
}

bool is_shiftable(instruction_ref quantize) {
    if (!has_signed_nonnegative_parameters(quantize, quantize->get_shape().type())) return false;
    if (quantize->outputs().empty()) return false;
    const double scale = *one_value(quantize, 1);
    for (const instruction_ref reader : quantize->outputs()) {
        if (reader->name() != "dequantize_linear" || reader->inputs()[0] != quantize) return false;
        if (!has_signed_nonnegative_parameters(reader, quantize->get_shape().type())) return false;
        // The same scale, bit for bit, and of the same float type (dequantize then reads the same levels).
        if (one_value(reader, 1) != scale || reader->inputs()[1]->get_shape().type() != quantize->inputs()[1]->get_shape().type())
            return false;
    }
    return true;
}

void shift_to_unsigned(module& m, instruction_ref quantize) {
    const shape& zero_point_shape = quantize->inputs()[2]->get_shape();
    const instruction_ref zero = m.insert_literal(
        quantize, literal(shape{dtype::uint8_type, zero_point_shape.lens()}, std::vector<std::int64_t>{0}));
    auto quantize_op = *quantize->get_operator().get_if<op::quantize_linear>();
    quantize_op.output_type = dtype::uint8_type;
    const instruction_ref codes =
        m.insert_instruction(quantize, quantize_op, {quantize->inputs()[0], quantize->inputs()[1], zero});
    const std::vector<instruction_ref> readers = quantize->outputs();
    for (const instruction_ref reader : readers) {
        const instruction_ref values =
            m.insert_instruction(reader, reader->get_operator(), {codes, reader->inputs()[1], zero});
        if (!replace_value(m, reader, values))
            fail("unsigned_activation_codes: a dequantize of uint8 codes did not replace the int8 one it equals");
    }
}

}  // namespace

void unsigned_activation_codes::apply(module& m) const {
    std::vector<instruction_ref> shiftable;
    for (auto ins = m.begin(); ins != m.end(); ++ins)
        if (ins->name() == "quantize_linear" && is_shiftable(ins)) shiftable.push_back(ins);
    for (const instruction_ref quantize : shiftable) shift_to_unsigned(m, quantize);
    if (!shiftable.empty()) remove_dead_instructions(m);
}

}  // namespace kiln
