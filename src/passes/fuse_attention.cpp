// Attention fusion: the scaled dot-product attention exporters write,
//
//   dot(softmax(dot(q * c1, kt * c2) * c (+ mask)), v)
//
// becomes fused_attention(q, kt, v [, mask]) with scale = c1 * c2 * c (each
// scale optional; a division by a constant counts as its reciprocal; the
// mask may be either operand of the add). The guard exporters write after
// the softmax, where(not(equal(p, p)), 0, p), which zeroes NaN
// probabilities, becomes the op's nan_to_zero. The scores, the softmax and
// the guard must have no other readers: they are not computed any more.
//
// PyTorch's decomposition of scaled_dot_product_attention writes a boolean
// mask as where(mask, s, -inf) and guards rows masked out entirely with
// where(equal(reduce_max(s), -inf), 0, softmax(s)). The where becomes the
// additive mask where(mask, 0, -inf) (the same scores wherever s is finite),
// and the guard the op's masked_rows_to_zero.
//
// A fused_attention read only through one transpose that keeps the last
// dim last (exporters' [B, H, Sq, Dv] -> [B, Sq, H, Dv] before merging the
// heads) gets that transpose as its output_order: the kernel writes the
// rows where the transpose puts them, the transpose becomes a standard view
// and the reshape after it a view, instead of a copy.
//
// With fuse_16bit_floats, 16-bit attention whose softmax quantize_fp16 /
// quantize_bf16 left in float32, convert(softmax(convert(s, float32)), t)
// with s of 16-bit type t, fuses too: fused_attention computes its softmax
// in float32 anyway (ops/fused_attention.hpp).
#include <cmath>
#include <optional>
#include <unordered_set>

#include "kiln/op_registry.hpp"
#include "kiln/passes.hpp"
#include "ops/fused_attention.hpp"
#include "ops/norm.hpp"
#include "ops/op_helpers.hpp"
#include "ops/reduce.hpp"
#include "ops/shape_ops.hpp"
#include "passes/attention_repeated_heads.hpp"
#include "passes/constant_value.hpp"
#include "passes/rewriter.hpp"

namespace kiln {

namespace {

bool is(instruction_ref ins, const char* op) {
    return ins->name() == op;
}

bool used_only_by(instruction_ref ins, const std::unordered_set<const instruction*>& readers) {
    for (const auto& u : ins->outputs())
        if (!readers.count(&*u)) return false;
    return true;
}

// x * c, c * x or x / c with a scalar constant c: x, and the factor.
std::optional<std::pair<instruction_ref, double>> unscaled(instruction_ref ins) {
    if (ins->inputs().size() != 2) return std::nullopt;
    const auto& in = ins->inputs();
    if (is(ins, "mul")) {
        if (auto c = scalar_constant(*in[1])) return std::make_pair(in[0], *c);
        if (auto c = scalar_constant(*in[0])) return std::make_pair(in[1], *c);
    }
    if (is(ins, "div"))
        if (auto c = scalar_constant(*in[1]); c && *c != 0) return std::make_pair(in[0], 1 / *c);
    return std::nullopt;
}

struct scores_match {
    instruction_ref q, kt;
    double scale = 1;
};

// dot(q * c1, kt * c2) * c, every scale optional; intermediates read once.
std::optional<scores_match> match_scores(instruction_ref s) {
    scores_match r;
    if (auto u = unscaled(s); u && s->outputs().size() == 1) {
        s = u->first;
        r.scale *= u->second;
    }
    if (!is(s, "dot") || s->outputs().size() != 1) return std::nullopt;
    r.q = s->inputs()[0];
    r.kt = s->inputs()[1];
    if (auto u = unscaled(r.q)) {
        r.q = u->first;
        r.scale *= u->second;
    }
    if (auto u = unscaled(r.kt)) {
        r.kt = u->first;
        r.scale *= u->second;
    }
    if (r.q->get_shape().ndim() < 2 || r.kt->get_shape().ndim() < 2) return std::nullopt;
    return r;
}

bool is_last_axis_softmax(instruction_ref ins) {
    const auto* s = ins->get_operator().get_if<op::softmax>();
    if (s == nullptr) return false;
    const auto rank = static_cast<std::int64_t>(ins->get_shape().ndim());
    return s->axis == -1 || s->axis == rank - 1;
}

bool is_16bit_float(dtype t) { return t == dtype::half_type || t == dtype::bf16_type; }

bool is_minus_infinity(instruction_ref ins) {
    auto c = scalar_constant(*ins);
    return c && std::isinf(*c) && *c < 0;
}

// where(equal(reduce_max(s, last axis), -inf), 0, softmax(s)), the
// intermediates read once and s read by the softmax and the maximum only:
// the softmax.
std::optional<instruction_ref> softmax_under_masked_row_guard(instruction_ref p) {
    if (!is(p, "where")) return std::nullopt;
    const auto& w = p->inputs();
    const instruction_ref equal = w[0], softmax = w[2];
    if (!is(equal, "equal") || equal->outputs().size() != 1 || scalar_constant(*w[1]) != 0.0 ||
        !is_last_axis_softmax(softmax) || softmax->outputs().size() != 1)
        return std::nullopt;
    const instruction_ref s = softmax->inputs()[0];
    instruction_ref max = equal->inputs()[0];
    if (!is_minus_infinity(equal->inputs()[1])) return std::nullopt;
    const auto* reduce = max->get_operator().get_if<op::reduce_max>();
    const auto rank = static_cast<std::int64_t>(s->get_shape().ndim());
    if (reduce == nullptr || max->inputs()[0] != s || max->outputs().size() != 1 || !reduce->keepdims ||
        reduce->axes.size() != 1 || (reduce->axes[0] != -1 && reduce->axes[0] != rank - 1) ||
        !used_only_by(s, {&*softmax, &*max}))
        return std::nullopt;
    return softmax;
}

// where(mask, s, -inf) or where(mask, -inf, s) with s the scores: which of
// the where's inputs is s (1 or 2).
std::optional<std::size_t> where_masked_scores(instruction_ref masked) {
    if (!is(masked, "where")) return std::nullopt;
    const auto& w = masked->inputs();
    const std::size_t kept = is_minus_infinity(w[2]) ? 1 : is_minus_infinity(w[1]) ? 2 : 0;
    if (kept == 0 || !match_scores(w[kept])) return std::nullopt;
    return kept;
}

// The additive form of where_masked_scores' mask: where(mask, 0, -inf) or
// where(mask, -inf, 0), inserted before `pos`.
instruction_ref insert_additive_mask(module& m, instruction_ref pos, instruction_ref masked, std::size_t kept) {
    auto inputs = masked->inputs();
    inputs[kept] = m.insert_literal(pos, literal(shape(masked->get_shape().type(), {}), std::vector<double>{0}));
    return m.insert_instruction(pos, make_op("where"), inputs);
}

// convert(softmax(convert(s, float32)), t) with s of 16-bit type t, the
// intermediates read once: the float32 softmax, and s; nullopt otherwise.
std::optional<std::pair<instruction_ref, instruction_ref>> float32_softmax_between_converts(instruction_ref p) {
    if (!is(p, "convert")) return std::nullopt;
    const instruction_ref softmax = p->inputs()[0];
    if (!is_last_axis_softmax(softmax) || softmax->outputs().size() != 1 ||
        softmax->get_shape().type() != dtype::float_type)
        return std::nullopt;
    const instruction_ref widen = softmax->inputs()[0];
    if (!is(widen, "convert") || widen->outputs().size() != 1) return std::nullopt;
    const instruction_ref s = widen->inputs()[0];
    const dtype t = s->get_shape().type();
    if (!is_16bit_float(t) || p->get_shape().type() != t) return std::nullopt;
    return std::make_pair(softmax, s);
}

rewrite_rule attention_rule(bool sixteen_bit) {
    auto pattern = match::name("dot").shape_is([](const shape& s) { return is_floating(s.type()); });
    return {"attention", pattern, [sixteen_bit](module& m, const match::match_result& r) {
                instruction_ref p = r.root->inputs()[0];
                const instruction_ref v = r.root->inputs()[1];
                op::fused_attention a;
                // The NaN guard: where(not(equal(p, p)), 0, p).
                bool masked_row_guard = false;
                if (auto softmax = softmax_under_masked_row_guard(p); softmax && p->outputs().size() == 1) {
                    p = *softmax;
                    a.masked_rows_to_zero = masked_row_guard = true;
                } else if (is(p, "where") && p->outputs().size() == 1) {
                    const auto& w = p->inputs();
                    const instruction_ref cond = w[0], zero = w[1], probs = w[2];
                    const bool guard = is(cond, "not") && cond->outputs().size() == 1 &&
                                       is(cond->inputs()[0], "equal") && cond->inputs()[0]->outputs().size() == 1 &&
                                       cond->inputs()[0]->inputs()[0] == probs &&
                                       cond->inputs()[0]->inputs()[1] == probs && scalar_constant(*zero) == 0.0 &&
                                       used_only_by(probs, {&*cond->inputs()[0], &*p});
                    if (!guard) return false;
                    p = probs;
                    a.nan_to_zero = true;
                } else if (p->outputs().size() != 1) {
                    return false;
                }
                instruction_ref s = p;
                if (auto through = sixteen_bit ? float32_softmax_between_converts(p) : std::nullopt) {
                    s = through->second;
                } else {
                    if (!is_last_axis_softmax(p)) return false;
                    s = p->inputs()[0];
                }
                if (s->outputs().size() != (masked_row_guard ? 2u : 1u)) return false;
                std::optional<scores_match> scores;
                std::optional<instruction_ref> mask;
                const auto where_kept = where_masked_scores(s);
                if (where_kept) {
                    scores = match_scores(s->inputs()[*where_kept]);
                    mask = s;  // replaced by its additive form once every check has passed
                } else if (is(s, "add")) {
                    for (int i = 0; i < 2 && !scores; ++i) {
                        scores = match_scores(s->inputs()[static_cast<std::size_t>(i)]);
                        mask = s->inputs()[static_cast<std::size_t>(1 - i)];
                    }
                } else {
                    scores = match_scores(s);
                }
                if (!scores) return false;
                a.scale = scores->scale;
                std::vector<instruction_ref> inputs{scores->q, scores->kt, v};
                if (mask) {
                    a.has_mask = true;
                    inputs.push_back(*mask);
                }
                // The op wants one type throughout (a float32 mask beside 16-bit scores stays unfused).
                for (const auto& in : inputs)
                    if (in->get_shape().type() != r.root->get_shape().type()) return false;
                if (where_kept) inputs.back() = insert_additive_mask(m, r.root, s, *where_kept);
                // The op broadcasts its mask itself: a padding mask [batch, 1, 1, seq] is read
                // as it is, not as a broadcast [batch, heads, seq, seq] view.
                if (mask)
                    while (inputs.back()->name() == "broadcast" &&
                           ops::broadcast_lens("fused_attention",
                                               {s->get_shape(), inputs.back()->inputs()[0]->get_shape()}) ==
                               s->get_shape().lens())
                        inputs.back() = inputs.back()->inputs()[0];
                return replace_with_new(m, r.root, a, inputs);
            }};
}

// The permutation of a transpose; empty for another op.
std::vector<std::int64_t> transpose_permutation(const instruction& ins) {
    const auto* t = ins.get_operator().get_if<op::transpose>();
    if (t == nullptr) return {};
    if (!t->permutation.empty()) return t->permutation;
    std::vector<std::int64_t> reversed;
    for (std::size_t d = ins.get_shape().ndim(); d-- > 0;) reversed.push_back(static_cast<std::int64_t>(d));
    return reversed;
}

rewrite_rule output_order_rule() {
    auto pattern = match::name("fused_attention").where([](instruction_ref ins) {
        return ins->get_operator().get_if<op::fused_attention>()->output_order.empty() && !ins->outputs().empty();
    });
    return {"attention_output_order", pattern, [](module& m, const match::match_result& r) {
                const auto order = transpose_permutation(*r.root->outputs().front());
                const auto rank = static_cast<std::int64_t>(r.root->get_shape().ndim());
                if (order.empty() || order.back() != rank - 1) return false;
                for (const auto& u : r.root->outputs())
                    if (transpose_permutation(*u) != order) return false;
                op::fused_attention a = *r.root->get_operator().get_if<op::fused_attention>();
                a.output_order = order;
                return replace_value_restrided(m, r.root, m.insert_instruction(r.root, a, r.root->inputs()));
            }};
}

}  // namespace

void fuse_attention::apply(module& m) const {
    rewrite_to_fixed_point(m, {attention_rule(fuse_16bit_floats), output_order_rule()});
    // After the output orders are set: the rule carries them over.
    if (read_repeated_heads_in_place) rewrite_to_fixed_point(m, {repeated_heads_rule()});
}

}  // namespace kiln
