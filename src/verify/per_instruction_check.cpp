// Checking every instruction a target executes against its op's reference
// compute on the same inputs (see verify_per_instruction in kiln/verify.hpp).
#include <algorithm>
#include <sstream>
#include <unordered_map>

#include "kiln/verify.hpp"
#include "targets/ref/ref_target.hpp"

namespace kiln {

namespace {

// The values of the compiled module as the target computed them: step
// outputs copied when they are produced, and values the target did not run
// as a step (parameters, literals, views) computed by ref from those. A value
// is dropped once all its users have been seen, as the target's arena does.
class produced_values {
public:
    produced_values(const module& m, const parameter_map& inputs) : inputs_(inputs) {
        for (const auto& ins : m)
            for (const auto& in : ins.inputs()) ++uses_left_[&*in];
    }

    // The value `ins` had when it was produced.
    argument get(const instruction* ins) {
        if (auto it = values_.find(ins); it != values_.end()) return it->second;
        argument v;
        if (ins->is_param()) {
            v = inputs_.at(ins->param_name());
        } else if (ins->is_literal()) {
            v = ins->get_literal().get_argument();
        } else {
            std::vector<argument> args;
            for (const auto& in : ins->inputs()) args.push_back(get(&*in));
            v = evaluate_instruction(*ins, args);
        }
        record(ins, v);
        return v;
    }

    // Remembers the target's value of `ins`; its inputs have one user fewer.
    void record(const instruction* ins, const argument& v) {
        values_[ins] = v;
        for (const auto& in : ins->inputs())
            if (--uses_left_[&*in] == 0) values_.erase(&*in);
    }

    bool has(const instruction* ins) const { return values_.count(ins) > 0; }

private:
    const parameter_map& inputs_;
    std::unordered_map<const instruction*, argument> values_;
    std::unordered_map<const instruction*, std::size_t> uses_left_;
};

class instruction_checker {
public:
    instruction_checker(const program& p, const parameter_map& inputs, const tolerance& tol)
        : module_(*p.get_main_module()),
          target_(get_target(p.target_name())),
          tol_(tol),
          produced_(module_, inputs),
          names_(module_.instruction_names()) {
        for (const auto& [ins, name] : names_) by_name_.emplace(name, ins);
    }

    void check(const executed_step& step, per_instruction_report& r) {
        ++r.checked;
        std::vector<argument> args;
        for (const auto& a : step.inputs) args.push_back(target_.copy_from(a));
        argument out = target_.copy_from(step.output);

        auto it = by_name_.find(step.instruction);
        const instruction* ins = it == by_name_.end() ? nullptr : it->second;
        if (ins != nullptr &&
            (ins->inputs().size() != args.size() || ins->get_shape().lens() != out.get_shape().lens() ||
             ins->get_shape().type() != out.get_shape().type()))
            ins = nullptr;  // not the module's instruction of that name: check the step on its own
        if (ins != nullptr && produced_.has(ins)) ins = nullptr;  // executed twice: the first value stands

        if (!check_inputs_unchanged(step, ins, args, out, r)) {
            // A control-flow step is checked as a whole, its modules run by ref.
            argument expected =
                ins != nullptr ? evaluate_instruction(*ins, args) : step.op.evaluate(out.get_shape(), args);
            value_comparison c = compare_values(out, expected, tol_);
            if (!c.ok()) add(r, make_divergence(step, ins, args, out, expected, c, -1));
        }
        // Users compare what they receive with what the target produced here.
        if (ins != nullptr) produced_.record(ins, out.copy());
    }

    void check_outputs(const std::vector<argument>& outputs, per_instruction_report& r) {
        auto ret = std::find_if(module_.begin(), module_.end(), [](const instruction& i) { return i.is_return(); });
        if (ret == module_.end()) return;
        for (std::size_t i = 0; i < outputs.size() && i < ret->inputs().size(); ++i)
            r.outputs.push_back(compare_values(outputs[i], produced_.get(&*ret->inputs()[i]), tol_));
    }

private:
    // True when some input differs from its producer's value (recorded as the divergence).
    bool check_inputs_unchanged(const executed_step& step, const instruction* ins, const std::vector<argument>& args,
                                const argument& out, per_instruction_report& r) {
        if (ins == nullptr) return false;
        for (std::size_t i = 0; i < args.size(); ++i) {
            argument expected = produced_.get(&*ins->inputs()[i]);
            value_comparison c = compare_values(args[i], expected, tol_);
            if (c.ok()) continue;
            instruction_divergence d = make_divergence(step, ins, args, out, expected, c, static_cast<int>(i));
            if (r.divergences.empty()) d.got = args[i].copy();
            add(r, std::move(d));
            return true;
        }
        return false;
    }

    instruction_divergence make_divergence(const executed_step& step, const instruction* ins,
                                           const std::vector<argument>& args, const argument& out,
                                           const argument& expected, const value_comparison& c, int changed_input) {
        instruction_divergence d;
        d.instruction = step.instruction;
        d.op = to_string(step.op);
        if (ins != nullptr)
            for (const auto& in : ins->inputs()) d.input_names.push_back(names_.at(&*in));
        for (const auto& a : args) d.input_shapes.push_back(a.get_shape());
        d.output_shape = out.get_shape();
        d.changed_input = changed_input;
        d.difference = c;
        // Values only for the first divergence: a run where everything diverges must not keep them all.
        if (!first_taken_) {
            for (const auto& a : args) d.inputs.push_back(a.copy());
            d.got = out.copy();
            d.expected = expected.copy();
        }
        return d;
    }

    void add(per_instruction_report& r, instruction_divergence d) {
        first_taken_ = true;
        r.divergences.push_back(std::move(d));
    }

    const module& module_;
    const target& target_;
    tolerance tol_;
    produced_values produced_;
    std::unordered_map<const instruction*, std::string> names_;
    std::unordered_map<std::string, const instruction*> by_name_;
    bool first_taken_ = false;
};

void print_values(std::ostream& os, const std::string& label, const argument& a) {
    os << "    " << label << to_string(a.get_shape().type()) << " " << to_string(a.get_shape().lens()) << " "
       << format_values(a, 8) << "\n";
}

}  // namespace

bool per_instruction_report::passed() const {
    if (!divergences.empty()) return false;
    for (const auto& o : outputs)
        if (!o.ok()) return false;
    return true;
}

per_instruction_report verify_per_instruction(const program& compiled, const parameter_map& inputs,
                                              const tolerance& tol) {
    if (!compiled.is_compiled()) fail("verify per instruction: the program must be compiled first");
    parameter_map checked = check_inputs(*compiled.get_main_module(), inputs);
    per_instruction_report r;
    r.target = compiled.target_name();
    r.tol = tol;
    instruction_checker checker(compiled, checked, tol);
    auto outputs = compiled.eval_observed(checked, [&](const executed_step& step) { checker.check(step, r); });
    checker.check_outputs(outputs, r);
    return r;
}

std::string format_per_instruction_report(const per_instruction_report& r) {
    std::ostringstream os;
    os.precision(3);
    os << "checked " << r.checked << (r.checked == 1 ? " instruction" : " instructions") << " of target " << r.target
       << " against their reference compute"
       << " (rtol " << r.tol.rtol << ", atol " << r.tol.atol << ")\n";
    if (!r.divergences.empty()) {
        const auto& d = r.divergences.front();
        os << "first divergence: " << d.instruction << " = " << d.op;
        if (!d.input_names.empty()) {
            os << "(";
            for (std::size_t i = 0; i < d.input_names.size(); ++i) os << (i ? "," : "") << d.input_names[i];
            os << ")";
        }
        os << " -> " << to_string(d.output_shape) << "\n";
        if (d.changed_input < 0) {
            os << "  its result differs from the op's reference compute on the inputs it received:\n";
        } else {
            auto i = static_cast<std::size_t>(d.changed_input);
            os << "  input " << i << (i < d.input_names.size() ? " (" + d.input_names[i] + ")" : "")
               << " is not the value its producer computed (overwritten in between, or a misplaced view):\n";
        }
        os << "  " << describe(d.difference) << "\n";
        for (std::size_t i = 0; i < d.inputs.size(); ++i) {
            std::string label = "input " + std::to_string(i);
            if (i < d.input_names.size()) label += " (" + d.input_names[i] + ")";
            print_values(os, label + ": ", d.inputs[i]);
        }
        print_values(os, "got:      ", d.got);
        print_values(os, "expected: ", d.expected);
        os << r.divergences.size() << (r.divergences.size() == 1 ? " instruction diverges:" : " instructions diverge:");
        std::size_t shown = 0;
        for (const auto& e : r.divergences) {
            if (shown++ == 10) {
                os << " ...";
                break;
            }
            os << " " << e.instruction << " (" << e.op.substr(0, e.op.find('[')) << ")";
        }
        os << "\n";
    }
    for (std::size_t i = 0; i < r.outputs.size(); ++i)
        if (!r.outputs[i].ok())
            os << "output " << i << " differs from the value of its instruction: " << describe(r.outputs[i]) << "\n";
    os << "verify " << r.target << " per instruction: " << (r.passed() ? "PASSED" : "FAILED") << "\n";
    return os.str();
}

}  // namespace kiln
