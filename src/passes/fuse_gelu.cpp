// GELU recognition: the decompositions exporters write become one gelu op,
// which the fast kernels evaluate directly and which a fused matmul can take
// as a post-op.
//
//   erf form:  0.5 * x * (1 + erf(x / sqrt 2))                   -> gelu(x)
//   tanh form: 0.5 * x * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) -> gelu[approximate=tanh](x)
//
// The outer product may be associated and ordered any way (x * (0.5 * s),
// (x * 0.5) * s, (0.5 * x) * s, ...; a division by 2 counts as * 0.5), so
// the rule flattens the tree of muls under the root into its factors: the
// scalar constants must multiply to 0.5 and the others be x and 1 + erf(..)
// or 1 + tanh(..) of that same x. Inside, x / sqrt 2 may be x * (1/sqrt 2),
// x^3 may be pow(x, 3) or a product of three x, and sums and products may
// have their operands in either order. Constants must match to 1e-6
// relative (exporters write them in float32), or, stored as float16 /
// bfloat16 (a quantize_fp16 graph), be the value rounded to that type
// (within the type's unit roundoff, relative).
#include <cmath>
#include <optional>

#include "kiln/op_registry.hpp"
#include "kiln/passes.hpp"
#include "ops/elementwise.hpp"
#include "passes/constant_value.hpp"
#include "passes/rewriter.hpp"

namespace kiln {

namespace {

// How far a constant of type `t` may be from the value it stands for, relative.
double tolerance_of(dtype t) {
    if (t == dtype::half_type) return 0x1p-11 * 1.01;  // float16 rounds to 11 significant bits
    if (t == dtype::bf16_type) return 0x1p-8 * 1.01;   // bfloat16 to 8
    return 1e-6;
}

bool near(std::optional<double> v, double want, double tolerance) {
    return v && std::fabs(*v - want) <= tolerance * std::fabs(want);
}

// Whether `c` is a scalar constant standing for `want`.
bool near_constant(const instruction& c, double want) {
    return near(scalar_constant(c), want, tolerance_of(c.get_shape().type()));
}

bool is(instruction_ref ins, const char* op) {
    return ins->name() == op;
}

// The operand of a binary `ins` that is not `known`, if `known` is one of them.
std::optional<instruction_ref> other_operand(instruction_ref ins, instruction_ref known) {
    const auto& in = ins->inputs();
    if (in.size() != 2) return std::nullopt;
    if (in[0] == known) return in[1];
    if (in[1] == known) return in[0];
    return std::nullopt;
}

// The operand of a binary `ins` that is not the scalar constant `value`.
std::optional<instruction_ref> operand_besides_constant(instruction_ref ins, double value) {
    const auto& in = ins->inputs();
    if (in.size() != 2) return std::nullopt;
    if (near_constant(*in[1], value)) return in[0];
    if (near_constant(*in[0], value)) return in[1];
    return std::nullopt;
}

// x * c or c * x or x / (1/c).
std::optional<instruction_ref> scaled_by(instruction_ref ins, double c) {
    if (is(ins, "mul")) return operand_besides_constant(ins, c);
    if (is(ins, "div") && near_constant(*ins->inputs()[1], 1 / c)) return ins->inputs()[0];
    return std::nullopt;
}

bool is_cube_of(instruction_ref ins, instruction_ref x) {
    if (is(ins, "pow")) return ins->inputs()[0] == x && near_constant(*ins->inputs()[1], 3);
    if (!is(ins, "mul")) return false;
    auto rest = other_operand(ins, x);
    return rest && is(*rest, "mul") && (*rest)->inputs()[0] == x && (*rest)->inputs()[1] == x;
}

// 1 + f(x) with f the erf or tanh of the form's argument; the form, if so.
std::optional<op::gelu_approximation> gelu_sum_form(instruction_ref sum, instruction_ref x) {
    if (!is(sum, "add")) return std::nullopt;
    auto f = operand_besides_constant(sum, 1.0);
    if (!f) return std::nullopt;
    if ((*f)->inputs().size() != 1) return std::nullopt;
    const instruction_ref arg = (*f)->inputs()[0];
    if (is(*f, "erf")) {
        if (scaled_by(arg, 1 / std::sqrt(2.0)) == x) return op::gelu_approximation::none;
        return std::nullopt;
    }
    if (!is(*f, "tanh")) return std::nullopt;
    auto inner = scaled_by(arg, std::sqrt(2 / M_PI));  // x + 0.044715 x^3
    if (!inner || !is(*inner, "add")) return std::nullopt;
    auto cubic = other_operand(*inner, x);
    if (!cubic) return std::nullopt;
    auto cube = scaled_by(*cubic, 0.044715);
    if (cube && is_cube_of(*cube, x)) return op::gelu_approximation::tanh;
    return std::nullopt;
}

// The non-constant factors of the product tree under `root` and the product
// of its scalar constant factors.
void collect_factors(instruction_ref ins, std::vector<instruction_ref>& factors, double& constant, int depth = 0) {
    if (depth < 8 && (is(ins, "mul") || is(ins, "div")) && ins->inputs().size() == 2) {
        if (is(ins, "div")) {
            auto d = scalar_constant(*ins->inputs()[1]);
            if (d && *d != 0) {
                constant /= *d;
                collect_factors(ins->inputs()[0], factors, constant, depth + 1);
                return;
            }
        } else {
            for (const auto& in : ins->inputs()) collect_factors(in, factors, constant, depth + 1);
            return;
        }
    }
    if (auto c = scalar_constant(*ins)) {
        constant *= *c;
        return;
    }
    factors.push_back(ins);
}

rewrite_rule gelu_rule() {
    auto pattern = match::any_of_names({"mul", "div"}).shape_is([](const shape& s) { return is_floating(s.type()); });
    return {"gelu", pattern, [](module& m, const match::match_result& r) {
                std::vector<instruction_ref> factors;
                double constant = 1;
                collect_factors(r.root, factors, constant);
                if (factors.size() != 2 || !near(constant, 0.5, tolerance_of(r.root->get_shape().type()))) return false;
                for (int i = 0; i < 2; ++i) {
                    instruction_ref x = factors[static_cast<std::size_t>(i)];
                    instruction_ref sum = factors[static_cast<std::size_t>(1 - i)];
                    if (auto form = gelu_sum_form(sum, x)) {
                        op::gelu g;
                        g.approximate = *form;
                        return replace_with_new(m, r.root, g, {x});
                    }
                }
                return false;
            }};
}

}  // namespace

void fuse_gelu::apply(module& m) const {
    rewrite_to_fixed_point(m, {gelu_rule()});
}

}  // namespace kiln
