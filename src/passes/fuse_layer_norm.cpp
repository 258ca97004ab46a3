// Layer-norm recognition: the decomposition older exporters write (opsets
// before LayerNormalization, or models that spell it out),
//
//   d = x - reduce_mean(x, axes)
//   y = d / sqrt(reduce_mean(d^2, axes) + eps)      (d^2 as pow(d, 2) or d * d;
//                                                    / sqrt(v) also as * rsqrt(v))
//
// with `axes` the trailing dimensions, becomes layer_norm(x) over them; a
// following product with a scale and sum with a bias that broadcast over
// the normalized dimensions become its scale and bias inputs.
//
// With fuse_16bit_floats, convert(layer_norm(convert(x, float32), s, b), t)
// with x of 16-bit type t becomes layer_norm(x, s', b') in t (s', b' the
// scale and bias in t), so a quantized model keeps no converts around its
// layer norms; the reference (and the gpu kernel) compute a 16-bit
// layer_norm's statistics in wider types and round once at the end.
#include <optional>

#include "kiln/passes.hpp"
#include "ops/elementwise.hpp"
#include "ops/norm.hpp"
#include "passes/constant_value.hpp"
#include "passes/normalization_patterns.hpp"
#include "passes/rewriter.hpp"

namespace kiln {

namespace {

bool is(instruction_ref ins, const char* op) {
    return ins->name() == op;
}

rewrite_rule normalize_rule() {
    auto pattern = match::any_of_names({"div", "mul"}).shape_is([](const shape& s) { return is_floating(s.type()); });
    return {"layer_norm", pattern, [](module& m, const match::match_result& r) {
                for (const auto& d : r.root->inputs()) {
                    if (!is(d, "sub")) continue;
                    const instruction_ref x = d->inputs()[0], mean = d->inputs()[1];
                    auto axis = trailing_mean_axis(mean);
                    if (!axis || mean->inputs()[0] != x) continue;
                    auto v = variance_plus_eps(r.root, d);
                    if (!v || !is(*v, "add")) continue;
                    const auto& vin = (*v)->inputs();
                    for (int i = 0; i < 2; ++i) {
                        const instruction_ref var = vin[static_cast<std::size_t>(i)];
                        auto eps = scalar_constant(*vin[static_cast<std::size_t>(1 - i)]);
                        if (!eps || *eps < 0 || trailing_mean_axis(var) != axis || !is_square_of(var->inputs()[0], d))
                            continue;
                        op::layer_norm ln;
                        ln.axis = static_cast<std::int64_t>(*axis);
                        ln.epsilon = *eps;
                        return replace_with_new(m, r.root, ln, {x});
                    }
                }
                return false;
            }};
}

// layer_norm(x) * s -> layer_norm(x, s); layer_norm(x, s) + b -> layer_norm(x, s, b).
rewrite_rule affine_rule(const char* op_name, std::size_t inputs_before) {
    auto pattern =
        match::name(op_name).args_any_order(match::name("layer_norm").used_once().bind("ln"), match::any().bind("p"));
    return {std::string("layer_norm_") + op_name, pattern, [inputs_before](module& m, const match::match_result& r) {
                const instruction_ref ln = r.at("ln"), p = r.at("p");
                if (ln->inputs().size() != inputs_before || p == ln) return false;
                if (r.root->get_shape().lens() != ln->get_shape().lens()) return false;  // p must not broadcast x
                auto inputs = ln->inputs();
                inputs.push_back(p);
                return replace_with_new(m, r.root, ln->get_operator(), inputs);
            }};
}

bool is_16bit_float(dtype t) { return t == dtype::half_type || t == dtype::bf16_type; }

// convert(layer_norm(convert(x, float32), ...), t) with x of 16-bit type t
// and every user of the float32 layer_norm a convert to t: the same
// layer_norm in t. Each convert is a root of its own (the driver then erases
// what dies); quantize_fp16 writes one convert per value, and CSE merges the
// copies other forms would give.
rewrite_rule sixteen_bit_rule() {
    auto pattern = match::name("convert").shape_is([](const shape& s) { return is_16bit_float(s.type()); });
    return {"layer_norm_16bit", pattern, [](module& m, const match::match_result& r) {
                const dtype t = r.root->get_shape().type();
                const instruction_ref ln = r.root->inputs()[0];
                if (!is(ln, "layer_norm") || ln->get_shape().type() != dtype::float_type) return false;
                const instruction_ref widen = ln->inputs()[0];
                if (!is(widen, "convert") || widen->inputs()[0]->get_shape().type() != t) return false;
                for (const auto& user : ln->outputs())
                    if (!is(user, "convert") || user->get_shape().type() != t) return false;
                std::vector<instruction_ref> inputs{widen->inputs()[0]};
                for (std::size_t k = 1; k < ln->inputs().size(); ++k) {
                    const instruction_ref in = ln->inputs()[k];
                    // A scale or bias widened from t is used as it was; others (float32 weights) are
                    // converted to t (constant propagation folds the convert of a literal).
                    const bool widened = is(in, "convert") && in->inputs()[0]->get_shape().type() == t;
                    inputs.push_back(widened ? in->inputs()[0] : m.insert_instruction(r.root, op::convert_to(t), {in}));
                }
                return replace_with_new(m, r.root, ln->get_operator(), inputs);
            }};
}

}  // namespace

void fuse_layer_norm::apply(module& m) const {
    std::vector<rewrite_rule> rules{normalize_rule(), affine_rule("mul", 1), affine_rule("add", 2)};
    if (fuse_16bit_floats) rules.push_back(sixteen_bit_rule());
    rewrite_to_fixed_point(m, rules);
}

}  // namespace kiln
