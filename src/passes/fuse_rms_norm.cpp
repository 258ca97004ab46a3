// RMS-norm recognition: what exporters and traced PyTorch write for Llama's
// (and T5's, Mistral's, Qwen's) norm, and the ONNX importer for
// RMSNormalization,
//
//   y = x * rsqrt(reduce_mean(x^2, axes) + eps)     (x^2 as pow(x, 2) or x * x;
//                                                    * rsqrt(v) also as / sqrt(v))
//
// with `axes` the trailing dimensions, becomes rms_norm(x) over them; a
// following product with a scale that broadcasts over the normalized
// dimensions becomes its scale input. Four instructions (and as many passes
// over the row) become one.
#include "kiln/passes.hpp"
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
    return {"rms_norm", pattern, [](module& m, const match::match_result& r) {
                for (const auto& x : r.root->inputs()) {
                    if (x->get_shape().lens() != r.root->get_shape().lens()) continue;
                    auto v = variance_plus_eps(r.root, x);
                    if (!v || !is(*v, "add")) continue;
                    const auto& vin = (*v)->inputs();
                    for (int i = 0; i < 2; ++i) {
                        const instruction_ref mean = vin[static_cast<std::size_t>(i)];
                        auto eps = scalar_constant(*vin[static_cast<std::size_t>(1 - i)]);
                        auto axis = trailing_mean_axis(mean);
                        if (!eps || *eps < 0 || !axis || !is_square_of(mean->inputs()[0], x)) continue;
                        op::rms_norm rms;
                        rms.axis = static_cast<std::int64_t>(*axis);
                        rms.epsilon = *eps;
                        return replace_with_new(m, r.root, rms, {x});
                    }
                }
                return false;
            }};
}

// rms_norm(x) * s -> rms_norm(x, s), s broadcasting over the normalized dimensions.
rewrite_rule scale_rule() {
    auto pattern =
        match::name("mul").args_any_order(match::name("rms_norm").used_once().bind("norm"), match::any().bind("s"));
    return {"rms_norm_scale", pattern, [](module& m, const match::match_result& r) {
                const instruction_ref norm = r.at("norm");
                const instruction_ref s = unbroadcast(r.at("s"));
                if (norm->inputs().size() != 1 || s == norm) return false;
                if (r.root->get_shape().lens() != norm->get_shape().lens()) return false;  // s must not broadcast x
                try {
                    norm->get_operator().compute_shape({norm->inputs()[0]->get_shape(), s->get_shape()});
                } catch (const error&) {
                    return false;  // s varies along a dimension that is not normalized
                }
                return replace_with_new(m, r.root, norm->get_operator(), {norm->inputs()[0], s});
            }};
}

}  // namespace

void fuse_rms_norm::apply(module& m) const {
    rewrite_to_fixed_point(m, {normalize_rule(), scale_rule()});
}

}  // namespace kiln
