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
#include "passes/matcher.hpp"
#include "targets/cpu/passes/cpu_passes.hpp"

namespace kiln {

namespace {

// Whether the optional zero point is absent or constant zeros.
bool symmetric(const instruction& dequantize) {
    if (dequantize.inputs().size() < 3) return true;
    const auto zero_point = constant_value(*dequantize.inputs()[2]);
    if (!zero_point) return false;
    const auto* codes = zero_point->data_as<std::int8_t>();
    for (std::size_t i = 0; i < zero_point->get_shape().elements(); ++i)
        if (codes[i] != 0) return false;
    return true;
}

// The scale of each of the N columns, when `dequantize` is per column (axis
// 1 of 2-D codes) or per tensor; nothing otherwise.
std::optional<std::vector<float>> column_scales(const instruction& dequantize) {
    const auto* dq = dequantize.get_operator().get_if<op::dequantize_linear>();
    const shape& codes = dequantize.inputs()[0]->get_shape();
    const shape& scale = dequantize.inputs()[1]->get_shape();
    if (dq == nullptr || dq->block_size != 0 || scale.type() != dtype::float_type || codes.ndim() != 2) return {};
    const std::size_t cols = codes.lens()[1];
    const bool per_tensor = scale.elements() == 1;
    if (!per_tensor && (scale.ndim() != 1 || scale.elements() != cols || (dq->axis != 1 && dq->axis != -1))) return {};
    const auto values = constant_value(*dequantize.inputs()[1]);
    if (!values) return {};
    const float* s = values->data_as<float>();
    std::vector<float> scales(cols);
    for (std::size_t j = 0; j < cols; ++j) scales[j] = s[per_tensor ? 0 : j];
    return scales;
}

}  // namespace

void int8_weight_products::apply(module& m) const {
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        if (ins->name() != "dot" || ins->get_shape().type() != dtype::float_type) continue;
        const instruction_ref a = ins->inputs()[0];
        const instruction_ref weights = ins->inputs()[1];
        if (a->get_shape().type() != dtype::float_type || weights->name() != "dequantize_linear") continue;
        const instruction_ref codes = weights->inputs()[0];
        if (codes->get_shape().type() != dtype::int8_type || !match::is_constant_instruction(*codes) ||
            !match::is_constant_instruction(*weights->inputs()[1]) || !symmetric(*weights))
            continue;
        const auto scales = column_scales(*weights);
        if (!scales) continue;
        const instruction_ref scale =
            m.insert_literal(ins, literal(shape{dtype::float_type, {scales->size()}}, *scales));
        op::fused_dot product;
        product.post.append(op::post_op_kind::mul);
        const instruction_ref fused = m.insert_instruction(ins, product, {a, codes, scale});
        m.replace_all_uses(ins, fused);
    }
}

}  // namespace kiln
