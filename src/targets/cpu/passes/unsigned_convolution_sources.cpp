// int8 codes that only int8 convolutions read as their source become uint8
// codes: every code and the zero point plus 128.
//
// oneDNN's VNNI kernels multiply u8 sources by s8 weights (vpdpbusd); an s8
// source is shifted to u8 inside the kernel and the shift's compensation is
// subtracted from every output. Measured on this 2-core AVX-512 VNNI machine,
// ResNet-50's stem (int8 input, zero point -14, 3 -> 64 channels 7x7) takes
// 0.93 ms as s8 and 0.62 ms as u8 with zero point 114, one thread. The
// unsigned_activation_codes pass handles zero point -128 (u8 with none);
// this one takes any zero point z, exactly, since for codes of int8 range:
//   quantize:   clamp(round(x / s) + z, -128, 127) + 128 = clamp(round(x / s) + z + 128, 0, 255)
//   dequantize: (q - z) * s = ((q + 128) - (z + 128)) * s
// Rewritten: a per-tensor quantize_linear to int8 with a constant zero point
// whose every reader is a per-tensor dequantize_linear with the same scale
// and zero point, each read only by convolutions as their source (input 0).
// Other readers leave the codes int8: a matmul (oneDNN wants its second
// operand s8), pooling, concat, the return, and residual adds: oneDNN's sum
// post-op with a zero point rounds differently for the shifted codes (the
// same real values, but ResNet-50's output moved by a code), and gains
// nothing from u8.
#include <optional>
#include <vector>

#include "ops/quant.hpp"
#include "passes/constant_value.hpp"
#include "passes/matcher.hpp"
#include "passes/rewriter.hpp"
#include "targets/cpu/passes/cpu_passes.hpp"

namespace kiln {

namespace {

constexpr std::int64_t shift = 128;

std::optional<double> one_value(instruction_ref ins, std::size_t i) {
    if (ins->inputs().size() <= i) return std::nullopt;
    const instruction_ref v = ins->inputs()[i];
    if (v->get_shape().elements() != 1 || !match::is_constant_instruction(*v)) return std::nullopt;
    return scalar_constant(*v);
}

// Per tensor, int8 codes, a constant positive scale and a constant zero point.
bool per_tensor_int8(instruction_ref ins, dtype codes) {
    if (codes != dtype::int8_type || ins->inputs().size() != 3) return false;
    const auto* q = ins->get_operator().get_if<op::quantize_linear>();
    const auto* d = ins->get_operator().get_if<op::dequantize_linear>();
    if ((q != nullptr && q->block_size != 0) || (d != nullptr && d->block_size != 0)) return false;
    if (ins->inputs()[2]->get_shape().type() != dtype::int8_type) return false;
    const auto scale = one_value(ins, 1);
    return scale && *scale > 0 && one_value(ins, 2).has_value();
}

bool read_as_convolution_source(instruction_ref values) {
    if (values->outputs().empty()) return false;
    for (const instruction_ref reader : values->outputs()) {
        if (reader->name() != "convolution" || reader->inputs()[0] != values) return false;
        for (std::size_t i = 1; i < reader->inputs().size(); ++i)
            if (reader->inputs()[i] == values) return false;
    }
    return true;
}

bool is_shiftable(instruction_ref quantize) {
    if (!per_tensor_int8(quantize, quantize->get_shape().type()) || quantize->outputs().empty()) return false;
    const double scale = *one_value(quantize, 1);
    const double zero_point = *one_value(quantize, 2);
    for (const instruction_ref reader : quantize->outputs()) {
        if (reader->name() != "dequantize_linear" || reader->inputs()[0] != quantize) return false;
        if (!per_tensor_int8(reader, quantize->get_shape().type())) return false;
        // The same levels: scale bit for bit and of the same float type, the same zero point.
        if (one_value(reader, 1) != scale || one_value(reader, 2) != zero_point ||
            reader->inputs()[1]->get_shape().type() != quantize->inputs()[1]->get_shape().type())
            return false;
        if (!read_as_convolution_source(reader)) return false;
    }
    return true;
}

void shift_to_unsigned(module& m, instruction_ref quantize) {
    const shape& zero_point_shape = quantize->inputs()[2]->get_shape();
    const auto z = static_cast<std::int64_t>(*one_value(quantize, 2)) + shift;
    const instruction_ref zero =
        m.insert_literal(quantize, literal(shape{dtype::uint8_type, zero_point_shape.lens()}, std::vector<std::int64_t>{z}));
    auto quantize_op = *quantize->get_operator().get_if<op::quantize_linear>();
    quantize_op.output_type = dtype::uint8_type;
    const instruction_ref codes =
        m.insert_instruction(quantize, quantize_op, {quantize->inputs()[0], quantize->inputs()[1], zero});
    const std::vector<instruction_ref> readers = quantize->outputs();
    for (const instruction_ref reader : readers) {
        const instruction_ref values =
            m.insert_instruction(reader, reader->get_operator(), {codes, reader->inputs()[1], zero});
        if (!replace_value(m, reader, values))
            fail("unsigned_convolution_sources: a dequantize of uint8 codes did not replace the int8 one it equals");
    }
}

}  // namespace

void unsigned_convolution_sources::apply(module& m) const {
    std::vector<instruction_ref> shiftable;
    for (auto ins = m.begin(); ins != m.end(); ++ins)
        if (ins->name() == "quantize_linear" && is_shiftable(ins)) shiftable.push_back(ins);
    for (const instruction_ref quantize : shiftable) shift_to_unsigned(m, quantize);
    if (!shiftable.empty()) remove_dead_instructions(m);
}

}  // namespace kiln
