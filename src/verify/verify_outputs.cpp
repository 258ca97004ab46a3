// Comparing a compiled program's outputs with the reference interpreter's.
#include <algorithm>
#include <sstream>

#include "kiln/verify.hpp"
#include "verify/float64_reference.hpp"
#include "targets/ref/ref_target.hpp"

namespace kiln {

bool output_report::passed() const {
    for (std::size_t i = 0; i < outputs.size(); ++i)
        if (!outputs[i].ok() && !(outputs[i].same_shape && i < float64.size() && float64[i].accepts())) return false;
    return true;
}

namespace {

bool judged_in_float64(const value_comparison& c) {
    return c.same_shape && c.mismatches > 0 && !c.got_shape.is_tuple() && is_floating(c.got_shape.type());
}

// Judges each float output that differs from ref against `reference`
// evaluated in float64 (float64_judgement).
void judge_in_float64(output_report& r, const std::vector<argument>& got, const std::vector<argument>& expected,
                      const module& reference, const parameter_map& inputs) {
    r.float64.resize(r.outputs.size());
    if (std::none_of(r.outputs.begin(), r.outputs.end(), judged_in_float64)) return;
    std::vector<argument> exact;
    std::string unavailable;
    try {
        exact = evaluate_module(*widened_to_float64(reference), inputs);
    } catch (const std::exception& e) {
        unavailable = e.what();
    }
    for (std::size_t i = 0; i < r.outputs.size(); ++i) {
        if (!judged_in_float64(r.outputs[i])) continue;
        if (!unavailable.empty() || i >= exact.size()) {
            r.float64[i].unavailable = unavailable.empty() ? "no float64 result" : unavailable;
            continue;
        }
        r.float64[i] = judge_against_float64(got[i], expected[i], exact[i], r.tol);
    }
}

}  // namespace

output_report verify_outputs(const program& compiled, const module& reference, const parameter_map& inputs,
                             const tolerance& tol) {
    if (!compiled.is_compiled()) fail("verify: the program must be compiled first");
    output_report r;
    r.target = compiled.target_name();
    r.tol = tol;
    // The target first: eval checks the inputs before the interpreter sees them.
    auto got = compiled.eval(inputs);
    auto expected = evaluate_module(reference, check_inputs(reference, inputs));
    if (got.size() != expected.size())
        fail(error_kind::runtime, "verify: target '" + r.target + "' returned " + std::to_string(got.size()) +
                                      " outputs, ref " + std::to_string(expected.size()));
    for (std::size_t i = 0; i < got.size(); ++i) r.outputs.push_back(compare_values(got[i], expected[i], tol));
    judge_in_float64(r, got, expected, reference, check_inputs(reference, inputs));
    return r;
}

namespace {

std::string describe_judgement(const float64_judgement& j, const std::string& target) {
    std::ostringstream os;
    os.precision(3);
    if (!j.unavailable.empty()) return "  no float64 evaluation to judge it against: " + j.unavailable + "\n";
    if (!j.evaluated) return "";
    os << "  against the float64 evaluation of the same model, on those " << j.judged << " elements: " << target
       << " is at most " << j.worst_target_error << " away, ref's float32 result " << j.worst_ref_error << "; ";
    if (j.accepts())
        os << "each is farther than ref's by no more than the tolerance: accepted as float32 rounding\n";
    else
        os << j.rejected << " are farther than ref's beyond the tolerance (first at index " << j.first_rejected
           << "): a real mismatch\n";
    return os.str();
}

}  // namespace

std::string format_output_report(const output_report& r) {
    std::ostringstream os;
    for (std::size_t i = 0; i < r.outputs.size(); ++i) {
        os << "output " << i << ": " << describe(r.outputs[i]) << "\n";
        if (i < r.float64.size()) os << describe_judgement(r.float64[i], r.target);
    }
    os << "verify " << r.target << " against ref (rtol " << r.tol.rtol << ", atol " << r.tol.atol
       << "): " << (r.passed() ? "PASSED" : "FAILED") << "\n";
    return os.str();
}

}  // namespace kiln
