// Algebraic simplification, as rewrite rules.
//
// Identities: x*1, 1*x and x/1 are exact in IEEE arithmetic (NaN and inf
// included) and become x. x+0, 0+x and x-0 become x: exact for integers
// and for every float except one case, x = -0.0 with a +0.0 constant, where
// IEEE gives +0.0 instead of -0.0. That sign is allowed to change because
// only the sign of a zero differs and ONNX models do not depend on it (ONNX
// Runtime and TensorRT simplify the same way). x*0 is not IEEE-safe
// (NaN*0 and inf*0 are NaN, -1*0 is -0), so it becomes 0 for integers only.
// neg(neg(x)) is x exactly.
//
// Reassociation: (x+c1)+c2 -> x+(c1+c2), likewise with sub, and
// (x*c1)*c2 -> x*(c1*c2), so that constant propagation folds the constants
// and one op remains. For floats this is not bitwise exact (rounding
// happens at a different place); the difference is an ulp of the
// intermediate, accepted as every inference compiler does. It is done only
// when the combined constant is no larger than the larger of the two.
//
// Scales into matmul weights: dot(x, W)*c with W constant and c constant
// along the output columns, and dot(x*c, W) with a scalar c, become a dot
// with W*c. Only when every element of c is a power of two: then scaling a
// weight is exact, each product and partial sum is scaled exactly, and the
// result is bitwise the same (barring overflow or underflow of a weight).
// W must have no other user, so no weight is stored twice.
//
// Front-end spellings of one op: min(max(x, lo), hi) with scalar constant
// bounds (PyTorch's clamp and hardtanh, ReLU6) becomes clip(x, lo, hi),
// which post-op fusion folds into a convolution or product; clip is the
// same function, NaN and lo > hi included. A zero constant pad of the
// spatial dims feeding a convolution becomes the convolution's own padding
// (TensorFlow's asymmetric "same" padding, as Hugging Face's MobileNetV2
// writes it): the padded copy is never made. So does a zero pad of ReLU
// outputs before a max pooling (Keras ResNet's pool1_pad).
//
// Constant conditions: where(c, x, y) with a constant c that is true (or
// false) everywhere is x (or y) broadcast to the result's shape. PyTorch's
// export of an unmasked attention writes where(expand(true), 0, -max) as an
// additive mask; without the where, add_zero drops the mask add, and the
// attention reads no mask (ViT's quantize_int8 program; ONNX Runtime's
// quantizer folds the same where when it writes the QDQ file). A broadcast
// of a constant counts as that constant for these identities. Likewise
// and(x, true) and or(x, false) are x, broadcast to the result's shape:
// transformers' encoder mask ANDs the padding mask [1, 1, 1, seq] with a
// constant [1, 1, seq, 1] of true (its causal part, absent for an encoder);
// without it the mask stays [1, 1, 1, seq], not [1, 1, seq, seq].
#include <cmath>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "kiln/op_registry.hpp"
#include "kiln/passes.hpp"
#include "ops/pool.hpp"
#include "passes/constant_value.hpp"
#include "passes/pointwise_before_broadcasts.hpp"
#include "passes/rewriter.hpp"
#include "passes/spatial_padding.hpp"

namespace kiln {

namespace {

using match::any;
using match::any_of;
using match::any_of_names;
using match::match_result;
using match::matcher;
using match::name;

template <class Pred>
bool all_values(const argument& a, Pred pred) {
    const std::size_t n = a.get_shape().elements();
    for (std::size_t i = 0; i < n; ++i)
        if (!pred(a.value_at(i))) return false;
    return true;
}

matcher constant_where(std::function<bool(const argument&)> pred) {
    return match::is_constant().where([pred = std::move(pred)](instruction_ref ins) {
        auto v = constant_value(*ins);
        return v && pred(*v);
    });
}

// A constant whose every value is `expected`, also seen through broadcasts
// (which only repeat values; a broadcast scalar is too large to evaluate).
matcher constant_equal_to(double expected) {
    return match::is_constant().where([expected](instruction_ref ins) {
        while (ins->name() == "broadcast") ins = ins->inputs()[0];
        auto v = constant_value(*ins);
        return v && all_values(*v, [&](double x) { return x == expected; });
    });
}

bool is_power_of_two(double v) {
    if (!std::isfinite(v) || v == 0) return false;
    int exponent = 0;
    return std::abs(std::frexp(v, &exponent)) == 0.5;
}

matcher power_of_two_scale() {
    return constant_where(
        [](const argument& a) { return is_floating(a.get_shape().type()) && all_values(a, is_power_of_two); });
}

matcher not_constant() {
    return match::none_of({match::is_constant()});
}

rewrite_rule identity_rule(std::string rule_name, matcher pattern) {
    return {std::move(rule_name), std::move(pattern),
            [](module& m, const match_result& r) { return replace_value(m, r.root, r.at("x")); }};
}

std::vector<rewrite_rule> identity_rules() {
    return {
        identity_rule("add_zero", name("add").args_any_order(any().bind("x"), constant_equal_to(0))),
        identity_rule("sub_zero", name("sub").args(any().bind("x"), constant_equal_to(0))),
        identity_rule("mul_one", name("mul").args_any_order(any().bind("x"), constant_equal_to(1))),
        identity_rule("div_one", name("div").args(any().bind("x"), constant_equal_to(1))),
        identity_rule("double_neg", name("neg").args(name("neg").args(any().bind("x")))),
    };
}

rewrite_rule integer_mul_zero() {
    auto pattern = name("mul")
                       .shape_is([](const shape& s) { return is_integral(s.type()) && s.elements() <= 4096; })
                       .args_any_order(any(), constant_equal_to(0));
    return {"integer_mul_zero", pattern, [](module& m, const match_result& r) {
                auto zeros = m.insert_literal(r.root, literal(argument(r.root->get_shape().as_standard())));
                return replace_value(m, r.root, zeros);
            }};
}

// where(c, x, y) with c a constant of one truth value: the chosen branch,
// broadcast to the result's shape when it is smaller.
rewrite_rule where_uniform_condition() {
    auto pattern = name("where").args(match::is_constant().bind("c"), any().bind("x"), any().bind("y"));
    return {"where_uniform_condition", pattern, [](module& m, const match_result& r) {
                // Evaluating a computed condition is bounded; a literal is read as it is.
                const std::size_t elements = r.at("c")->get_shape().elements();
                if (!r.at("c")->is_literal() && elements > (std::size_t{1} << 22)) return false;
                auto c = constant_value(*r.at("c"), elements);
                if (!c || c->get_shape().elements() == 0) return false;
                const bool first = c->value_at(0) != 0;
                if (!all_values(*c, [&](double v) { return (v != 0) == first; })) return false;
                instruction_ref chosen = first ? r.at("x") : r.at("y");
                const shape& out = r.root->get_shape();
                if (chosen->get_shape().type() != out.type()) return false;
                if (chosen->get_shape().lens() != out.lens())
                    chosen = m.insert_instruction(r.root, make_op("broadcast", value_map{{"out_lens", lens_value(out.lens())}}),
                                                  {chosen});
                return replace_value(m, r.root, chosen);
            }};
}

// and(x, true) or or(x, false), the constant on either side: x, broadcast to
// the result's shape when it is smaller.
rewrite_rule boolean_identity(const std::string& op_name, double neutral) {
    auto pattern = name(op_name).args_any_order(any().bind("x"), constant_equal_to(neutral).bind("c"));
    return {op_name + "_identity", pattern, [](module& m, const match_result& r) {
                instruction_ref x = r.at("x");
                const shape& out = r.root->get_shape();
                if (x == r.at("c") || x->get_shape().type() != out.type()) return false;
                if (x->get_shape().lens() != out.lens())
                    x = m.insert_instruction(
                        r.root, make_op("broadcast", value_map{{"out_lens", lens_value(out.lens())}}), {x});
                return replace_value(m, r.root, x);
            }};
}

// Undoes the insertions of a rewrite that turned out not to apply.
void erase_unused(module& m, std::vector<instruction_ref> inserted) {
    for (auto it = inserted.rbegin(); it != inserted.rend(); ++it)
        if ((*it)->outputs().empty()) m.remove_instruction(*it);
}

matcher add_or_sub_of_constant(const std::string& x, const std::string& c) {
    return any_of({name("add").args_any_order(not_constant().bind(x), match::is_constant().bind(c)),
                   name("sub").args(not_constant().bind(x), match::is_constant().bind(c))});
}

// Inserts `op(c1, c2)` before `root` and rewrites root as `outer(x, that)`,
// when the combined constant is no larger than the larger of c1 and c2.
bool combine_constants(module& m, const match_result& r, const operation& op, const operation& outer) {
    auto c1 = r.at("c1");
    auto c2 = r.at("c2");
    shape combined;
    try {
        combined = op.compute_shape({c1->get_shape(), c2->get_shape()});
    } catch (const error&) {
        return false;
    }
    if (combined.elements() > std::max(c1->get_shape().elements(), c2->get_shape().elements())) return false;
    auto c = m.insert_instruction(r.root, op, {c1, c2});
    if (replace_with_new(m, r.root, outer, {r.at("x"), c})) return true;
    erase_unused(m, {c});
    return false;
}

// (x ± c1) ± c2: the combined constant keeps c1's sign outside, giving
// x + (c1 + c2), x + (c1 - c2), x - (c1 - c2) or x - (c1 + c2).
rewrite_rule reassociate_add_chain() {
    auto inner = add_or_sub_of_constant("x", "c1").used_once().bind("inner");
    auto pattern = any_of({name("add").args_any_order(inner, match::is_constant().bind("c2")),
                           name("sub").args(inner, match::is_constant().bind("c2"))});
    return {"reassociate_add_chain", pattern, [](module& m, const match_result& r) {
                bool inner_sub = r.at("inner")->name() == "sub";
                bool outer_sub = r.root->name() == "sub";
                return combine_constants(m, r, make_op(inner_sub == outer_sub ? "add" : "sub"),
                                         make_op(inner_sub ? "sub" : "add"));
            }};
}

rewrite_rule reassociate_mul_chain() {
    auto inner =
        name("mul").used_once().args_any_order(not_constant().bind("x"), match::is_constant().bind("c1")).bind("inner");
    auto pattern = name("mul").args_any_order(inner, match::is_constant().bind("c2"));
    return {"reassociate_mul_chain", pattern,
            [](module& m, const match_result& r) { return combine_constants(m, r, make_op("mul"), make_op("mul")); }};
}

// A constant weight that nothing else reads, so scaling it stores no copy.
matcher private_weight() {
    return match::is_constant().used_once().shape_is([](const shape& s) { return s.ndim() >= 2; });
}

instruction_ref as_vector(module& m, instruction_ref pos, instruction_ref c) {
    if (c->get_shape().ndim() == 1) return c;
    auto n = static_cast<std::int64_t>(c->get_shape().elements());
    return m.insert_instruction(pos, make_op("reshape", value_map{{"dims", value_list{value(n)}}}), {c});
}

// dot(x, W) * c or dot(x, W) / c with c varying along the output columns only.
rewrite_rule scale_after_dot() {
    auto dot = name("dot").used_once().args(any().bind("x"), private_weight().bind("w")).bind("dot");
    auto scale = power_of_two_scale().bind("c");
    auto pattern = any_of({name("mul").args_any_order(dot, scale), name("div").args(dot, scale)});
    return {"scale_after_dot", pattern, [](module& m, const match_result& r) {
                const shape& cs = r.at("c")->get_shape();
                const shape& out = r.root->get_shape();
                if (cs.ndim() > out.ndim() || r.at("x")->get_shape().ndim() < 2) return false;
                for (std::size_t i = 0; i + 1 < cs.ndim(); ++i)
                    if (cs.lens()[i] != 1) return false;
                if (cs.ndim() > 0 && cs.lens().back() != 1 && cs.lens().back() != out.lens().back()) return false;
                auto c = as_vector(m, r.root, r.at("c"));
                auto w = m.insert_instruction(r.root, make_op(r.root->name()), {r.at("w"), c});
                if (replace_with_new(m, r.root, make_op("dot"), {r.at("x"), w})) return true;
                erase_unused(m, {c, w});
                return false;
            }};
}

// dot(x * c, W) or dot(W, x * c) (also x / c) with a single-valued c.
rewrite_rule scale_before_dot() {
    auto scaled = any_of({name("mul").args_any_order(any().bind("x"), power_of_two_scale().bind("c")),
                          name("div").args(any().bind("x"), power_of_two_scale().bind("c"))})
                      .used_once()
                      .bind("scaled");
    auto pattern = name("dot").args_any_order(scaled, private_weight().bind("w"));
    return {"scale_before_dot", pattern, [](module& m, const match_result& r) {
                auto scaled = r.at("scaled");
                if (r.at("c")->get_shape().elements() != 1) return false;
                if (scaled->get_shape().lens() != r.at("x")->get_shape().lens()) return false;
                auto c = as_vector(m, r.root, r.at("c"));
                auto w = m.insert_instruction(r.root, make_op(scaled->name()), {r.at("w"), c});
                bool weight_first = r.root->inputs()[0] == r.at("w");
                std::vector<instruction_ref> inputs{r.at("x"), w};
                if (weight_first) std::swap(inputs[0], inputs[1]);
                if (replace_with_new(m, r.root, make_op("dot"), inputs)) return true;
                erase_unused(m, {c, w});
                return false;
            }};
}

// batch_norm_inference(convolution(x, W), scale, bias, mean, var) with
// constant parameters becomes convolution(x, W * s) + (bias - mean * s),
// s = scale / sqrt(var + eps): one op less, and the add becomes the
// convolution's bias in a fused kernel. Not bitwise exact (W * s rounds);
// every inference compiler folds this way.
rewrite_rule fold_batch_norm() {
    auto conv = name("convolution").used_once().args(any().bind("x"), private_weight().bind("w")).bind("conv");
    auto c = [](const char* n) { return match::is_constant().bind(n); };
    auto pattern = name("batch_norm_inference").args(conv, c("scale"), c("bias"), c("mean"), c("var"));
    return {"fold_batch_norm", pattern, [](module& m, const match_result& r) {
                const shape& out = r.root->get_shape();
                const auto channels = static_cast<std::int64_t>(out.lens()[1]);
                const double eps = r.root->get_operator().attributes().find("epsilon")->as_float();
                auto pos = r.root;
                auto add = [&](const char* op, instruction_ref a, instruction_ref b) {
                    return m.insert_instruction(pos, make_op(op), {a, b});
                };
                auto reshaped = [&](instruction_ref v, std::size_t rank, std::size_t channel_axis) {
                    value_list dims;
                    for (std::size_t i = 0; i < rank; ++i) dims.push_back(value(i == channel_axis ? channels : 1));
                    return m.insert_instruction(pos, make_op("reshape", value_map{{"dims", dims}}), {v});
                };
                auto epsilon = m.insert_literal(pos, literal(shape(out.type(), {1}), std::vector<double>{eps}));
                auto s = add("div", r.at("scale"), m.insert_instruction(pos, make_op("sqrt"), {add("add", r.at("var"), epsilon)}));
                auto w = add("mul", r.at("w"), reshaped(s, r.at("w")->get_shape().ndim(), 0));
                auto b = add("sub", r.at("bias"), add("mul", r.at("mean"), s));
                auto conv = m.insert_instruction(pos, r.at("conv")->get_operator(), {r.at("x"), w});
                return replace_with_new(m, r.root, make_op("add"), {conv, reshaped(b, out.ndim(), 1)});
            }};
}

// Whether constant `c`, broadcast against the [N, C, ...] result `out` of a
// convolution, varies along the channels only (or not at all).
bool scales_channels_only(const shape& c, const shape& out) {
    if (c.ndim() > out.ndim() || out.ndim() < 3) return false;
    const std::size_t offset = out.ndim() - c.ndim();
    for (std::size_t i = 0; i < c.ndim(); ++i) {
        const auto len = c.lens()[i];
        if (len != 1 && !(i + offset == 1 && len == out.lens()[1])) return false;
    }
    return true;
}

// convolution(x, W) * c, or (convolution(x, W) + b) * c, with constants b and
// c where c varies along the output channels only, becomes
// convolution(x, W * c) (+ b * c): a batch norm or scale already decomposed
// (TensorFlow graphs, folded exports). The multiply would otherwise follow the
// convolution as a per-channel post-op, which keeps the cpu target's
// convolution out of its blocked layout (~10x slower). Not bitwise exact
// (W * c rounds), as fold_batch_norm.
rewrite_rule fold_scale_into_convolution() {
    auto conv = name("convolution").used_once().args(any().bind("x"), private_weight().bind("w")).bind("conv");
    auto biased = name("add").used_once().args_any_order(conv, match::is_constant().bind("b")).bind("biased");
    auto pattern = name("mul").args_any_order(any_of({conv, biased}), match::is_constant().bind("c"));
    return {"fold_scale_into_convolution", pattern, [](module& m, const match_result& r) {
                const shape& out = r.at("conv")->get_shape();
                const shape& cs = r.at("c")->get_shape();
                if (!is_floating(out.type()) || cs.type() != out.type() || !scales_channels_only(cs, out))
                    return false;
                auto pos = r.root;
                // c as [C_out or 1, 1, ...] in the weight's rank: it scales output channels.
                value_list dims;
                for (std::size_t i = 0; i < r.at("w")->get_shape().ndim(); ++i)
                    dims.push_back(value(i == 0 ? static_cast<std::int64_t>(cs.elements()) : std::int64_t{1}));
                auto c = m.insert_instruction(pos, make_op("reshape", value_map{{"dims", dims}}), {r.at("c")});
                auto w = m.insert_instruction(pos, make_op("mul"), {r.at("w"), c});
                auto scaled = m.insert_instruction(pos, r.at("conv")->get_operator(), {r.at("x"), w});
                if (!r.has("biased")) {
                    if (replace_value(m, r.root, scaled)) return true;
                    erase_unused(m, {scaled, w, c});
                    return false;
                }
                auto b = m.insert_instruction(pos, make_op("mul"), {r.at("b"), r.at("c")});
                if (replace_with_new(m, r.root, make_op("add"), {scaled, b})) return true;
                erase_unused(m, {b, scaled, w, c});
                return false;
            }};
}

// batch_norm_inference(x, scale, bias, mean, var) with constant parameters
// that fold_batch_norm leaves (x is no convolution of its own: DenseNet's
// batch norm before each convolution) becomes x * s + (bias - mean * s),
// s = scale / sqrt(var + eps): per-channel elementwise ops, which fuse with
// their neighbours and run in the cpu target's blocked layout. Not bitwise
// exact (x * s + t rounds differently).
rewrite_rule decompose_batch_norm() {
    auto c = [](const char* n) { return match::is_constant().bind(n); };
    auto pattern = name("batch_norm_inference").args(any().bind("x"), c("scale"), c("bias"), c("mean"), c("var"));
    return {"decompose_batch_norm", pattern, [](module& m, const match_result& r) {
                const shape& out = r.root->get_shape();
                if (!is_floating(out.type())) return false;
                const auto channels = static_cast<std::int64_t>(out.lens()[1]);
                const double eps = r.root->get_operator().attributes().find("epsilon")->as_float();
                auto pos = r.root;
                auto add = [&](const char* op, instruction_ref a, instruction_ref b) {
                    return m.insert_instruction(pos, make_op(op), {a, b});
                };
                // [C] as [1, C, 1, ...]: it broadcasts along axis 1 of x.
                auto per_channel = [&](instruction_ref v) {
                    value_list dims;
                    for (std::size_t i = 0; i < out.ndim(); ++i) dims.push_back(value(i == 1 ? channels : 1));
                    return m.insert_instruction(pos, make_op("reshape", value_map{{"dims", dims}}), {v});
                };
                auto epsilon = m.insert_literal(pos, literal(shape(out.type(), {1}), std::vector<double>{eps}));
                auto s = add("div", r.at("scale"), m.insert_instruction(pos, make_op("sqrt"), {add("add", r.at("var"), epsilon)}));
                auto t = add("sub", r.at("bias"), add("mul", r.at("mean"), s));
                auto scaled = add("mul", r.at("x"), per_channel(s));
                return replace_with_new(m, r.root, make_op("add"), {scaled, per_channel(t)});
            }};
}

// min(max(x, lo), hi), either operand order, lo and hi scalar constants.
rewrite_rule clamp_to_clip() {
    auto lower = name("max").used_once().args_any_order(any().bind("x"), match::is_constant().bind("lo"));
    auto pattern = name("min").args_any_order(lower, match::is_constant().bind("hi"));
    return {"clamp_to_clip", pattern, [](module& m, const match_result& r) {
                const auto& out = r.root->get_shape();
                if (r.at("x")->get_shape() != out) return false;  // the bounds must not broadcast x
                for (const char* bound : {"lo", "hi"})
                    if (r.at(bound)->get_shape().elements() != 1 || r.at(bound)->get_shape().type() != out.type())
                        return false;
                return replace_with_new(m, r.root, make_op("clip"), {r.at("x"), r.at("lo"), r.at("hi")});
            }};
}

// convolution(pad(x), W), the pad constant 0 over spatial dims only.
rewrite_rule fold_pad_into_convolution() {
    auto padded = name("pad").args(any().bind("x")).bind("pad");
    auto pattern = name("convolution").args(padded, any().bind("w"));
    return {"fold_pad_into_convolution", pattern, [](module& m, const match_result& r) {
                auto pads = constant_spatial_pad(*r.at("pad"));
                if (!pads || pads->value != 0) return false;
                return replace_with_new(m, r.root, with_more_padding(r.root->get_operator(), *pads),
                                        {r.at("x"), r.at("w")});
            }};
}

// max pooling of pad(relu(x)) with zeros (Keras ResNet's pool1_pad before
// its max pool): the zeros never exceed a window's largest value, which is
// at least 0, as long as every window keeps a real element (pads shorter
// than the window, no dilation, no ceil_mode windows that start in the
// padding): max pooling with that padding, which ignores padded positions.
rewrite_rule fold_pad_of_nonnegative_values_into_max_pooling() {
    auto padded = name("pad").args(name("relu").bind("x")).bind("pad");
    auto pattern = name("pooling").args(padded);
    return {"fold_pad_of_nonnegative_values_into_max_pooling", pattern, [](module& m, const match_result& r) {
                const auto* pool = r.root->get_operator().get_if<op::pooling>();
                auto pads = constant_spatial_pad(*r.at("pad"));
                if (pool == nullptr || !pads || pads->value != 0 || pool->mode != op::pooling_mode::max || pool->global || pool->ceil_mode ||
                    pool->lengths.size() != pads->begins.size())
                    return false;
                for (auto d : pool->dilation)
                    if (d != 1) return false;
                for (std::size_t i = 0; i < pool->lengths.size(); ++i)
                    if (pads->begins[i] >= pool->lengths[i] || pads->ends[i] >= pool->lengths[i]) return false;
                return replace_with_new(m, r.root, with_more_padding(r.root->get_operator(), *pads), {r.at("x")});
            }};
}

}  // namespace

void simplify_algebra::apply(module& m) const {
    auto rules = identity_rules();
    rules.push_back(integer_mul_zero());
    rules.push_back(where_uniform_condition());
    rules.push_back(boolean_identity("and", 1));
    rules.push_back(boolean_identity("or", 0));
    rules.push_back(pointwise_before_broadcasts());
    rules.push_back(reassociate_add_chain());
    rules.push_back(reassociate_mul_chain());
    rules.push_back(scale_after_dot());
    rules.push_back(scale_before_dot());
    rules.push_back(fold_batch_norm());
    rules.push_back(decompose_batch_norm());  // after the fold, which it must not pre-empt
    rules.push_back(fold_scale_into_convolution());
    rules.push_back(clamp_to_clip());
    rules.push_back(fold_pad_into_convolution());
    rules.push_back(fold_pad_of_nonnegative_values_into_max_pooling());
    rewrite_to_fixed_point(m, rules);
}

}  // namespace kiln
