// Post-op fusion, as rewrite rules: convolution and dot become their fused
// forms, which then absorb what follows them when nothing else reads the
// intermediate value:
//   - a constant per-output-channel add (conv: [1, M, 1, ...]; dot: [..., N])
//     becomes the bias, when no post-op is there yet;
//   - relu, sigmoid, tanh, gelu (what fuse_gelu recognizes, both forms),
//     and clip with scalar constant bounds become activation post-ops;
//   - add or mul with another tensor that broadcasts to the result (a
//     residual, a mask, a scale) becomes a binary post-op.
// The fused op is inserted where the absorbed consumer was, so every operand
// it reads is already computed there. float32 only unless fuse_16bit_floats
// is on; then float16 / bfloat16 ops fuse too, when every value the fused op
// reads (inputs, weights, bias, operands) has the result's type: a fused op
// never mixes float32 with a 16-bit type.
#include <optional>

#include "kiln/op_registry.hpp"
#include "kiln/passes.hpp"
#include "ops/conv.hpp"
#include "ops/elementwise.hpp"
#include "ops/fused_convolution.hpp"
#include "ops/fused_dot.hpp"
#include "passes/constant_value.hpp"
#include "passes/rewriter.hpp"

namespace kiln {

namespace {

using match::any;
using match::match_result;
using match::matcher;
using match::name;
using op::post_op_kind;

bool is_16bit_float(dtype t) { return t == dtype::half_type || t == dtype::bf16_type; }

// The result types whose convolutions and dots become fused ops.
bool fusable_type(const shape& s, bool sixteen_bit) {
    return s.type() == dtype::float_type || (sixteen_bit && is_16bit_float(s.type()));
}

// A 16-bit op fuses only when all its inputs have its type (float32 keeps
// today's rule: the weights may be 16-bit, the ops allow that).
bool inputs_match(const instruction& ins) {
    const dtype t = ins.get_shape().type();
    if (t == dtype::float_type) return true;
    for (const auto& in : ins.inputs())
        if (in->get_shape().type() != t) return false;
    return true;
}

rewrite_rule convolution_to_fused(bool sixteen_bit) {
    auto pattern = name("convolution")
                       .shape_is([=](const shape& s) { return fusable_type(s, sixteen_bit); })
                       .args(any(), match::is_constant());
    return {"convolution_to_fused", pattern, [](module& m, const match_result& r) {
                if (!inputs_match(*r.root)) return false;
                const auto* c = r.root->get_operator().get_if<op::convolution>();
                op::fused_convolution f;
                f.conv = *c;
                return replace_with_new(m, r.root, f, r.root->inputs());
            }};
}

rewrite_rule dot_to_fused(bool sixteen_bit) {
    auto pattern = name("dot").shape_is([=](const shape& s) { return fusable_type(s, sixteen_bit); });
    return {"dot_to_fused", pattern, [](module& m, const match_result& r) {
                if (!inputs_match(*r.root)) return false;
                return replace_with_new(m, r.root, op::fused_dot{}, r.root->inputs());
            }};
}

// A fused op nothing else reads, with its chain.
matcher fused_producer() { return match::any_of_names({"fused_convolution", "fused_dot"}).used_once(); }

template <class F>
auto with_fused(const operation& op, F&& change) {
    if (const auto* c = op.get_if<op::fused_convolution>()) {
        auto copy = *c;
        change(copy);
        return operation(copy);
    }
    auto copy = *op.get_if<op::fused_dot>();
    change(copy);
    return operation(copy);
}

bool has_bias_or_post(const operation& op) {
    if (const auto* c = op.get_if<op::fused_convolution>()) return c->has_bias || !c->post.empty();
    const auto* d = op.get_if<op::fused_dot>();
    return d->has_bias || !d->post.empty();
}

// The channel count when `c` (numpy-aligned to `out`) varies along the
// channel axis only: axis 1 for a convolution, the last axis for a dot.
bool is_per_channel(const shape& c, const shape& out, bool convolution) {
    if (c.ndim() > out.ndim()) return false;
    const std::size_t axis = convolution ? 1 : out.ndim() - 1;
    const std::size_t offset = out.ndim() - c.ndim();
    for (std::size_t i = 0; i < c.ndim(); ++i) {
        const std::size_t d = offset + i;
        const std::size_t want = d == axis ? out.lens()[axis] : 1;
        if (c.lens()[i] != want && !(d == axis && c.lens()[i] == 1 && out.lens()[axis] == 1)) return false;
    }
    return convolution ? offset <= 1 : c.ndim() >= 1;
}

rewrite_rule fuse_bias() {
    auto pattern = name("add").args_any_order(fused_producer().bind("f"), match::is_constant().bind("c"));
    return {"fuse_bias", pattern, [](module& m, const match_result& r) {
                auto f = r.at("f");
                const bool conv = f->name() == "fused_convolution";
                if (has_bias_or_post(f->get_operator())) return false;
                if (conv && f->get_operator().get_if<op::fused_convolution>()->output_layout != op::tensor_layout::nchw)
                    return false;
                const shape& out = f->get_shape();
                if (r.root->get_shape().lens() != out.lens() || !is_per_channel(r.at("c")->get_shape(), out, conv))
                    return false;
                if (r.at("c")->get_shape().type() != out.type()) return false;
                const auto channels = static_cast<std::int64_t>(out.lens()[conv ? 1 : out.ndim() - 1]);
                auto bias = m.insert_instruction(r.root, make_op("reshape", value_map{{"dims", value_list{value(channels)}}}),
                                                 {r.at("c")});
                auto fused = with_fused(f->get_operator(), [](auto& op) { op.has_bias = true; });
                auto inputs = f->inputs();
                inputs.push_back(bias);
                return replace_with_new(m, r.root, fused, inputs);
            }};
}

std::optional<post_op_kind> activation_kind(const operation& op) {
    if (op.name() == "relu") return post_op_kind::relu;
    if (op.name() == "sigmoid") return post_op_kind::sigmoid;
    if (op.name() == "tanh") return post_op_kind::tanh;
    if (const auto* g = op.get_if<op::gelu>())
        return g->approximate == op::gelu_approximation::tanh ? post_op_kind::gelu_tanh : post_op_kind::gelu_erf;
    return std::nullopt;
}

rewrite_rule fuse_activation() {
    auto pattern = match::any_of_names({"relu", "sigmoid", "tanh", "gelu"}).args(fused_producer().bind("f"));
    return {"fuse_activation", pattern, [](module& m, const match_result& r) {
                auto kind = *activation_kind(r.root->get_operator());
                auto fused = with_fused(r.at("f")->get_operator(), [&](auto& op) { op.post.append(kind); });
                return replace_with_new(m, r.root, fused, r.at("f")->inputs());
            }};
}

rewrite_rule fuse_clip() {
    auto pattern = name("clip").args(fused_producer().bind("f"), match::is_constant().bind("lo"),
                                     match::is_constant().bind("hi"));
    return {"fuse_clip", pattern, [](module& m, const match_result& r) {
                auto lo = scalar_constant(*r.at("lo"));
                auto hi = scalar_constant(*r.at("hi"));
                if (!lo || !hi) return false;
                auto fused = with_fused(r.at("f")->get_operator(),
                                        [&](auto& op) { op.post.append(post_op_kind::clip, *lo, *hi); });
                return replace_with_new(m, r.root, fused, r.at("f")->inputs());
            }};
}

rewrite_rule fuse_binary() {
    auto pattern = match::any_of_names({"add", "mul"}).args_any_order(fused_producer().bind("f"), any().bind("other"));
    return {"fuse_binary", pattern, [](module& m, const match_result& r) {
                auto f = r.at("f");
                auto other = r.at("other");
                if (other == f || other->get_shape().type() != f->get_shape().type()) return false;
                if (r.root->get_shape().lens() != f->get_shape().lens()) return false;  // the fused result would broadcast
                if (const auto* c = f->get_operator().get_if<op::fused_convolution>())
                    if (c->output_layout != op::tensor_layout::nchw && other->get_shape().lens() != f->get_shape().lens())
                        return false;
                const auto kind = r.root->name() == "add" ? post_op_kind::add : post_op_kind::mul;
                auto fused = with_fused(f->get_operator(), [&](auto& op) { op.post.append(kind); });
                auto inputs = f->inputs();
                inputs.push_back(other);
                return replace_with_new(m, r.root, fused, inputs);
            }};
}

operation reshape_to(const shape& s) {
    value_list dims;
    for (auto l : s.lens()) dims.push_back(value(static_cast<std::int64_t>(l)));
    return make_op("reshape", value_map{{"dims", dims}});
}

// A fused dot's result that only a reshape reads (GPT-2 multiplies [rows, N]
// views between [1, S, N] reshapes).
matcher reshaped_dot() { return name("reshape").used_once().args(name("fused_dot").used_once().bind("f")).bind("r"); }

// An activation after such a reshape moves before it, where it fuses; the
// reshape then applies to the fused result.
rewrite_rule sink_reshape_below_activation() {
    auto pattern = match::any_of_names({"relu", "sigmoid", "tanh", "gelu"}).args(reshaped_dot());
    return {"sink_reshape_below_activation", pattern, [](module& m, const match_result& r) {
                auto moved = m.insert_instruction(r.root, r.root->get_operator(), {r.at("f")});
                return replace_with_new(m, r.root, reshape_to(r.root->get_shape()), {moved});
            }};
}

// So does an add or mul with a tensor of the result's own shape (a
// residual), that tensor reshaped like the dot's result.
rewrite_rule sink_reshape_below_binary() {
    auto pattern = match::any_of_names({"add", "mul"}).args_any_order(reshaped_dot(), any().bind("other"));
    return {"sink_reshape_below_binary", pattern, [](module& m, const match_result& r) {
                auto f = r.at("f");
                auto other = r.at("other");
                if (other == r.at("r") || other->get_shape().type() != f->get_shape().type()) return false;
                if (other->get_shape().lens() != r.root->get_shape().lens()) return false;
                if (r.at("r")->get_shape().lens() != r.root->get_shape().lens()) return false;
                auto reshaped = m.insert_instruction(r.root, reshape_to(f->get_shape()), {other});
                const bool dot_first = r.root->inputs()[0] == r.at("r");
                auto moved = m.insert_instruction(r.root, r.root->get_operator(),
                                                  dot_first ? std::vector{f, reshaped} : std::vector{reshaped, f});
                return replace_with_new(m, r.root, reshape_to(r.root->get_shape()), {moved});
            }};
}

}  // namespace

void fuse_post_ops::apply(module& m) const {
    rewrite_to_fixed_point(m, {convolution_to_fused(fuse_16bit_floats), dot_to_fused(fuse_16bit_floats), fuse_bias(),
                               fuse_activation(), fuse_clip(), fuse_binary(), sink_reshape_below_activation(),
                               sink_reshape_below_binary()});
}

}  // namespace kiln
