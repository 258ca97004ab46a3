#pragma once
// Compiling for the CUDA gpu target and comparing with ref.
#include <gtest/gtest.h>

#include "shared_test_programs.hpp"

namespace kiln::test {

inline program compiled_for_gpu(const program& p, bool offload_copy = true) {
    program copy = p;
    compile_options options;
    options.verify_passes = true;
    options.offload_copy = offload_copy;
    copy.compile(get_target("gpu"), options);
    return copy;
}

// Compiles `p` for the gpu (full pipeline) and compares three runs on each
// of two inputs with ref on the unoptimized program: the first run of a
// context runs the kernels one by one, later ones replay the recorded graph.
inline void expect_gpu_matches_ref(const program& p, double tol = 1e-5, const std::string& label = "") {
    program compiled = compiled_for_gpu(p);
    for (unsigned long seed : {3UL, 11UL}) {
        auto inputs = random_inputs(*p.get_main_module(), seed);
        auto want = evaluate_module(*p.get_main_module(), inputs);
        for (int run = 0; run < 3; ++run)
            expect_close(compiled.eval(inputs), want, tol, label + " seed " + std::to_string(seed) + " run " +
                                                                std::to_string(run));
    }
}

// The algorithm the gpu chose for the first instruction of kind `op`.
inline std::string gpu_algorithm(const program& compiled, const std::string& op) {
    for (const auto& c : compiled.kernel_choices())
        if (c.op == op) return c.algorithm;
    return "(no " + op + ")";
}

}  // namespace kiln::test
