// quantize_fp16 / quantize_bf16: float32 computation rewritten to a 16-bit
// float type, MIGraphX's way. Each chosen instruction reads its float32
// inputs converted to the 16-bit type and its users read its result
// converted back; a convert back and forth between two chosen instructions
// cancels, so a chain of them stays 16-bit. Float32 literals read by a chosen
// instruction become 16-bit literals (the weights take half the memory).
// Parameters and the return keep their types, so callers still pass and
// receive float32.
//
// The ops whose float32 range or precision matters stay float32 with
// converts around them: sums and means (a sum of 768 values of 100 is past
// float16's 65504), products, softmax, batch and layer normalization (the
// variance of activations of a few hundred overflows float16), attention
// (its softmax), cumulative sums. Layer normalization spelled out with
// reduce_mean / pow / sqrt is recognized first (fuse_layer_norm), so its
// squares never exist in the 16-bit type.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>

#include "kiln/float16.hpp"
#include "kiln/op_registry.hpp"
#include "kiln/passes.hpp"
#include "kiln/quantize.hpp"
#include "ops/elementwise.hpp"

namespace kiln {

namespace {

bool needs_float32_range(const std::string& op) {
    static const std::set<std::string> ops{
        "reduce_sum",           "reduce_mean", "reduce_prod",     "softmax", "log_softmax",
        "batch_norm_inference", "layer_norm",  "fused_attention", "cumsum",  "cumprod"};
    return ops.count(op) > 0;
}

// Ops that rewriting cannot apply to: their types are part of their meaning.
bool keeps_its_types(const instruction& ins) {
    static const std::set<std::string> ops{"convert", "quantize_linear", "dequantize_linear", "bitcast"};
    return ins.name().front() == '@' || ops.count(ins.name()) > 0 || !ins.module_inputs().empty();
}

// Float32 values converted to `type`; values beyond its range saturate to its
// largest finite value (a weight of 70000 is better as 65504 than as inf).
literal to_16bit_literal(const literal& lit, dtype type) {
    const argument values = lit.get_argument();
    const float* x = values.data_as<float>();
    const std::size_t n = lit.get_shape().elements();
    const shape s{type, lit.get_shape().lens()};
    if (type == dtype::half_type) {
        return literal(s, [&](std::byte* out) {
            auto* y = reinterpret_cast<half*>(out);
            constexpr float largest = 65504.0f;
            for (std::size_t i = 0; i < n; ++i)
                y[i] = std::isnan(x[i]) ? half(x[i]) : half(std::clamp(x[i], -largest, largest));
        });
    }
    return literal(s, [&](std::byte* out) {
        auto* y = reinterpret_cast<bfloat16*>(out);
        for (std::size_t i = 0; i < n; ++i) y[i] = bfloat16(x[i]);
    });
}

class half_rewriter {
public:
    half_rewriter(module& m, dtype type) : m_(m), type_(type) {}

    // `ins` computing in the 16-bit type; false (and no change) when its op
    // does not accept the 16-bit inputs.
    bool rewrite(instruction_ref ins) {
        std::vector<instruction_ref> inputs;
        bool any_float = false;
        for (auto in : ins->inputs()) {
            const bool is_float = in->get_shape().type() == dtype::float_type;
            any_float = any_float || is_float;
            inputs.push_back(is_float ? to_16bit(in) : in);
        }
        if (!any_float) return false;
        std::vector<shape> shapes;
        for (auto in : inputs) shapes.push_back(in->get_shape());
        shape result;
        try {
            result = ins->get_operator().compute_shape(shapes);
        } catch (const error&) {
            return false;  // e.g. an op whose other inputs must be float32
        }
        const dtype old_type = ins->get_shape().type();
        if (result.type() != old_type && !(old_type == dtype::float_type && result.type() == type_)) return false;
        auto replacement = m_.insert_instruction(ins, ins->get_operator(), inputs);
        if (result.type() != old_type) {
            auto back = m_.insert_instruction(ins, op::convert_to(dtype::float_type), {replacement});
            m_.replace_all_uses(ins, back);
        } else {
            m_.replace_all_uses(ins, replacement);
        }
        m_.remove_instruction(ins);
        return true;
    }

private:
    // The 16-bit form of float32 value `v`: the value a convert back came
    // from, a 16-bit literal, or a convert placed right after `v`.
    instruction_ref to_16bit(instruction_ref v) {
        if (v->name() == "convert" && v->inputs().front()->get_shape().type() == type_) return v->inputs().front();
        auto found = converted_.find(&*v);
        if (found != converted_.end()) return found->second;
        instruction_ref h = v->is_literal() ? m_.insert_literal(v, to_16bit_literal(v->get_literal(), type_))
                                            : m_.insert_instruction(std::next(v), op::convert_to(type_), {v});
        converted_.emplace(&*v, h);
        return h;
    }

    module& m_;
    dtype type_;
    std::unordered_map<const instruction*, instruction_ref> converted_;
};

void check_names(const std::string& caller, const std::vector<std::string>& ins_names) {
    if (ins_names.empty())
        fail(caller +
             ": ins_names is empty; pass {\"all\"} or the names of the ops to convert (dot, convolution, ...)");
    for (const auto& n : ins_names)
        if (n != "all" && !has_op(n))
            fail(caller + ": ins_names holds '" + n +
                 "', which is not an operator name; expected \"all\" or op "
                 "names such as dot, convolution, add (kiln ops lists them)");
}

void quantize_module(module& m, dtype type, const std::set<std::string>& chosen) {
    const bool all = chosen.count("all") > 0;
    if (all || chosen.count("layer_norm") > 0) fuse_layer_norm{}.apply(m);
    std::vector<instruction_ref> order;
    for (auto it = m.begin(); it != m.end(); ++it) order.push_back(it);
    half_rewriter rewriter(m, type);
    for (auto ins : order) {
        if (keeps_its_types(*ins) || needs_float32_range(ins->name())) continue;
        if (!all && chosen.count(ins->name()) == 0) continue;
        rewriter.rewrite(ins);
    }
    dead_code_elimination{}.apply(m);
}

void quantize_modules(program& p, dtype type, const std::set<std::string>& chosen) {
    for (const module* mod : p.get_modules()) quantize_module(*p.get_module(mod->name()), type, chosen);
}

// A dynamic program's front end imports each specialisation afresh: this
// one quantizes what it imports the same way.
class quantized_specialiser : public specialiser {
public:
    quantized_specialiser(std::shared_ptr<const specialiser> source, dtype type, std::set<std::string> chosen)
        : source_(std::move(source)), type_(type), chosen_(std::move(chosen)) {}
    std::string kind() const override { return source_->kind() + "+" + to_string(type_); }
    program specialise(const parameter_lens& lens) const override {
        program p = source_->specialise(lens);
        quantize_modules(p, type_, chosen_);
        return p;
    }

private:
    std::shared_ptr<const specialiser> source_;
    dtype type_;
    std::set<std::string> chosen_;
};

void quantize_16bit(program& p, dtype type, const std::string& caller, const std::vector<std::string>& ins_names) {
    check_names(caller, ins_names);
    if (p.is_compiled()) fail(caller + ": the program is compiled; quantize it before compile (as MIGraphX requires)");
    const std::set<std::string> chosen(ins_names.begin(), ins_names.end());
    // The main module of an imported dynamic program is its first
    // specialisation; the others come from the specialiser.
    if (auto source = p.shared_specialiser()) {
        std::map<std::string, shape> ranges;
        for (const auto& [name, sh] : p.get_parameter_shapes())
            if (sh.dynamic()) ranges.emplace(name, sh);
        quantize_modules(p, type, chosen);
        p.set_specialiser(std::make_shared<quantized_specialiser>(std::move(source), type, chosen), ranges);
        return;
    }
    quantize_modules(p, type, chosen);
}

}  // namespace

void quantize_fp16(program& p, const std::vector<std::string>& ins_names) {
    quantize_16bit(p, dtype::half_type, "quantize_fp16", ins_names);
}

void quantize_bf16(program& p, const std::vector<std::string>& ins_names) {
    quantize_16bit(p, dtype::bf16_type, "quantize_bf16", ins_names);
}

}  // namespace kiln
