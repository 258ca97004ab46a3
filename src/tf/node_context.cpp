// Attribute access and instruction building for one TensorFlow node.
#include "kiln/op_registry.hpp"
#include "onnx/onnx_tensor.hpp"  // checked_shape: the memory limit both importers apply
#include "tf/tf_parser.hpp"

namespace kiln::tf_import {

namespace {
// Results of constant inputs up to this size are computed at import.
constexpr std::size_t max_folded_bytes = std::size_t{1} << 20;

const char* kind_name(tf::AttrValue::ValueCase c) {
    switch (c) {
        case tf::AttrValue::kList:
            return "a list";
        case tf::AttrValue::kS:
            return "a string";
        case tf::AttrValue::kI:
            return "an int";
        case tf::AttrValue::kF:
            return "a float";
        case tf::AttrValue::kB:
            return "a bool";
        case tf::AttrValue::kType:
            return "a type";
        case tf::AttrValue::kShape:
            return "a shape";
        case tf::AttrValue::kTensor:
            return "a tensor";
        case tf::AttrValue::kPlaceholder:
            return "a placeholder";
        case tf::AttrValue::kFunc:
            return "a function";
        default:
            return "empty";
    }
}
}  // namespace

value int_list(const std::vector<std::int64_t>& v) {
    return value_list(v.begin(), v.end());
}

value int_list(const std::vector<std::size_t>& v) {
    value_list out;
    for (auto x : v) out.emplace_back(static_cast<std::int64_t>(x));
    return out;
}

node_context::node_context(const tf::NodeDef& node, module& m, const tf_options& options, layout_cache& layouts)
    : node_(node), mod_(m), options_(options), layouts_(layouts) {}

void node_context::fail(error_kind kind, const std::string& message) const {
    kiln::fail(kind, message);
}

bool node_context::has_attribute(const std::string& name) const {
    return node_.attr().contains(name);
}

const tf::AttrValue& node_context::get_attribute(const std::string& name) const {
    auto it = node_.attr().find(name);
    if (it == node_.attr().end()) fail(error_kind::invalid_argument, "required attribute '" + name + "' is missing");
    return it->second;
}

namespace {
const tf::AttrValue* find(const tf::NodeDef& node, const std::string& name, tf::AttrValue::ValueCase expected) {
    auto it = node.attr().find(name);
    if (it == node.attr().end()) return nullptr;
    if (it->second.value_case() != expected)
        fail(error_kind::type_error, "attribute '" + name + "' must be " + kind_name(expected) + " but is " +
                                         kind_name(it->second.value_case()));
    return &it->second;
}
}  // namespace

std::int64_t node_context::get_int(const std::string& name, std::int64_t fallback) const {
    const auto* a = find(node_, name, tf::AttrValue::kI);
    return a ? a->i() : fallback;
}

double node_context::get_float(const std::string& name, double fallback) const {
    const auto* a = find(node_, name, tf::AttrValue::kF);
    return a ? a->f() : fallback;
}

bool node_context::get_bool(const std::string& name, bool fallback) const {
    const auto* a = find(node_, name, tf::AttrValue::kB);
    return a ? a->b() : fallback;
}

std::string node_context::get_string(const std::string& name, const std::string& fallback) const {
    const auto* a = find(node_, name, tf::AttrValue::kS);
    return a ? a->s() : fallback;
}

std::vector<std::int64_t> node_context::get_ints(const std::string& name,
                                                 const std::vector<std::int64_t>& fallback) const {
    const auto* a = find(node_, name, tf::AttrValue::kList);
    return a ? std::vector<std::int64_t>(a->list().i().begin(), a->list().i().end()) : fallback;
}

dtype node_context::get_type(const std::string& name) const {
    const auto* a = find(node_, name, tf::AttrValue::kType);
    if (a == nullptr) fail(error_kind::invalid_argument, "required attribute '" + name + "' is missing");
    return to_dtype(a->type(), "attribute '" + name + "'");
}

bool node_context::nhwc() const {
    std::string format = get_string("data_format", options_.is_nhwc ? "NHWC" : "NCHW");
    if (format == "NHWC") return true;
    if (format == "NCHW") return false;
    fail(error_kind::not_implemented, "data_format '" + format + "' is not supported (NHWC or NCHW)");
}

void node_context::expect_inputs(const std::vector<instruction_ref>& args, std::size_t lo, std::size_t hi) const {
    if (args.size() < lo || args.size() > hi)
        fail(error_kind::invalid_argument,
             "expects " + (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) +
                 " inputs but has " + std::to_string(args.size()));
}

instruction_ref node_context::add(const std::string& name, const std::vector<instruction_ref>& inputs,
                                  const value& attributes) const {
    operation op = make_op(name, attributes);
    auto ins = mod_.add_instruction(op, inputs);
    const shape& s = ins->get_shape();
    // Intermediate results count against the memory limit too.
    onnx_import::checked_shape(s.type(), std::vector<std::int64_t>(s.lens().begin(), s.lens().end()),
                               "result of " + name);
    bool all_constant = !inputs.empty();
    for (auto in : inputs) all_constant = all_constant && in->is_literal();
    if (!all_constant || s.elements() * s.element_size() > max_folded_bytes) return ins;
    std::vector<argument> args;
    for (auto in : inputs) args.push_back(in->get_literal().get_argument());
    literal folded(op.evaluate(s, args));
    mod_.remove_instruction(ins);
    return mod_.add_literal(std::move(folded));
}

instruction_ref node_context::fold(const std::string& name, instruction_ref input, const value& attributes) const {
    if (!input->is_literal()) return add(name, {input}, attributes);
    operation op = make_op(name, attributes);
    shape s = op.compute_shape({input->get_literal().get_shape()});
    literal folded(op.evaluate(s, {input->get_literal().get_argument()}));
    return mod_.add_literal(std::move(folded));
}

instruction_ref node_context::add_literal(literal lit) const {
    return mod_.add_literal(std::move(lit));
}

instruction_ref node_context::add_scalar(dtype t, double v) const {
    return add_literal(literal(shape{t}, std::vector<double>{v}));
}

std::vector<std::int64_t> node_context::constant_ints(instruction_ref ins, const std::string& what) const {
    if (!ins->is_literal())
        fail(error_kind::not_implemented,
             what + " must be a constant (Kiln's shapes are static), but it is computed at run time");
    const literal& lit = ins->get_literal();
    if (!is_integral(lit.get_shape().type()))
        fail(error_kind::type_error, what + " must hold integers, not " + to_string(lit.get_shape().type()));
    return lit.to_vector<std::int64_t>();
}

namespace {
const std::vector<std::int64_t> nhwc_to_nchw{0, 3, 1, 2};
const std::vector<std::int64_t> nchw_to_nhwc{0, 2, 3, 1};
}  // namespace

instruction_ref node_context::to_nchw(instruction_ref x) const {
    if (!nhwc()) return x;
    if (x->get_shape().lens().size() != 4)
        fail(error_kind::invalid_argument, "expects a 4-D input, got " + to_string(x->get_shape().lens()));
    if (auto known = layouts_.nchw.find(&*x); known != layouts_.nchw.end()) return known->second;
    // Copied into NCHW order: the cpu target's convolutions are far slower on a transposed view.
    auto t = add("transpose", {x}, value_map{{"permutation", int_list(nhwc_to_nchw)}});
    return t->is_literal() ? t : add("contiguous", {t});
}

instruction_ref node_context::from_nchw(instruction_ref x) const {
    if (!nhwc()) return x;
    auto y = add("transpose", {x}, value_map{{"permutation", int_list(nchw_to_nhwc)}});
    layouts_.nchw[&*y] = x;
    return y;
}

namespace {
// op(a, b) on two literals, whatever their size.
literal evaluate(const std::string& name, const literal& a, const literal& b) {
    operation op = make_op(name);
    shape s = op.compute_shape({a.get_shape(), b.get_shape()});
    return literal(op.evaluate(s, {a.get_argument(), b.get_argument()}));
}
}  // namespace

std::optional<instruction_ref> node_context::scale_convolution(instruction_ref y, instruction_ref s) const {
    if (!s->is_literal()) return std::nullopt;
    const auto& sl = s->get_shape().lens();
    if (sl.size() != 4 || sl[0] != 1 || sl[2] != 1 || sl[3] != 1) return std::nullopt;
    auto scaled_conv = [&](instruction_ref conv) -> std::optional<instruction_ref> {
        if (conv->name() != "convolution" || !conv->inputs()[1]->is_literal()) return std::nullopt;
        const literal& w = conv->inputs()[1]->get_literal();
        const auto& wl = w.get_shape().lens();
        if (wl.size() != 4 || (sl[1] != 1 && sl[1] != wl[0]) || s->get_shape().type() != w.get_shape().type())
            return std::nullopt;
        // [1, C, 1, 1] -> [C, 1, 1, 1]: one factor per output channel.
        operation to_rows = make_op("reshape", value_map{{"dims", int_list(std::vector<std::size_t>{sl[1], 1, 1, 1})}});
        const literal& sv = s->get_literal();
        literal rows(to_rows.evaluate(to_rows.compute_shape({sv.get_shape()}), {sv.get_argument()}));
        auto w_scaled = mod_.add_literal(evaluate("mul", w, rows));
        return mod_.add_instruction(conv->get_operator(), {conv->inputs()[0], w_scaled});
    };
    if (auto direct = scaled_conv(y)) return direct;
    if (y->name() != "add") return std::nullopt;
    for (std::size_t i = 0; i < 2; ++i) {
        auto conv = y->inputs()[i];
        auto c = y->inputs()[1 - i];
        if (!c->is_literal()) continue;
        if (auto scaled = scaled_conv(conv))
            return add("add", {*scaled, mod_.add_literal(evaluate("mul", c->get_literal(), s->get_literal()))});
    }
    return std::nullopt;
}

void node_context::note_zero_pad(instruction_ref y, instruction_ref x, const std::vector<std::int64_t>& pads) const {
    layouts_.zero_pads[&*y] = {x, pads};
}

const std::pair<instruction_ref, std::vector<std::int64_t>>* node_context::zero_pad(instruction_ref y) const {
    auto it = layouts_.zero_pads.find(&*y);
    return it == layouts_.zero_pads.end() ? nullptr : &it->second;
}

std::optional<instruction_ref> node_context::known_nchw(instruction_ref x) const {
    auto known = layouts_.nchw.find(&*x);
    if (known == layouts_.nchw.end()) return std::nullopt;
    return known->second;
}

instruction_ref node_context::nhwc_of(instruction_ref y) const {
    auto back = add("transpose", {y}, value_map{{"permutation", int_list(nchw_to_nhwc)}});
    layouts_.nchw[&*back] = y;
    return back;
}

instruction_ref node_context::pointwise(const std::string& name, const std::vector<instruction_ref>& inputs,
                                        const value& attributes) const {
    bool any_nchw = false;
    bool fits = true;
    for (auto in : inputs) {
        any_nchw = any_nchw || layouts_.nchw.contains(&*in);
        fits = fits && in->get_shape().lens().size() <= 4;
    }
    if (!any_nchw || !fits) return add(name, inputs, attributes);
    std::vector<instruction_ref> nchw;
    for (auto in : inputs) {
        if (auto known = layouts_.nchw.find(&*in); known != layouts_.nchw.end()) {
            nchw.push_back(known->second);
            continue;
        }
        // Broadcasting aligns trailing dims: pad to rank 4 with leading 1s, then permute.
        auto lens = in->get_shape().lens();
        auto x = in;
        if (lens.size() < 4) {
            std::vector<std::size_t> dims(4 - lens.size(), 1);
            dims.insert(dims.end(), lens.begin(), lens.end());
            x = fold("reshape", x, value_map{{"dims", int_list(dims)}});
        }
        nchw.push_back(fold("transpose", x, value_map{{"permutation", int_list(nhwc_to_nchw)}}));
    }
    if (name == "mul" && nchw.size() == 2) {
        for (std::size_t i = 0; i < 2; ++i)
            if (layouts_.nchw.contains(&*inputs[i]))
                if (auto scaled = scale_convolution(nchw[i], nchw[1 - i])) return nhwc_of(*scaled);
    }
    auto y = add(name, nchw, attributes);
    if (y->get_shape().lens().size() != 4) return add(name, inputs, attributes);
    return nhwc_of(y);
}

}  // namespace kiln::tf_import
