#pragma once
// Small builders shared by the C++ tests.
#include <vector>

#include "kiln/kiln.hpp"

namespace kiln::test {

inline argument make_argument(const shape& s, const std::vector<float>& values) {
    literal lit(s, values);
    return lit.get_argument().copy();
}

// Runs `p` (compiled for `target_name` on a copy) and returns the outputs.
inline std::vector<argument> run_on(const program& p, const std::string& target_name, const parameter_map& inputs) {
    program copy = p;
    compile_options options;
    options.verify_passes = true;
    copy.compile(get_target(target_name), options);
    return copy.eval(inputs);
}

}  // namespace kiln::test
