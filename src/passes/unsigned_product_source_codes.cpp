// int8 codes read only as the source of products become uint8 codes, with
// the zero point plus 128, whatever the zero point.
//
// unsigned_activation_codes shifts the pairs with zero point -128 wherever
// they are read. With another zero point z the uint8 pair has zero point
// z + 128 and the same levels (unsigned_codes.hpp), so it pays only where
// the codes feed a kernel that prefers u8: the first (source) input of an
// int8 product. oneDNN's dot and convolution compute u8 x s8 directly
// (VNNI's vpdpbusd), while an s8 source costs them a shift by 128 and its
// compensation for every output (BERT-base's S8S8 file: its asymmetric
// GELU, attention and projection inputs).
//
// Rewritten: a per-tensor int8 quantize with constant scale and zero point
// whose every reader is a dequantize with the same parameters (the QDQ
// pair), where every reader of those dequantizes is a dot or convolution
// reading them as input 0 only. The second input of a product (oneDNN's
// weights are s8), other readers (an add, a view: the residual stream) and
// codes read as they are keep int8.
#include <vector>

#include "kiln/passes.hpp"
#include "passes/rewriter.hpp"
#include "passes/unsigned_codes.hpp"

namespace kiln {

namespace {

bool is_product(instruction_ref ins) { return ins->name() == "dot" || ins->name() == "convolution"; }

// Whether every use of `values` is as the source (input 0) of a product.
bool read_only_as_product_source(instruction_ref values) {
    if (values->outputs().empty()) return false;
    for (const instruction_ref reader : values->outputs()) {
        if (!is_product(reader)) return false;
        const auto& inputs = reader->inputs();
        for (std::size_t i = 1; i < inputs.size(); ++i)
            if (inputs[i] == values) return false;
    }
    return true;
}

bool feeds_only_product_sources(instruction_ref quantize) {
    if (!unsigned_codes::read_only_by_matching_dequantizes(quantize)) return false;
    for (const instruction_ref dequantize : quantize->outputs())
        if (!read_only_as_product_source(dequantize)) return false;
    return true;
}

}  // namespace

void unsigned_product_source_codes::apply(module& m) const {
    std::vector<instruction_ref> shiftable;
    for (auto ins = m.begin(); ins != m.end(); ++ins)
        if (ins->name() == "quantize_linear" && feeds_only_product_sources(ins)) shiftable.push_back(ins);
    for (const instruction_ref quantize : shiftable) unsigned_codes::shift_to_unsigned(m, quantize);
    if (!shiftable.empty()) remove_dead_instructions(m);
}

}  // namespace kiln
