#include "passes/unsigned_codes.hpp"

#include <vector>

#include "kiln/errors.hpp"
#include "ops/quant.hpp"
#include "passes/constant_value.hpp"
#include "passes/matcher.hpp"
#include "passes/rewriter.hpp"

namespace kiln::unsigned_codes {

namespace {

// A constant one-value input `i` of `ins` (a scale or a zero point) and its value.
std::optional<double> one_value(instruction_ref ins, std::size_t i) {
    if (ins->inputs().size() <= i) return std::nullopt;
    const instruction_ref v = ins->inputs()[i];
    if (v->get_shape().elements() != 1 || !match::is_constant_instruction(*v)) return std::nullopt;
    return scalar_constant(*v);
}

dtype codes_type(instruction_ref ins) {
    return ins->name() == "quantize_linear" ? ins->get_shape().type() : ins->inputs()[0]->get_shape().type();
}

}  // namespace

std::optional<std::int64_t> int8_per_tensor_zero_point(instruction_ref ins) {
    if (ins->inputs().size() != 3 || codes_type(ins) != dtype::int8_type) return std::nullopt;
    const auto* q = ins->get_operator().get_if<op::quantize_linear>();
    const auto* d = ins->get_operator().get_if<op::dequantize_linear>();
    if (q == nullptr && d == nullptr) return std::nullopt;
    if ((q != nullptr && q->block_size != 0) || (d != nullptr && d->block_size != 0)) return std::nullopt;
    const auto scale = one_value(ins, 1);
    if (!scale || !(*scale > 0)) return std::nullopt;
    const auto zero_point = one_value(ins, 2);
    if (!zero_point) return std::nullopt;
    return static_cast<std::int64_t>(*zero_point);
}

bool read_only_by_matching_dequantizes(instruction_ref quantize) {
    const auto zero_point = int8_per_tensor_zero_point(quantize);
    if (!zero_point || quantize->outputs().empty()) return false;
    const double scale = *one_value(quantize, 1);
    const dtype scale_type = quantize->inputs()[1]->get_shape().type();
    for (const instruction_ref reader : quantize->outputs()) {
        if (reader->name() != "dequantize_linear" || reader->inputs()[0] != quantize) return false;
        if (int8_per_tensor_zero_point(reader) != zero_point) return false;
        // The same scale, bit for bit, and of the same float type (dequantize then reads the same levels).
        if (one_value(reader, 1) != scale || reader->inputs()[1]->get_shape().type() != scale_type) return false;
    }
    return true;
}

void shift_to_unsigned(module& m, instruction_ref quantize) {
    const std::int64_t unsigned_zero_point = *int8_per_tensor_zero_point(quantize) + 128;
    const shape& zero_point_shape = quantize->inputs()[2]->get_shape();
    const instruction_ref zero = m.insert_literal(
        quantize, literal(shape{dtype::uint8_type, zero_point_shape.lens()}, std::vector<std::int64_t>{unsigned_zero_point}));
    auto quantize_op = *quantize->get_operator().get_if<op::quantize_linear>();
    quantize_op.output_type = dtype::uint8_type;
    const instruction_ref codes =
        m.insert_instruction(quantize, quantize_op, {quantize->inputs()[0], quantize->inputs()[1], zero});
    const std::vector<instruction_ref> readers = quantize->outputs();
    for (const instruction_ref reader : readers) {
        const instruction_ref values =
            m.insert_instruction(reader, reader->get_operator(), {codes, reader->inputs()[1], zero});
        if (!replace_value(m, reader, values))
            fail("unsigned codes: a dequantize of uint8 codes did not replace the int8 one it equals");
    }
}

}  // namespace kiln::unsigned_codes
