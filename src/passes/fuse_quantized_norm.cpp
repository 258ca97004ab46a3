// A softmax or layer_norm whose only readers are per-tensor quantize_linear
// ops of 8-bit codes (one, or several equal ones not merged yet) becomes one
// op that writes the codes (ops/quantized_norm.hpp):
//   quantize(softmax(x + mask)) -> softmax_quantize(x, mask, s, z)
//   quantize(layer_norm(x, g, b)) -> layer_norm_quantize(x, g, b, s, z)
// In int8 attention the probabilities are otherwise written as float32 and
// read back by the quantize before the p @ v product; in a pre-norm
// transformer (ViT) the normalized rows likewise before the projections.
//
// Reshapes between the normalization and the quantize (each read once) stay,
// viewing the codes instead. Declined, so that the unfused ops run as before: a per-axis or blocked
// quantize, non-constant quantize parameters, a sub-byte or 16-bit result, a
// softmax along an axis other than the last (or not over float32), and a
// layer_norm without both scale and bias or not over float32. The mask add
// joins only when it is read by the softmax alone, keeps x's shape, and the
// mask varies along the softmax's axis with unit stride (attention's [B, 1,
// 1, S] or [B, 1, S, S]); another add stays as it is, before the fused op.
// A per-tensor dequantize of 8-bit codes that only the softmax (or its mask
// add) reads joins too: softmax_quantize then reads the codes (input_scale,
// input_zero_point), and the int8 product before it writes them.
#include <cmath>
#include <iterator>
#include <list>
#include <optional>
#include <string>

#include "kiln/passes.hpp"
#include "ops/norm.hpp"
#include "ops/op_helpers.hpp"
#include "ops/quant.hpp"
#include "ops/quantized_norm.hpp"
#include "passes/constant_value.hpp"
#include "passes/rewriter.hpp"

namespace kiln {

namespace {

using match::match_result;
using match::name;

// A quantize_linear's scale and zero point when they are one constant value
// each and its codes are 8-bit; the zero point is null when absent.
struct quantize_parameters {
    instruction_ref scale;
    std::optional<instruction_ref> zero_point;
    double scale_value = 0;
    double zero_point_value = 0;
    dtype codes = dtype::int8_type;
};

std::optional<quantize_parameters> per_tensor_parameters(instruction_ref q) {
    const auto* op = q->get_operator().get_if<op::quantize_linear>();
    if (op == nullptr || op->block_size != 0 || !op::is_8bit_integer(q->get_shape().type())) return std::nullopt;
    const auto& in = q->inputs();
    quantize_parameters p{in[1], std::nullopt, 0, 0, q->get_shape().type()};
    if (in[1]->get_shape().type() != dtype::float_type || in[1]->get_shape().elements() != 1) return std::nullopt;
    const auto s = scalar_constant(*in[1]);
    if (!s || !(*s > 0)) return std::nullopt;
    p.scale_value = *s;
    if (in.size() == 3) {
        const auto z = scalar_constant(*in[2]);
        if (!z || in[2]->get_shape().elements() != 1) return std::nullopt;
        p.zero_point = in[2];
        p.zero_point_value = *z;
    }
    return p;
}

bool same_parameters(const quantize_parameters& a, const quantize_parameters& b) {
    return a.codes == b.codes && a.scale_value == b.scale_value && a.zero_point_value == b.zero_point_value;
}

std::size_t position(const module& m, instruction_ref ins) {
    return static_cast<std::size_t>(std::distance(m.begin(), std::list<instruction>::const_iterator(ins)));
}

// The quantize `root` reads `value`, whose every reader is a quantize with
// root's parameters: those readers, root first; nothing when one differs or
// root is not the first of them in the module (the fused op goes before it).
std::optional<std::vector<instruction_ref>> equal_quantizes(const module& m, instruction_ref value,
                                                            instruction_ref root, const quantize_parameters& p) {
    std::vector<instruction_ref> readers{root};
    const std::size_t root_at = position(m, root);
    for (const auto& u : value->outputs()) {
        if (u == root) continue;
        const auto other = per_tensor_parameters(u);
        if (!other || u->inputs()[0] != value || !same_parameters(p, *other) || position(m, u) < root_at)
            return std::nullopt;
        readers.push_back(u);
    }
    return readers;
}

// The order-preserving views (reshapes of a standard value) between `value`
// and the normalization `op` that computes it, nearest to `value` first,
// each read once; nothing when the chain ends elsewhere. A per-tensor
// quantize is elementwise, so it can go before them and they then view the
// codes (a Gemm's [1, T, C] -> [T, C] input reshape, say).
std::optional<std::vector<instruction_ref>> views_above(instruction_ref value, const std::string& op) {
    std::vector<instruction_ref> views;
    while (value->name() != op) {
        const bool view = value->name() == "reshape" || value->name() == "squeeze" || value->name() == "unsqueeze" ||
                          value->name() == "flatten";
        if (!view || value->outputs().size() != 1 || value->inputs().empty() ||
            !value->inputs()[0]->get_shape().standard())
            return std::nullopt;
        views.push_back(value);
        value = value->inputs()[0];
    }
    return views;
}

// The zero point input: the quantize's own, or a 0 of its codes' type.
instruction_ref zero_point_input(module& m, instruction_ref pos, const quantize_parameters& p) {
    if (p.zero_point) return *p.zero_point;
    return m.insert_literal(pos, literal(shape{p.codes, {}}, std::vector<std::int64_t>{0}));
}

// Gives every reader the fused op's codes (the first one is replaced by
// it), seen through `views` (outermost last) as the readers saw the values.
bool replace_readers(module& m, const std::vector<instruction_ref>& readers, const operation& fused,
                     const std::vector<instruction_ref>& inputs, const std::vector<instruction_ref>& views = {}) {
    instruction_ref codes = m.insert_instruction(readers[0], fused, inputs);
    for (auto v = views.rbegin(); v != views.rend(); ++v)
        codes = m.insert_instruction(readers[0], (*v)->get_operator(), {codes});
    if (codes->get_shape() != readers[0]->get_shape()) return false;  // the driver removes the unused ops
    for (const auto& reader : readers)
        if (!replace_value(m, reader, codes)) return false;
    return true;
}

// The mask of add(x, mask) when the add keeps x's shape and the mask has
// unit stride along the last axis, over all of it.
std::optional<std::pair<instruction_ref, instruction_ref>> scores_and_mask(instruction_ref add) {
    const shape& sum = add->get_shape();
    for (std::size_t i = 0; i < 2; ++i) {
        const instruction_ref x = add->inputs()[i];
        const instruction_ref mask = add->inputs()[1 - i];
        const shape& ms = mask->get_shape();
        if (x->get_shape().lens() != sum.lens() || ms.type() != dtype::float_type || ms.ndim() == 0) continue;
        if (ms.lens().back() != sum.lens().back() || ms.strides().back() != 1) continue;
        return std::make_pair(x, mask);
    }
    return std::nullopt;
}

// x = dequantize(codes) read by the fused op alone, per tensor: the fused op
// reads the codes (ONNX Runtime's rounded attention scores, which the
// product then writes as int8 codes instead of float32 values).
void read_codes(op::softmax_quantize& fused, instruction_ref& x) {
    const auto* d = x->get_operator().get_if<op::dequantize_linear>();
    if (d == nullptr || d->block_size != 0 || x->outputs().size() != 1) return;
    const auto& in = x->inputs();
    if (!op::is_8bit_integer(in[0]->get_shape().type()) || in[1]->get_shape().type() != dtype::float_type ||
        in[1]->get_shape().elements() != 1)
        return;
    const auto scale = scalar_constant(*in[1]);
    const auto zero_point = in.size() == 3 ? scalar_constant(*in[2]) : std::optional<double>(0.0);
    if (!scale || !(*scale > 0) || !std::isfinite(*scale) || !zero_point ||
        (in.size() == 3 && in[2]->get_shape().elements() != 1))
        return;
    fused.input_scale = *scale;
    fused.input_zero_point = static_cast<std::int64_t>(*zero_point);
    x = in[0];
}

rewrite_rule fuse_softmax_quantize() {
    auto pattern = name("quantize_linear").where([](instruction_ref ins) {
        return views_above(ins->inputs()[0], "softmax").has_value();
    });
    return {"fuse_softmax_quantize", pattern, [](module& m, const match_result& r) {
                const auto views = *views_above(r.root->inputs()[0], "softmax");
                const instruction_ref softmax = views.empty() ? r.root->inputs()[0] : views.back()->inputs()[0];
                const shape& x = softmax->get_shape();
                const auto p = per_tensor_parameters(r.root);
                if (!p || x.type() != dtype::float_type || x.ndim() == 0) return false;
                const auto axis = softmax->get_operator().get_if<op::softmax>()->axis;
                if (ops::normalize_axis("softmax", axis, x.ndim()) != x.ndim() - 1) return false;
                const auto readers = equal_quantizes(m, views.empty() ? softmax : views.front(), r.root, *p);
                if (!readers || (!views.empty() && softmax->outputs().size() != 1)) return false;
                op::softmax_quantize fused;
                std::vector<instruction_ref> inputs{softmax->inputs()[0]};
                const instruction_ref scores = inputs[0];
                if (scores->name() == "add" && scores->outputs().size() == 1) {
                    if (auto sm = scores_and_mask(scores)) {
                        fused.has_mask = true;
                        inputs = {sm->first, sm->second};
                    }
                }
                read_codes(fused, inputs[0]);
                inputs.push_back(p->scale);
                inputs.push_back(zero_point_input(m, r.root, *p));
                return replace_readers(m, *readers, fused, inputs, views);
            }};
}

rewrite_rule fuse_layer_norm_quantize() {
    auto pattern = name("quantize_linear").where([](instruction_ref ins) {
        return views_above(ins->inputs()[0], "layer_norm").has_value();
    });
    return {"fuse_layer_norm_quantize", pattern, [](module& m, const match_result& r) {
                const auto views = *views_above(r.root->inputs()[0], "layer_norm");
                const instruction_ref norm = views.empty() ? r.root->inputs()[0] : views.back()->inputs()[0];
                const auto p = per_tensor_parameters(r.root);
                if (!p || norm->get_shape().type() != dtype::float_type || norm->inputs().size() != 3) return false;
                const auto readers = equal_quantizes(m, views.empty() ? norm : views.front(), r.root, *p);
                if (!readers || (!views.empty() && norm->outputs().size() != 1)) return false;
                const auto* ln = norm->get_operator().get_if<op::layer_norm>();
                op::layer_norm_quantize fused;
                fused.axis = ln->axis;
                fused.epsilon = ln->epsilon;
                std::vector<instruction_ref> inputs = norm->inputs();
                inputs.push_back(p->scale);
                inputs.push_back(zero_point_input(m, r.root, *p));
                return replace_readers(m, *readers, fused, inputs, views);
            }};
}

}  // namespace

void fuse_quantized_norm::apply(module& m) const {
    rewrite_to_fixed_point(m, {fuse_softmax_quantize(), fuse_layer_norm_quantize()});
}

}  // namespace kiln
