// Comparing a compiled program's outputs with the reference interpreter's.
#include <sstream>

#include "kiln/verify.hpp"
#include "targets/ref/ref_target.hpp"

namespace kiln {

bool output_report::passed() const {
    for (const auto& o : outputs)
        if (!o.ok()) return false;
    return true;
}

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
    return r;
}

std::string format_output_report(const output_report& r) {
    std::ostringstream os;
    for (std::size_t i = 0; i < r.outputs.size(); ++i) os << "output " << i << ": " << describe(r.outputs[i]) << "\n";
    os << "verify " << r.target << " against ref (rtol " << r.tol.rtol << ", atol " << r.tol.atol
       << "): " << (r.passed() ? "PASSED" : "FAILED") << "\n";
    return os.str();
}

}  // namespace kiln
