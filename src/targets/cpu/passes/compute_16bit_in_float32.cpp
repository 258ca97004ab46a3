// float16 / bfloat16 arithmetic moved to float32, the weights left 16-bit.
// This CPU has no fast 16-bit arithmetic for Kiln's kernels, so a
// quantize_fp16 / quantize_bf16 program (or a float16 ONNX model) runs as:
//   - every instruction that reads a 16-bit value computed at run time (an
//     activation) reads its float32 counterpart instead and computes in
//     float32; a convert from float32 to 16 bits is its own input's
//     counterpart, so the activations are never rounded to 16 bits; a
//     16-bit value computed at run time by an op left alone (a gather of
//     rows from a 16-bit embedding table, a parameter) is widened by a
//     convert where an instruction reads it;
//   - dot and convolution whose weights are a 16-bit constant (a literal,
//     or one transposed or reshaped, which constant propagation folds) become
//     fused_dot / fused_convolution reading float32 activations and the
//     16-bit weights, which their cpu kernels widen where they use them:
//     the weights keep half the bytes of float32;
//   - other 16-bit constants an activation meets (biases, scales) are
//     widened by a convert that constant propagation folds (small ones);
//   - values the program returns, or that an op which keeps its types reads
//     (control flow, quantize_linear), are converted back to their 16-bit
//     type, so the program's interface is unchanged.
// An instruction computed only from constants is left alone (constant
// propagation evaluates it), and so is one whose op does not accept float32
// inputs in place of 16-bit ones.
#include <unordered_map>
#include <unordered_set>

#include "ops/conv.hpp"
#include "ops/elementwise.hpp"
#include "ops/fused_convolution.hpp"
#include "ops/fused_dot.hpp"
#include "ops/narrow_weights.hpp"
#include "passes/matcher.hpp"
#include "targets/cpu/passes/cpu_passes.hpp"

namespace kiln {

namespace {

bool is_16bit(instruction_ref v) {
    return ops::is_16bit_float(v->get_shape().type());
}

class float32_rewriter {
public:
    explicit float32_rewriter(module& m) : m_(m) {}

    void rewrite(instruction_ref ins) {
        note_run_time(ins);
        if (ins->name().front() == '@' || !ins->module_inputs().empty()) return;
        if (ins->name() == "convert") return rewrite_convert(ins);
        bool reads_activation = false;
        for (auto in : ins->inputs()) reads_activation = reads_activation || is_activation(in);
        if (!reads_activation) return;
        if (rewrite_product(ins)) return;
        std::vector<instruction_ref> inputs;
        std::vector<shape> shapes;
        for (auto in : ins->inputs()) {
            inputs.push_back(is_16bit(in) ? as_float32(in) : in);
            shapes.push_back(inputs.back()->get_shape());
        }
        shape result;
        try {
            result = ins->get_operator().compute_shape(shapes);
        } catch (const error&) {
            return;  // an op that wants its 16-bit inputs: it reads them as they are
        }
        const bool widened = is_16bit(ins) && result.type() == dtype::float_type;
        if (!widened && result.type() != ins->get_shape().type()) return;
        auto replacement = m_.insert_instruction(ins, ins->get_operator(), inputs);
        rewritten_.push_back(ins);
        if (widened) {
            float_of_.emplace(&*ins, replacement);
        } else {
            m_.replace_all_uses(ins, replacement);
        }
    }

    // Readers of a rewritten 16-bit activation that were not rewritten
    // themselves (the return, ops left alone) read its float32 counterpart
    // converted back; then the rewritten instructions, unread, go.
    void finish() {
        std::unordered_map<const instruction*, bool> was_rewritten;
        for (auto ins : rewritten_) was_rewritten[&*ins] = true;
        for (auto ins : rewritten_) {
            auto found = float_of_.find(&*ins);
            if (found == float_of_.end()) continue;
            std::vector<instruction_ref> readers;
            for (auto u : ins->outputs())
                if (!was_rewritten.count(&*u)) readers.push_back(u);
            if (readers.empty()) continue;
            auto back = m_.insert_instruction(std::next(found->second), op::convert_to(ins->get_shape().type()),
                                              {found->second});
            for (auto u : readers) m_.replace_input(u, ins, back);
        }
        for (auto it = rewritten_.rbegin(); it != rewritten_.rend(); ++it)
            if ((*it)->outputs().empty()) m_.remove_instruction(*it);
    }

private:
    void rewrite_convert(instruction_ref ins) {
        auto in = ins->inputs().front();
        const dtype to = ins->get_shape().type();
        if (ops::is_16bit_float(to) && in->get_shape().type() == dtype::float_type) {
            float_of_.emplace(&*ins, in);  // the activation before it was rounded
        } else if (to == dtype::float_type && float_of_.count(&*in) > 0) {
            m_.replace_all_uses(ins, float_of_.at(&*in));
            rewritten_.push_back(ins);
        }
    }

    // dot / convolution of an activation with 16-bit literal weights.
    bool rewrite_product(instruction_ref ins) {
        if (ins->name() != "dot" && ins->name() != "convolution") return false;
        if (ins->inputs().size() != 2 || !is_16bit(ins)) return false;
        auto x = ins->inputs()[0], w = ins->inputs()[1];
        if (!is_16bit(w) || !is_constant(w) || !is_activation(x)) return false;
        operation fused = op::fused_dot{};
        if (const auto* conv = ins->get_operator().get_if<op::convolution>()) {
            op::fused_convolution f;
            f.conv = *conv;
            fused = f;
        }
        float_of_.emplace(&*ins, m_.insert_instruction(ins, fused, {as_float32(x), w}));
        rewritten_.push_back(ins);
        return true;
    }

    // Whether `v` is computed from literals only (a literal, or a transposed
    // or reshaped one: GPT-2's output layer reads its tied embedding
    // transposed) by deterministic ops, so that constant propagation makes
    // it a literal. Memoized: each product asks about its weights.
    bool is_constant(instruction_ref v) {
        auto known = constant_.find(&*v);
        if (known != constant_.end()) return known->second;
        return constant_.emplace(&*v, match::is_constant_instruction(*v)).first->second;
    }

    // Whether `ins` is known only at run time: a parameter, or computed from
    // one (instructions are seen in module order, inputs first).
    void note_run_time(instruction_ref ins) {
        bool run_time = ins->is_param();
        for (auto in : ins->inputs()) run_time = run_time || run_time_.count(&*in) > 0;
        if (run_time) run_time_.insert(&*ins);
    }

    // A 16-bit value computed at run time (or given: a parameter).
    bool is_activation(instruction_ref v) const {
        return float_of_.count(&*v) > 0 || (is_16bit(v) && run_time_.count(&*v) > 0);
    }

    // The float32 form of 16-bit `v`: its counterpart, or a convert of it
    // (a parameter, a literal, a value computed from constants).
    instruction_ref as_float32(instruction_ref v) {
        auto found = float_of_.find(&*v);
        if (found != float_of_.end()) return found->second;
        auto widened = m_.insert_instruction(std::next(v), op::convert_to(dtype::float_type), {v});
        float_of_.emplace(&*v, widened);
        return widened;
    }

    module& m_;
    std::unordered_map<const instruction*, instruction_ref> float_of_;
    std::vector<instruction_ref> rewritten_;  // in module order
    std::unordered_map<const instruction*, bool> constant_;
    std::unordered_set<const instruction*> run_time_;
};

}  // namespace

void compute_16bit_in_float32::apply(module& m) const {
    std::vector<instruction_ref> order;
    for (auto it = m.begin(); it != m.end(); ++it) order.push_back(it);
    float32_rewriter rewriter(m);
    for (auto ins : order) rewriter.rewrite(ins);
    rewriter.finish();
}

}  // namespace kiln
