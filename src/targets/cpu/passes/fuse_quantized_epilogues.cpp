// Folds what follows each integer product (quant_convolution, quant_dot with
// constant weights) into one fused_quant_convolution / fused_quant_dot, so
// that one int8 kernel runs a quantized layer:
//   dequantize (per-channel scale) -> bias -> activations (relu, clip,
//   gelu) -> [quantize -> dequantize] -> residual add -> activations ->
//   quantize.
// Each rule extends the fused op by the next step when nothing else reads
// the value before it. The residual is taken as int8 codes when it is a
// dequantize of them. A 4-D int8 result is stored channels-last, the layout
// oneDNN's int8 kernels read, so consecutive layers pass it on unchanged.
#include <iterator>
#include <list>
#include <optional>
#include <set>
#include <string>
#include <cmath>

#include "kiln/op_registry.hpp"
#include "ops/elementwise.hpp"
#include "ops/fused_quantized_linalg.hpp"
#include "ops/quant.hpp"
#include "passes/constant_value.hpp"
#include "passes/rewriter.hpp"
#include "targets/cpu/passes/cpu_passes.hpp"

namespace kiln {

namespace {

using match::match_result;
using match::name;
using op::post_op_kind;
using op::requantize_epilogue;
using op::residual_kind;

const requantize_epilogue* epilogue_of(const operation& op) {
    if (const auto* c = op.get_if<op::fused_quant_convolution>()) return &c->epilogue;
    if (const auto* d = op.get_if<op::fused_quant_dot>()) return &d->epilogue;
    return nullptr;
}

template <class F>
operation with_epilogue(const operation& op, F&& change) {
    if (const auto* c = op.get_if<op::fused_quant_convolution>()) {
        auto copy = *c;
        change(copy.epilogue);
        return copy;
    }
    auto copy = *op.get_if<op::fused_quant_dot>();
    change(copy.epilogue);
    return copy;
}

operation with_layout(const operation& op, bool channels_last) {
    if (const auto* c = op.get_if<op::fused_quant_convolution>()) {
        auto copy = *c;
        copy.channels_last = channels_last;
        return copy;
    }
    return op;
}

std::size_t channel_axis(instruction_ref fused) {
    return fused->name() == "fused_quant_convolution" ? 1 : fused->get_shape().ndim() - 1;
}

bool is_fresh(const requantize_epilogue& e) {
    return !e.has_bias && e.activation.empty() && e.round_type == dtype::float_type && e.residual == residual_kind::none &&
           e.after_residual.empty() && e.output_type == dtype::float_type;
}

// A fused product with a float result that nothing else reads.
match::matcher float_fused() {
    return match::any_of_names({"fused_quant_convolution", "fused_quant_dot"}).used_once().where([](instruction_ref ins) {
        return epilogue_of(ins->get_operator())->output_type == dtype::float_type;
    });
}

// The one-value constant's value, as double.
std::optional<double> scalar_of(const std::vector<instruction_ref>& inputs, std::size_t i) {
    if (i >= inputs.size()) return 0.0;  // an absent zero point
    if (inputs[i]->get_shape().elements() != 1 || !match::is_constant_instruction(*inputs[i])) return std::nullopt;
    return scalar_constant(*inputs[i]);
}

std::size_t position(const module& m, instruction_ref ins) {
    return static_cast<std::size_t>(std::distance(m.begin(), std::list<instruction>::const_iterator(ins)));
}

// dequantize(product, scale along the channel axis) -> fused product, float result.
rewrite_rule product_to_fused() {
    auto product = match::any_of_names({"quant_convolution", "quant_dot"}).used_once().bind("p");
    auto pattern = name("dequantize_linear").args(product, match::is_constant().bind("s"));
    return {"product_to_fused", pattern, [](module& m, const match_result& r) {
                auto p = r.at("p");
                auto s = r.at("s");
                const shape& out = r.root->get_shape();
                const bool conv = p->name() == "quant_convolution";
                // b computed at run time (two activations' product): its zero point becomes an attribute.
                const bool runtime_b = !match::is_constant_instruction(*p->inputs()[1]);
                const auto b_zero_point = scalar_of(p->inputs(), 3);
                if (out.type() != dtype::float_type || (runtime_b && conv) || !b_zero_point) return false;
                const std::size_t axis = conv ? 1 : out.ndim() - 1;
                const std::size_t channels = out.lens()[axis];
                const auto* d = r.root->get_operator().get_if<op::dequantize_linear>();
                const auto rank = static_cast<std::int64_t>(out.ndim());
                if (s->get_shape().type() != dtype::float_type) return false;
                if (s->get_shape().elements() != 1 && (d->axis < 0 ? d->axis + rank : d->axis) != static_cast<std::int64_t>(axis))
                    return false;
                auto values = constant_value(*s);
                if (!values) return false;
                std::vector<float> scale(channels);
                const auto* v = values->data_as<const float>();
                const std::size_t stride = s->get_shape().elements() == 1 ? 0 : values->get_shape().strides().back();
                for (std::size_t c = 0; c < channels; ++c) scale[c] = v[c * stride];
                std::vector<instruction_ref> inputs{p->inputs()[0], p->inputs()[1]};
                const dtype xt = inputs[0]->get_shape().type();
                inputs.push_back(p->inputs().size() > 2 ? p->inputs()[2]
                                                        : m.insert_literal(r.root, literal(shape{xt, {}}, std::vector<std::int8_t>{0})));
                inputs.push_back(m.insert_literal(r.root, literal(shape{dtype::float_type, {channels}}, scale)));
                operation fused;
                if (conv) {
                    op::fused_quant_convolution f;
                    f.conv = *p->get_operator().get_if<op::quant_convolution>();
                    fused = f;
                } else {
                    op::fused_quant_dot f;
                    f.b_zero_point = static_cast<std::int64_t>(*b_zero_point);
                    fused = f;
                }
                return replace_with_new(m, r.root, fused, inputs);
            }};
}

// Whether constant `c` (numpy-aligned to `out`) varies along `axis` only.
bool is_per_channel(const shape& c, const shape& out, std::size_t axis) {
    if (c.ndim() > out.ndim()) return false;
    const std::size_t offset = out.ndim() - c.ndim();
    for (std::size_t i = 0; i < c.ndim(); ++i) {
        const std::size_t d = offset + i;
        const std::size_t want = d == axis ? out.lens()[axis] : 1;
        if (c.lens()[i] != want && !(d == axis && c.lens()[i] == 1 && out.lens()[axis] == 1)) return false;
    }
    return offset <= axis;
}

rewrite_rule fuse_bias() {
    auto pattern = name("add").args_any_order(float_fused().bind("f"), match::is_constant().bind("c"));
    return {"fuse_quantized_bias", pattern, [](module& m, const match_result& r) {
                auto f = r.at("f");
                const auto& out = f->get_shape();
                if (!is_fresh(*epilogue_of(f->get_operator())) || r.root->get_shape().lens() != out.lens()) return false;
                const std::size_t axis = channel_axis(f);
                if (r.at("c")->get_shape().type() != dtype::float_type || !is_per_channel(r.at("c")->get_shape(), out, axis))
                    return false;
                const auto channels = static_cast<std::int64_t>(out.lens()[axis]);
                auto bias = m.insert_instruction(r.root, make_op("reshape", value_map{{"dims", value_list{value(channels)}}}),
                                                 {r.at("c")});
                auto inputs = f->inputs();
                inputs.insert(inputs.begin() + 4, bias);
                return replace_with_new(m, r.root, with_epilogue(f->get_operator(), [](auto& e) { e.has_bias = true; }),
                                        inputs);
            }};
}

// An activation goes before the rounding and the residual add when there
// is neither yet, after them otherwise.
bool append_activation(module& m, const match_result& r, post_op_kind kind, double a = 0, double b = 0) {
    auto f = r.at("f");
    auto fused = with_epilogue(f->get_operator(), [&](auto& ep) {
        const bool before = ep.round_type == dtype::float_type && ep.residual == residual_kind::none;
        (before ? ep.activation : ep.after_residual).append(kind, a, b);
    });
    return replace_with_new(m, r.root, fused, f->inputs());
}

rewrite_rule fuse_relu() {
    return {"fuse_quantized_relu", name("relu").args(float_fused().bind("f")),
            [](module& m, const match_result& r) { return append_activation(m, r, post_op_kind::relu); }};
}

rewrite_rule fuse_clip() {
    auto pattern = name("clip").args(float_fused().bind("f"), match::is_constant().bind("lo"), match::is_constant().bind("hi"));
    return {"fuse_quantized_clip", pattern, [](module& m, const match_result& r) {
                auto lo = scalar_constant(*r.at("lo"));
                auto hi = scalar_constant(*r.at("hi"));
                if (!lo || !hi) return false;
                return append_activation(m, r, post_op_kind::clip, *lo, *hi);
            }};
}

// gelu (BERT's feed-forward): oneDNN's eltwise gelu_erf / gelu_tanh. After
// a rounding (ONNX Runtime's QDQ form: the product's quantize -> dequantize,
// then gelu) it reads the rounded real values, with no residual between.
rewrite_rule fuse_gelu() {
    return {"fuse_quantized_gelu", name("gelu").args(float_fused().bind("f")), [](module& m, const match_result& r) {
                const auto* g = r.root->get_operator().get_if<op::gelu>();
                const auto& e = *epilogue_of(r.at("f")->get_operator());
                const bool rounded = e.round_type != dtype::float_type;
                if (g == nullptr || (rounded && (e.residual != residual_kind::none || !e.after_residual.empty())))
                    return false;
                return append_activation(m, r, g->approximate == op::gelu_approximation::tanh ? post_op_kind::gelu_tanh
                                                                                              : post_op_kind::gelu_erf);
            }};
}

rewrite_rule fuse_quantize() {
    auto pattern = name("quantize_linear").where([](instruction_ref ins) { return ins->inputs().size() >= 2; });
    return {"fuse_output_quantize", pattern, [](module& m, const match_result& r) {
                auto f = r.root->inputs()[0];
                match_result unused;
                if (!float_fused().match(f, unused)) return false;
                // oneDNN 2.x adds a real residual after the output scale, in
                // the 8-bit result's units, where real values do not fit: the
                // product keeps a float result and the quantize stays apart.
                if (epilogue_of(f->get_operator())->residual == residual_kind::real) return false;
                const auto scale = scalar_of(r.root->inputs(), 1);
                const auto zero_point = scalar_of(r.root->inputs(), 2);
                const dtype t = r.root->get_shape().type();
                if (!scale || !(*scale > 0) || !zero_point || !op::is_8bit_integer(t)) return false;
                auto fused = with_epilogue(f->get_operator(), [&](auto& e) {
                    e.output_type = t;
                    e.output_scale = *scale;
                    e.output_zero_point = static_cast<std::int64_t>(*zero_point);
                });
                if (f->get_shape().ndim() == 4 && replace_with_new(m, r.root, with_layout(fused, true), f->inputs()))
                    return true;
                return replace_with_new(m, r.root, fused, f->inputs());
            }};
}

// A fused product with a quantized result that only `dequantize` reads,
// with the same parameters (so dequantize(quantize(v)) rounds v). The
// dequantize may have several readers when none is an add (DenseNet's new
// features, read by the concat of every later layer): an add might take
// the codes as a quantized residual instead.
std::optional<instruction_ref> rounding_product(instruction_ref dequantize) {
    if (dequantize->name() != "dequantize_linear" || dequantize->outputs().empty()) return std::nullopt;
    if (dequantize->outputs().size() > 1)
        for (const auto& reader : dequantize->outputs())
            if (reader->name() == "add") return std::nullopt;
    auto f = dequantize->inputs()[0];
    const auto* e = epilogue_of(f->get_operator());
    if (e == nullptr || f->outputs().size() != 1 || e->output_type == dtype::float_type) return std::nullopt;
    if (e->residual != residual_kind::none || e->round_type != dtype::float_type || !e->after_residual.empty())
        return std::nullopt;
    const auto scale = scalar_of(dequantize->inputs(), 1);
    const auto zero_point = scalar_of(dequantize->inputs(), 2);
    if (!scale || !zero_point || *scale != e->output_scale || *zero_point != static_cast<double>(e->output_zero_point))
        return std::nullopt;
    return f;
}

bool is_product(instruction_ref ins) {
    return epilogue_of(ins->get_operator()) != nullptr || ins->name() == "quant_convolution" ||
           ins->name() == "quant_dot";
}

// A step an epilogue may take in (the rules run in any order, so a later
// layer's quantize may still read its product through them): a dequantize,
// an activation, a view, or an add / mul / div by a constant.
std::optional<instruction_ref> epilogue_step_input(instruction_ref ins) {
    static const std::set<std::string> one_input{"dequantize_linear", "relu",    "clip",      "gelu",
                                                 "reshape",           "squeeze", "unsqueeze", "transpose"};
    const auto& in = ins->inputs();
    if (in.empty()) return std::nullopt;
    if (one_input.count(ins->name()) > 0) return in[0];
    if ((ins->name() == "add" || ins->name() == "mul" || ins->name() == "div") && in.size() == 2) {
        if (match::is_constant_instruction(*in[1])) return in[0];
        if (match::is_constant_instruction(*in[0])) return in[1];
    }
    return std::nullopt;
}

// Codes an int8 product writes, now or once its epilogue takes the quantize:
// the fused product itself, or a quantize of the product through epilogue steps.
bool is_product_or_quantized_product(instruction_ref codes) {
    if (is_product(codes)) return true;
    if (codes->name() != "quantize_linear") return false;
    auto x = codes->inputs()[0];
    for (int steps = 0; steps < 8 && !is_product(x); ++steps) {
        const auto next = epilogue_step_input(x);
        if (!next) return false;
        x = *next;
    }
    return is_product(x);
}

// dequantize(quantized product) -> the product rounded to those codes, as
// float: a residual add can then join it. When the add's other operand is
// a dequantize of a value computed later (another layer's output), or a
// float product with room for a residual, that layer takes the add
// instead, and this one keeps its int8 result, read as a quantized residual.
rewrite_rule fuse_rounding() {
    auto pattern = name("dequantize_linear").where([](instruction_ref ins) { return rounding_product(ins).has_value(); });
    return {"fuse_rounding", pattern, [](module& m, const match_result& r) {
                auto f = *rounding_product(r.root);
                auto user = r.root->outputs().front();
                if (user->name() == "add" && user->inputs().size() == 2) {
                    auto other = user->inputs()[0] == r.root ? user->inputs()[1] : user->inputs()[0];
                    // Only a product can take the add: codes a plain quantize writes later (a
                    // residual branch quantized after this layer) leave it to this one.
                    if (other->name() == "dequantize_linear" && position(m, other->inputs()[0]) > position(m, f) &&
                        is_product_or_quantized_product(other->inputs()[0]))
                        return false;
                    // A float product that can still take a residual takes this
                    // one's int8 codes.
                    const auto* oe = epilogue_of(other->get_operator());
                    if (oe != nullptr && other->outputs().size() == 1 && oe->output_type == dtype::float_type &&
                        oe->residual == residual_kind::none && oe->after_residual.empty())
                        return false;
                }
                const auto& e = *epilogue_of(f->get_operator());
                auto fused = with_epilogue(f->get_operator(), [&](auto& ep) {
                    ep.round_type = e.output_type;
                    ep.round_scale = e.output_scale;
                    ep.round_zero_point = e.output_zero_point;
                    ep.output_type = dtype::float_type;
                    ep.output_scale = 1;
                    ep.output_zero_point = 0;
                });
                return replace_with_new(m, r.root, with_layout(fused, false), f->inputs());
            }};
}

rewrite_rule fuse_residual() {
    auto pattern = name("add").args_any_order(float_fused().bind("f"), match::any().bind("o"));
    return {"fuse_residual", pattern, [](module& m, const match_result& r) {
                auto f = r.at("f");
                auto o = r.at("o");
                const auto& e = *epilogue_of(f->get_operator());
                if (o == f || e.residual != residual_kind::none || !e.after_residual.empty()) return false;
                if (o->get_shape().lens() != f->get_shape().lens() || r.root->get_shape().lens() != f->get_shape().lens())
                    return false;
                auto inputs = f->inputs();
                residual_kind kind = residual_kind::real;
                double scale = 1, zero_point = 0;
                if (o->name() == "dequantize_linear" && op::is_8bit_integer(o->inputs()[0]->get_shape().type())) {
                    const auto s = scalar_of(o->inputs(), 1);
                    const auto z = scalar_of(o->inputs(), 2);
                    if (s && *s > 0 && z) {
                        kind = residual_kind::quantized;
                        scale = *s;
                        zero_point = *z;
                    }
                }
                if (kind == residual_kind::real && o->get_shape().type() != dtype::float_type) return false;
                inputs.push_back(kind == residual_kind::quantized ? o->inputs()[0] : o);
                auto fused = with_epilogue(f->get_operator(), [&](auto& ep) {
                    ep.residual = kind;
                    ep.residual_scale = scale;
                    ep.residual_zero_point = static_cast<std::int64_t>(zero_point);
                });
                return replace_with_new(m, r.root, fused, inputs);
            }};
}

value reshape_dims(const shape& s) {
    value_list dims;
    for (const auto len : s.lens()) dims.emplace_back(static_cast<std::int64_t>(len));
    return value(dims);
}

bool is_view_of_one(instruction_ref ins);

// The views (reshape, transpose, ...) each read once between `ins` and an
// 8-bit product above them, nearest first; nothing when there are none or
// the chain ends elsewhere.
std::optional<std::vector<instruction_ref>> views_below_quantized_product(instruction_ref ins) {
    std::vector<instruction_ref> views;
    while (is_view_of_one(ins) && ins->outputs().size() == 1) {
        views.push_back(ins);
        ins = ins->inputs()[0];
    }
    const auto* e = epilogue_of(ins->get_operator());
    if (views.empty() || e == nullptr || e->output_type == dtype::float_type) return std::nullopt;
    return views;
}

// dequantize(views(int8 product)) -> views(dequantize(product)), per
// tensor: ONNX Runtime's QDQ models reshape a Gemm's int8 result back to
// [batch, tokens, features] (and ViT's to heads, transposed) between the
// product and its dequantize, which kept the dequantize (and what follows)
// out of the epilogue.
rewrite_rule dequantize_before_views() {
    auto pattern = name("dequantize_linear").where([](instruction_ref ins) {
        return views_below_quantized_product(ins->inputs()[0]).has_value();
    });
    return {"dequantize_before_views", pattern, [](module& m, const match_result& r) {
                const auto views = *views_below_quantized_product(r.root->inputs()[0]);
                auto product = views.back()->inputs()[0];
                if (!scalar_of(r.root->inputs(), 1) || !scalar_of(r.root->inputs(), 2)) return false;
                if (!product->get_shape().standard()) return false;
                std::vector<instruction_ref> inputs = r.root->inputs();
                inputs[0] = product;
                auto values = m.insert_instruction(r.root, r.root->get_operator(), inputs);
                for (auto v = views.rbegin(); v != views.rend(); ++v) {
                    // A reshape of the standard float values is a view again (its dims as they were).
                    values = m.insert_instruction(r.root, (*v)->get_operator(), {values});
                }
                if (values->get_shape().lens() != r.root->get_shape().lens()) return false;
                return replace_value(m, r.root, values);
            }};
}

// add(reshape(float product), o) -> reshape(add(product, reshape(o))): the
// residual add joins the epilogue in the product's shape (the reshapes of
// standard tensors are views).
rewrite_rule residual_through_reshape() {
    auto reshaped = name("reshape").used_once().args(float_fused().bind("f"));
    auto pattern = name("add").args_any_order(reshaped.bind("r"), match::any().bind("o"));
    return {"residual_through_reshape", pattern, [](module& m, const match_result& r) {
                auto f = r.at("f");
                auto o = r.at("o");
                const auto& e = *epilogue_of(f->get_operator());
                if (e.residual != residual_kind::none || !e.after_residual.empty()) return false;
                if (o == r.at("r") || o->get_shape().lens() != r.root->get_shape().lens() || !o->get_shape().standard() ||
                    !f->get_shape().standard() || !r.root->get_shape().standard())
                    return false;
                auto o_like_f = m.insert_instruction(r.root, make_op("reshape", value_map{{"dims", reshape_dims(f->get_shape())}}), {o});
                auto sum = m.insert_instruction(r.root, r.root->get_operator(), {f, o_like_f});
                return replace_with_new(m, r.root, make_op("reshape", value_map{{"dims", reshape_dims(r.root->get_shape())}}),
                                        {sum});
            }};
}

bool is_view_of_one(instruction_ref ins) {
    static const std::set<std::string> views{"reshape", "squeeze", "unsqueeze", "transpose"};
    return views.count(ins->name()) > 0 && ins->inputs().size() == 1;
}

// A float32 constant `values` times c, as a new literal of its shape.
instruction_ref scaled_constant(module& m, instruction_ref pos, instruction_ref values, double c) {
    auto v = constant_value(*values, no_element_limit);
    std::vector<float> scaled = v->to_vector<float>();
    for (auto& x : scaled) x = static_cast<float>(x * c);
    return m.insert_literal(pos, literal(shape{dtype::float_type, values->get_shape().lens()}, scaled));
}

// quantize(views of [c * ] views of a float product), per tensor: the
// product's epilogue takes the quantize (and the positive constant factor,
// into its scales and bias), and the views read its int8 result. BERT's
// query / key / value heads: the product, reshape and transpose to heads,
// the 1 / sqrt(sqrt(d)) factor, then the quantize before the attention
// products, which took two float passes.
rewrite_rule quantize_through_views() {
    auto pattern = name("quantize_linear").where([](instruction_ref ins) { return ins->inputs().size() >= 2; });
    return {"quantize_through_views", pattern, [](module& m, const match_result& r) {
                std::vector<instruction_ref> views;  // outermost first
                double factor = 1;
                bool scaled = false;
                instruction_ref x = r.root->inputs()[0];
                while (x->outputs().size() == 1) {
                    if (is_view_of_one(x)) {
                        views.push_back(x);
                        x = x->inputs()[0];
                    } else if (x->name() == "mul" && !scaled && x->inputs().size() == 2) {
                        const std::size_t k = match::is_constant_instruction(*x->inputs()[1]) ? 1 : 0;
                        const auto c = scalar_constant(*x->inputs()[k]);
                        if (!c || !(*c > 0) || !std::isfinite(*c) || x->get_shape().lens() != x->inputs()[1 - k]->get_shape().lens())
                            return false;
                        factor = *c;
                        scaled = true;
                        x = x->inputs()[1 - k];
                    } else {
                        break;
                    }
                }
                if (views.empty() && !scaled) return false;  // fuse_quantize's case
                match_result unused;
                if (!float_fused().match(x, unused)) return false;
                // A factor goes into the scales (and bias) when nothing follows them,
                // else into the output scale: quantize(c * v, s) is quantize(v, s / c).
                const auto& e = *epilogue_of(x->get_operator());
                const bool plain = e.activation.empty() && e.round_type == dtype::float_type &&
                                   e.residual == residual_kind::none && e.after_residual.empty();
                const auto scale = scalar_of(r.root->inputs(), 1);
                const auto zero_point = scalar_of(r.root->inputs(), 2);
                const dtype t = r.root->get_shape().type();
                if (!scale || !(*scale > 0) || !zero_point || !op::is_8bit_integer(t)) return false;
                auto inputs = x->inputs();
                if (scaled && plain) {
                    inputs[3] = scaled_constant(m, r.root, inputs[3], factor);
                    if (e.has_bias) inputs[4] = scaled_constant(m, r.root, inputs[4], factor);
                }
                auto fused = with_epilogue(x->get_operator(), [&](auto& ep) {
                    ep.output_type = t;
                    ep.output_scale = scaled && !plain ? *scale / factor : *scale;
                    ep.output_zero_point = static_cast<std::int64_t>(*zero_point);
                });
                instruction_ref codes = m.insert_instruction(r.root, fused, inputs);
                for (auto v = views.rbegin(); v != views.rend(); ++v)
                    codes = m.insert_instruction(r.root, (*v)->get_operator(), {codes});
                if (codes->get_shape().lens() != r.root->get_shape().lens()) return false;
                return replace_value(m, r.root, codes) || replace_value_restrided(m, r.root, codes);
            }};
}

// gelu(reshape(float product)) -> reshape(gelu(product)): ONNX Runtime's
// QDQ form reshapes a Gemm's result back to [batch, tokens, features]
// before the gelu, which kept the gelu out of the epilogue.
rewrite_rule gelu_before_reshape() {
    auto reshaped = name("reshape").used_once().args(float_fused().bind("f"));
    return {"gelu_before_reshape", name("gelu").args(reshaped.bind("r")), [](module& m, const match_result& r) {
                auto f = r.at("f");
                if (!f->get_shape().standard()) return false;
                auto activated = m.insert_instruction(r.root, r.root->get_operator(), {f});
                return replace_with_new(m, r.root, r.at("r")->get_operator(), {activated});
            }};
}

// A fresh float product times (or over) a one-value constant: the factor
// goes into its scales. Attention's scores, q @ kt scaled by 1 / sqrt(d)
// before the mask and the softmax.
rewrite_rule fuse_scalar_factor() {
    auto pattern = match::any_of_names({"mul", "div"}).where([](instruction_ref ins) { return ins->inputs().size() == 2; });
    return {"fuse_quantized_scalar_factor", pattern, [](module& m, const match_result& r) {
                const auto& in = r.root->inputs();
                const bool div = r.root->name() == "div";
                const std::size_t k = !div && match::is_constant_instruction(*in[0]) ? 0 : 1;
                auto f = in[1 - k];
                match_result unused;
                if (!float_fused().match(f, unused) || !is_fresh(*epilogue_of(f->get_operator()))) return false;
                const auto c = scalar_constant(*in[k]);
                if (!c || !std::isfinite(*c) || *c == 0 || r.root->get_shape().lens() != f->get_shape().lens() ||
                    r.root->get_shape().type() != dtype::float_type)
                    return false;
                auto inputs = f->inputs();
                inputs[3] = scaled_constant(m, r.root, inputs[3], div ? 1 / *c : *c);
                return replace_with_new(m, r.root, f->get_operator(), inputs);
            }};
}

}  // namespace

void fuse_quantized_epilogues::apply(module& m) const {
    rewrite_to_fixed_point(m, {product_to_fused(), fuse_bias(), fuse_relu(), fuse_clip(), fuse_gelu(), fuse_quantize(),
                               fuse_rounding(), fuse_residual(), dequantize_before_views(),
                               residual_through_reshape(), quantize_through_views(), fuse_scalar_factor(),
                               gelu_before_reshape()});
}

}  // namespace kiln
