// Quantized-op fusion: a QDQ graph (what ONNX Runtime's quantize_static and
// kiln.quantize_int8 write) computes each quantized layer as float
// convolution / dot over dequantized operands. These rules make the integer
// arithmetic explicit, so that targets run it on int8 kernels:
//   - convolution(dequantize(xq, sx, zx), dequantize(wq, sw)) becomes
//     dequantize(quant_convolution(xq, wq, zx), sx * sw, axis 1), and dot
//     likewise (quant_dot, the scale along the result's last axis);
//   - dot(dequantize(a, sa, za), dequantize(b, sb, zb)) of two activations
//     (per-tensor int8 b, attention's products) becomes
//     dequantize(quant_dot(a, b, za, zb), sa * sb);
//   - quantize(dequantize(q, s, z), s, z) is q;
//   - a dequantize of 8-bit codes moves below reshapes, transposes, slices,
//     max pooling and concats of equally scaled inputs, so that such a view
//     of a quantized layer's output meets the next layer's quantize and the
//     pair cancels (int32 sums stay beside their product);
//   - a ReLU of a dequantize moves below max pooling (they commute), so that
//     the dequantize can move below it too;
//   - a per-tensor quantize moves above max pooling, which then pools codes,
//     and above a zero pad, which then pads with the zero point's code; a
//     pad of an activation's codes with its zero point before a convolution
//     becomes the quantized convolution's padding (the padding stands for
//     the real value 0): PT2E's MobileNetV2, whose "same" padding is an F.pad;
//   - the NaN guard exporters put after a softmax, where(not(equal(p, p)),
//     0, p), goes before an integer quantize, which gives NaN the zero
//     point, the code of 0, anyway.
// The weights must be constant int8 with zero points absent or all zero
// (symmetric); others stay float (correct, slow): kiln perf shows them as
// float convolutions. Exact in integers: the only rounding left is the
// product of the two scales, formed in float32 (what the dequantized float
// convolution rounds per product anyway).
#include <optional>

#include "kiln/op_registry.hpp"
#include "kiln/passes.hpp"
#include "ops/op_helpers.hpp"
#include "ops/pool.hpp"
#include "ops/quant.hpp"
#include "ops/quantized_linalg.hpp"
#include "ops/shape_ops.hpp"
#include "passes/constant_value.hpp"
#include "passes/dequantized_operand.hpp"
#include "passes/rewriter.hpp"
#include "passes/spatial_padding.hpp"

namespace kiln {

namespace {

using match::match_result;
using match::name;

// A float32 constant's values; nothing when it is not one.
std::optional<std::vector<float>> float_values(instruction_ref ins) {
    if (ins->get_shape().type() != dtype::float_type) return std::nullopt;
    auto v = constant_value(*ins);
    if (!v) return std::nullopt;
    return v->to_vector<float>();
}

// An activation's dequantize: int8 / uint8 codes, one constant positive
// scale and a constant zero point (or none).
bool is_quantized_activation(const dequantized& d) {
    if (!op::is_8bit_integer(d.q->get_shape().type()) || !d.per_tensor()) return false;
    auto s = scalar_constant(*d.scale);
    if (!s || !(*s > 0) || d.scale->get_shape().type() != dtype::float_type) return false;
    return !d.zero_point || scalar_constant(**d.zero_point).has_value();
}

// sx * sw for each of `channels` output channels, as a float32 [channels] literal.
instruction_ref combined_scale(module& m, instruction_ref pos, const dequantized& x, const dequantized& w,
                               std::size_t channels) {
    const float sx = (*float_values(x.scale))[0];
    const std::vector<float> sw = *float_values(w.scale);
    std::vector<float> values(channels);
    for (std::size_t c = 0; c < channels; ++c) values[c] = sx * sw[sw.size() == 1 ? 0 : c];
    return m.insert_literal(pos, literal(shape{dtype::float_type, {channels}}, values));
}

std::vector<instruction_ref> codes_and_zero_point(const dequantized& x, const dequantized& w) {
    std::vector<instruction_ref> inputs{x.q, w.q};
    if (x.zero_point) inputs.push_back(*x.zero_point);
    return inputs;
}

operation dequantize_along(std::int64_t axis) {
    op::dequantize_linear d;
    d.axis = axis;
    return d;
}

rewrite_rule quantize_convolution() {
    auto pattern = name("convolution")
                       .shape_is([](const shape& s) { return s.type() == dtype::float_type; })
                       .args(name("dequantize_linear").bind("x"), name("dequantize_linear").bind("w"));
    return {"quantize_convolution", pattern, [](module& m, const match_result& r) {
                const auto x = read_dequantize(r.at("x"));
                const auto w = read_dequantize(r.at("w"));
                const std::size_t channels = r.root->get_shape().lens()[1];
                if (!is_quantized_activation(x) || !is_quantized_weight(w, 0, channels)) return false;
                // quant_convolution takes convolution's attributes (padding, stride, dilation, group).
                auto sums = m.insert_instruction(r.root, make_op("quant_convolution", r.root->get_operator().attributes()),
                                                 codes_and_zero_point(x, w));
                auto scale = combined_scale(m, r.root, x, w, channels);
                return replace_with_new(m, r.root, dequantize_along(1), {sums, scale});
            }};
}

rewrite_rule quantize_dot() {
    auto pattern = name("dot")
                       .shape_is([](const shape& s) { return s.type() == dtype::float_type && s.ndim() >= 2; })
                       .args(name("dequantize_linear").bind("a"), name("dequantize_linear").bind("b"));
    return {"quantize_dot", pattern, [](module& m, const match_result& r) {
                const auto a = read_dequantize(r.at("a"));
                const auto b = read_dequantize(r.at("b"));
                const shape& out = r.root->get_shape();
                const std::size_t b_rank = b.q->get_shape().ndim();
                const std::size_t columns = out.lens().back();
                if (a.q->get_shape().ndim() < 2 || b_rank < 2) return false;
                if (!is_quantized_activation(a) || !is_quantized_weight(b, b_rank - 1, columns)) return false;
                auto sums = m.insert_instruction(r.root, op::quant_dot{}, codes_and_zero_point(a, b));
                auto scale = combined_scale(m, r.root, a, b, columns);
                return replace_with_new(m, r.root, dequantize_along(static_cast<std::int64_t>(out.ndim()) - 1),
                                        {sums, scale});
            }};
}

// A zero point input for a quantized product: the given one, or a 0 of `t`.
instruction_ref zero_point_or_zero(module& m, instruction_ref pos, const std::optional<instruction_ref>& z, dtype t) {
    if (z) return *z;
    return m.insert_literal(pos, literal(shape{t, {}}, std::vector<std::int64_t>{0}));
}

// Both operands computed at run time: b is int8 with a zero point like any
// activation (oneDNN takes int8 weights with a zero point), the scale is
// one value.
rewrite_rule quantize_activation_dot() {
    auto pattern = name("dot")
                       .shape_is([](const shape& s) { return s.type() == dtype::float_type && s.ndim() >= 2; })
                       .args(name("dequantize_linear").bind("a"), name("dequantize_linear").bind("b"));
    return {"quantize_activation_dot", pattern, [](module& m, const match_result& r) {
                const auto a = read_dequantize(r.at("a"));
                const auto b = read_dequantize(r.at("b"));
                if (a.q->get_shape().ndim() < 2 || b.q->get_shape().ndim() < 2) return false;
                if (match::is_constant_instruction(*b.q) || b.q->get_shape().type() != dtype::int8_type) return false;
                if (!is_quantized_activation(a) || !is_quantized_activation(b)) return false;
                const dtype at = a.q->get_shape().type();
                auto sums = m.insert_instruction(
                    r.root, op::quant_dot{},
                    {a.q, b.q, zero_point_or_zero(m, r.root, a.zero_point, at),
                     zero_point_or_zero(m, r.root, b.zero_point, dtype::int8_type)});
                // The product of the two scales rounded to float32, as combined_scale does.
                const float scale = (*float_values(a.scale))[0] * (*float_values(b.scale))[0];
                auto s = m.insert_literal(r.root, literal(shape{dtype::float_type, {}}, std::vector<float>{scale}));
                return replace_with_new(m, r.root, dequantize_along(1), {sums, s});
            }};
}

// Two optional one-value constants hold the same number (absent is 0).
bool same_scalar(const std::optional<instruction_ref>& a, const std::optional<instruction_ref>& b) {
    const auto va = a ? scalar_constant(**a) : std::optional<double>(0.0);
    const auto vb = b ? scalar_constant(**b) : std::optional<double>(0.0);
    return va && vb && *va == *vb;
}

bool same_per_tensor_parameters(const dequantized& a, const dequantized& b) {
    return a.per_tensor() && b.per_tensor() && a.q->get_shape().type() == b.q->get_shape().type() &&
           a.scale->get_shape().type() == b.scale->get_shape().type() && same_scalar(a.scale, b.scale) &&
           same_scalar(a.zero_point, b.zero_point);
}

// quantize(dequantize(q, s, z), s, z) with the same codes' type: q itself.
rewrite_rule cancel_requantize() {
    auto pattern = name("quantize_linear").where([](instruction_ref ins) {
        return ins->inputs()[0]->name() == "dequantize_linear";
    });
    return {"cancel_requantize", pattern, [](module& m, const match_result& r) {
                const auto d = read_dequantize(r.root->inputs()[0]);
                const auto& in = r.root->inputs();
                dequantized q{r.root, in[1], std::nullopt, 1};
                if (in.size() == 3) q.zero_point = in[2];
                if (d.q->get_shape().type() != r.root->get_shape().type()) return false;
                if (!same_per_tensor_parameters(d, q)) return false;
                return replace_value(m, r.root, d.q);
            }};
}

// Replaces `view` (a view or other order-preserving op of dequantize `d`)
// by the same op of d's codes, dequantized with d's parameters along `axis`.
bool move_below(module& m, instruction_ref view, const dequantized& d, std::int64_t axis) {
    auto moved = m.insert_instruction(view, view->get_operator(), {d.q});
    std::vector<instruction_ref> inputs{moved, d.scale};
    if (d.zero_point) inputs.push_back(*d.zero_point);
    auto replacement = m.insert_instruction(view, dequantize_along(axis), inputs);
    if (replacement->get_shape().lens() != view->get_shape().lens()) return false;
    return replace_value(m, view, replacement) || replace_value_restrided(m, view, replacement);
}

bool is_max_pooling(const operation& op) {
    const auto* p = op.get_if<op::pooling>();
    return p != nullptr && p->mode == op::pooling_mode::max;
}

// Views and max pooling commute with a per-tensor dequantize (max pooling
// because a positive scale keeps the order); a transpose also carries a
// per-axis one, its axis permuted.
rewrite_rule dequantize_below_view() {
    auto pattern = match::any_of_names({"reshape", "flatten", "squeeze", "unsqueeze", "transpose", "slice", "pooling"})
                       .where([](instruction_ref ins) {
                           // int32 sums stay beside their product, whose kernel applies the scale.
                           return ins->inputs().size() == 1 && ins->inputs()[0]->name() == "dequantize_linear" &&
                                  op::is_8bit_integer(ins->inputs()[0]->inputs()[0]->get_shape().type());
                       });
    return {"dequantize_below_view", pattern, [](module& m, const match_result& r) {
                const auto d = read_dequantize(r.root->inputs()[0]);
                if (r.root->name() == "pooling") {
                    auto s = scalar_constant(*d.scale);
                    if (!is_max_pooling(r.root->get_operator()) || !d.per_tensor() || !s || !(*s > 0)) return false;
                }
                if (d.per_tensor()) return move_below(m, r.root, d, 1);
                const auto* t = r.root->get_operator().get_if<op::transpose>();
                if (t == nullptr || d.scale->get_shape().ndim() != 1) return false;  // per axis, not blocked
                const auto rank = static_cast<std::int64_t>(d.q->get_shape().ndim());
                const std::int64_t axis = d.axis < 0 ? d.axis + rank : d.axis;
                for (std::int64_t i = 0; i < rank; ++i) {
                    // An empty permutation reverses the dims.
                    const std::int64_t from =
                        t->permutation.empty() ? rank - 1 - i : t->permutation[static_cast<std::size_t>(i)];
                    if (from == axis) return move_below(m, r.root, d, i);
                }
                return false;
            }};
}

// concat(dequantize(q1, s, z), dequantize(q2, s, z), ...) with one s and z
// is dequantize(concat(q1, q2, ...), s, z).
rewrite_rule dequantize_below_concat() {
    auto pattern = name("concat").where([](instruction_ref ins) {
        for (const auto& in : ins->inputs())
            if (in->name() != "dequantize_linear") return false;
        return !ins->inputs().empty();
    });
    return {"dequantize_below_concat", pattern, [](module& m, const match_result& r) {
                const auto first = read_dequantize(r.root->inputs()[0]);
                std::vector<instruction_ref> codes;
                for (const auto& in : r.root->inputs()) {
                    const auto d = read_dequantize(in);
                    if (!same_per_tensor_parameters(first, d)) return false;
                    codes.push_back(d.q);
                }
                auto joined = m.insert_instruction(r.root, r.root->get_operator(), codes);
                std::vector<instruction_ref> inputs{joined, first.scale};
                if (first.zero_point) inputs.push_back(*first.zero_point);
                return replace_with_new(m, r.root, dequantize_along(1), inputs);
            }};
}

// quantize(max_pooling(v)) = max_pooling(quantize(v)) for a per-tensor
// quantize (monotone): the pooling then runs on codes.
rewrite_rule quantize_above_max_pooling() {
    auto pattern = name("quantize_linear").where([](instruction_ref ins) {
        auto in = ins->inputs()[0];
        return in->name() == "pooling" && in->outputs().size() == 1 && is_max_pooling(in->get_operator()) &&
               ins->inputs()[1]->get_shape().elements() == 1;
    });
    return {"quantize_above_max_pooling", pattern, [](module& m, const match_result& r) {
                auto pool = r.root->inputs()[0];
                auto inputs = r.root->inputs();
                inputs[0] = pool->inputs()[0];
                auto codes = m.insert_instruction(r.root, r.root->get_operator(), inputs);
                return replace_with_new(m, r.root, pool->get_operator(), {codes});
            }};
}

// max_pooling(relu(dequantize(q))) = relu(max_pooling(dequantize(q))):
// ReLU keeps the order, so it commutes with max pooling exactly (the values
// are finite: no NaN); the dequantize then moves below the pooling, which
// pools codes (DenseNet's stem: convolution -> QDQ -> ReLU -> max pooling
// pooled the float32 image four times larger than its result).
rewrite_rule relu_below_max_pooling() {
    auto pattern = name("pooling").where([](instruction_ref ins) {
        if (!is_max_pooling(ins->get_operator()) || ins->inputs().size() != 1) return false;
        // A pooling that a quantize alone reads gets that quantize above it
        // instead (quantize_above_max_pooling), and the ReLU then joins the
        // convolution before it (ResNet's stem).
        if (ins->outputs().size() == 1 && ins->outputs()[0]->name() == "quantize_linear") return false;
        const auto relu = ins->inputs()[0];
        return relu->name() == "relu" && relu->outputs().size() == 1 && relu->inputs()[0]->name() == "dequantize_linear" &&
               op::is_8bit_integer(relu->inputs()[0]->inputs()[0]->get_shape().type());
    });
    return {"relu_below_max_pooling", pattern, [](module& m, const match_result& r) {
                const auto relu = r.root->inputs()[0];
                auto pooled = m.insert_instruction(r.root, r.root->get_operator(), relu->inputs());
                return replace_with_new(m, r.root, relu->get_operator(), {pooled});
            }};
}

rewrite_rule drop_nan_guard_before_quantize() {
    auto pattern = name("quantize_linear").where([](instruction_ref ins) {
        return ins->inputs()[0]->name() == "where" && op::is_8bit_integer(ins->get_shape().type());
    });
    return {"drop_nan_guard_before_quantize", pattern, [](module& m, const match_result& r) {
                const instruction_ref guard = r.root->inputs()[0];
                const auto& w = guard->inputs();
                if (w.size() != 3 || w[0]->name() != "not" || w[0]->inputs()[0]->name() != "equal") return false;
                const instruction_ref p = w[2];
                const auto& compared = w[0]->inputs()[0]->inputs();
                if (compared[0] != p || compared[1] != p || scalar_constant(*w[1]) != 0.0 ||
                    guard->get_shape() != p->get_shape())
                    return false;
                auto inputs = r.root->inputs();
                inputs[0] = p;
                return replace_with_new(m, r.root, r.root->get_operator(), inputs);
            }};
}

// quantize(pad(v, 0), s, z) = pad(quantize(v, s, z), z) for a per-tensor
// quantize: 0 quantizes to the zero point exactly.
rewrite_rule quantize_above_zero_pad() {
    auto pattern = name("quantize_linear").where([](instruction_ref ins) {
        const auto in = ins->inputs()[0];
        const auto pad = constant_spatial_pad(*in);
        const bool constant_zero_point = ins->inputs().size() < 3 || scalar_constant(*ins->inputs()[2]).has_value();
        return pad && pad->value == 0 && in->outputs().size() == 1 && ins->inputs()[1]->get_shape().elements() == 1 &&
               constant_zero_point && op::is_8bit_integer(ins->get_shape().type());  // sub-byte codes do not pad
    });
    return {"quantize_above_zero_pad", pattern, [](module& m, const match_result& r) {
                const auto pad = r.root->inputs()[0];
                auto inputs = r.root->inputs();
                inputs[0] = pad->inputs()[0];
                const double zero_point = inputs.size() < 3 ? 0 : *scalar_constant(*inputs[2]);
                auto codes = m.insert_instruction(r.root, r.root->get_operator(), inputs);
                auto code_pad = pad->get_operator().with_attributes(value(value_map{{"value", value(zero_point)}}));
                return replace_with_new(m, r.root, code_pad, {codes});
            }};
}

// convolution(dequantize(pad(xq, z), s, z), w): the padded codes are real
// zeros, what the convolution's own padding adds.
rewrite_rule zero_point_pad_into_convolution() {
    auto pattern = name("convolution").args(name("dequantize_linear").bind("x"), match::any().bind("w"));
    return {"zero_point_pad_into_convolution", pattern, [](module& m, const match_result& r) {
                const auto x = read_dequantize(r.at("x"));
                const auto pad = constant_spatial_pad(*x.q);
                if (!pad || !is_quantized_activation(x)) return false;
                const double zero_point = x.zero_point ? *scalar_constant(**x.zero_point) : 0;
                if (pad->value != zero_point) return false;
                auto inputs = r.at("x")->inputs();
                inputs[0] = x.q->inputs()[0];
                auto unpadded = m.insert_instruction(r.root, r.at("x")->get_operator(), inputs);
                return replace_with_new(m, r.root, with_more_padding(r.root->get_operator(), *pad), {unpadded, r.at("w")});
            }};
}

}  // namespace

void fuse_quantized_ops::apply(module& m) const {
    // The pad rule before quantize_convolution, which would take the padded codes as they are.
    std::vector<rewrite_rule> rules{zero_point_pad_into_convolution()};
    if (convolutions) rules.push_back(quantize_convolution());
    for (auto rule : {quantize_dot(), quantize_activation_dot(), cancel_requantize(), dequantize_below_view(),
                      dequantize_below_concat(), quantize_above_max_pooling(), quantize_above_zero_pad(),
                      drop_nan_guard_before_quantize(), relu_below_max_pooling()})
        rules.push_back(std::move(rule));
    rewrite_to_fixed_point(m, rules);
}

}  // namespace kiln
