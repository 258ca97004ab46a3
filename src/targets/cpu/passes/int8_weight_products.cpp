// See cpu_passes.hpp. dot(a, dequantize_linear(codes, scale[, 0])) with
// constant int8 codes [K, N] and one scale per output column (or one for
// all) is (a . codes) * scale column by column, exactly: the scale factors
// out of each column's sum. The product then reads the codes, a quarter of
// float32's bytes, which is what bounds a decoder step's products; the
// scale is a mul post-op that the kernels apply to each result block while
// it is in cache (later post-ops, the bias among them, follow it).
#include <vector>

#include "kiln/module.hpp"
#include "ops/fused_dot.hpp"
#include "ops/quant.hpp"
#include "passes/constant_value.hpp"
#include "passes/dequantized_operand.hpp"
#include "targets/cpu/passes/cpu_passes.hpp"

namespace kiln {

namespace {

// The scale of each of the N columns of int8 weights read through
// `dequantize` (symmetric codes [K, N], the scales per column or per
// tensor); nothing for any other dequantize.
std::optional<std::vector<float>> column_scales(instruction_ref dequantize) {
    const dequantized d = read_dequantize(dequantize);
    const shape& codes = d.q->get_shape();
    if (dequantize->get_operator().get_if<op::dequantize_linear>()->block_size != 0 || codes.ndim() != 2 ||
        !is_quantized_weight(d, 1, codes.lens()[1]))
        return {};
    const auto values = constant_value(*d.scale);
    if (!values) return {};
    const std::vector<float> s = values->to_vector<float>();
    std::vector<float> scales(codes.lens()[1]);
    for (std::size_t j = 0; j < scales.size(); ++j) scales[j] = s[d.per_tensor() ? 0 : j];
    return scales;
}

}  // namespace

void int8_weight_products::apply(module& m) const {
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        if (ins->name() != "dot" || ins->get_shape().type() != dtype::float_type) continue;
        const instruction_ref a = ins->inputs()[0];
        const instruction_ref weights = ins->inputs()[1];
        if (a->get_shape().type() != dtype::float_type || weights->name() != "dequantize_linear") continue;
        const auto scales = column_scales(weights);
        if (!scales) continue;
        const instruction_ref scale =
            m.insert_literal(ins, literal(shape{dtype::float_type, {scales->size()}}, *scales));
        op::fused_dot product;
        product.post.append(op::post_op_kind::mul);
        const instruction_ref fused = m.insert_instruction(ins, product, {a, weights->inputs()[0], scale});
        m.replace_all_uses(ins, fused);
    }
}

}  // namespace kiln
