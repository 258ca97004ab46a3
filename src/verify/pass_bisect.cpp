// Finding the first pass of a target's pipeline that changes a model's
// numbers (see bisect_passes in kiln/verify.hpp).
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "kiln/verifier.hpp"
#include "kiln/verify.hpp"
#include "targets/ref/ref_target.hpp"

namespace kiln {

namespace {

std::vector<value_comparison> compare_outputs(const std::vector<argument>& got, const std::vector<argument>& baseline,
                                              const tolerance& tol) {
    if (got.size() != baseline.size())
        fail(error_kind::runtime, "it returns " + std::to_string(got.size()) + " outputs, the unoptimized module " +
                                      std::to_string(baseline.size()));
    std::vector<value_comparison> out;
    for (std::size_t i = 0; i < got.size(); ++i) out.push_back(compare_values(got[i], baseline[i], tol));
    return out;
}

// Runs `check` and records what it throws as the stage's failure: a broken
// pass may raise anything, and the report must still name it.
template <class F>
void run_stage(bisect_stage& s, F&& check) {
    try {
        check();
    } catch (const std::exception& e) {
        s.failure = e.what();
    }
}

std::string stage_label(const bisect_report& r, const bisect_stage& s) {
    if (s.lowering) return "lowered for " + r.target;
    return std::to_string(s.position) + "/" + std::to_string(r.pipeline.size()) + " " + s.pass;
}

// The worst errors over all outputs, for a stage that keeps the numbers.
std::string worst_errors(const std::vector<value_comparison>& outputs) {
    double abs_err = 0, rel_err = 0;
    for (const auto& o : outputs) {
        abs_err = std::max(abs_err, o.max_abs_error);
        rel_err = std::max(rel_err, o.max_rel_error);
    }
    std::ostringstream os;
    os.precision(3);
    os << "max abs error " << abs_err << ", max rel error " << rel_err;
    return os.str();
}

// "output 2: <description>" for the first output out of tolerance.
std::string first_bad_output(const bisect_stage& s) {
    for (std::size_t i = 0; i < s.outputs.size(); ++i)
        if (!s.outputs[i].ok()) return "output " + std::to_string(i) + ": " + describe(s.outputs[i]);
    return "";
}

}  // namespace

bool bisect_stage::ok() const {
    if (!failure.empty()) return false;
    for (const auto& o : outputs)
        if (!o.ok()) return false;
    return true;
}

bool bisect_report::passed() const {
    return first_failure() == nullptr;
}

const bisect_stage* bisect_report::first_failure() const {
    for (const auto& s : stages)
        if (!s.ok()) return &s;
    return nullptr;
}

bisect_report bisect_passes(const program& uncompiled, const target& t, const parameter_map& inputs,
                            const tolerance& tol, const compile_options& options) {
    if (uncompiled.is_compiled())
        fail("bisect: the program is already compiled for target '" + uncompiled.target_name() +
             "', so its passes have run; bisect the model before compiling it");
    const module& original = *uncompiled.get_main_module();
    verify_program(uncompiled, "before bisect");
    const parameter_map checked = check_inputs(original, inputs);
    const std::vector<argument> baseline = evaluate_module(original, checked);

    bisect_report r;
    r.target = t.name();
    r.tol = tol;
    const pass_list passes = t.get_passes(options);
    for (const auto& p : passes) r.pipeline.push_back(p->name());
    const std::vector<std::string> disabled = disabled_pass_names(options);
    compile_options one_pass = options;
    one_pass.verify_passes = true;  // a pass that breaks the IR is named by the verifier

    // A copy of the program, so the main module's module arguments point at
    // submodules that are optimized along with it, as program::compile does.
    program work = uncompiled;
    module& m = *work.get_main_module();
    for (std::size_t i = 0; i < passes.size(); ++i) {
        bisect_stage s;
        s.position = i + 1;
        s.pass = passes[i]->name();
        s.disabled = std::find(disabled.begin(), disabled.end(), s.pass) != disabled.end();
        if (!s.disabled)
            run_stage(s, [&] {
                for (const module* sub : m.submodules())
                    run_passes(*work.get_module(sub->name()), {passes[i]}, one_pass);
                run_passes(m, {passes[i]}, one_pass);
                s.outputs = compare_outputs(evaluate_module(m, checked), baseline, tol);
            });
        r.stages.push_back(std::move(s));
        if (!r.stages.back().ok()) return r;
    }

    bisect_stage lowered;
    lowered.position = passes.size() + 1;
    lowered.lowering = true;
    run_stage(lowered, [&] {
        auto exe = t.lower(m, options);
        std::vector<argument> got;
        for (const auto& a : exe->run(checked)) got.push_back(t.copy_from(a));
        lowered.outputs = compare_outputs(got, baseline, tol);
    });
    r.stages.push_back(std::move(lowered));
    return r;
}

std::string format_bisect_report(const bisect_report& r) {
    std::ostringstream os;
    os << "bisect: the " << r.pipeline.size() << " passes of target " << r.target
       << " one at a time, each result on ref against the unoptimized module on ref (rtol " << r.tol.rtol << ", atol "
       << r.tol.atol << ")\n";
    for (const auto& s : r.stages) {
        char label[128];
        std::snprintf(label, sizeof label, "  %-40s ", stage_label(r, s).c_str());
        os << label;
        if (s.disabled)
            os << "disabled\n";
        else if (!s.failure.empty())
            os << "FAILED: " << s.failure << "\n";
        else if (!s.ok())
            os << "BREAKS " << first_bad_output(s) << "\n";
        else
            os << "ok (" << worst_errors(s.outputs) << ")\n";
    }
    const bisect_stage* bad = r.first_failure();
    if (bad == nullptr) {
        os << "every pass and the lowered program keep the numbers\n";
    } else if (bad->lowering) {
        os << "the passes keep the numbers; the lowered program on target " << r.target << " does not"
           << (bad->failure.empty() ? " (" + first_bad_output(*bad) + ")" : "")
           << "; `kiln verify --per-instruction` names the instruction\n";
    } else {
        os << "first pass that breaks the numbers: " << bad->pass << " (pass " << bad->position << " of "
           << r.pipeline.size() << ")";
        if (bad->failure.empty()) os << "; first diverging " << first_bad_output(*bad);
        os << "\n";
    }
    os << "verify " << r.target << " by bisection: " << (r.passed() ? "PASSED" : "FAILED") << "\n";
    return os.str();
}

}  // namespace kiln
