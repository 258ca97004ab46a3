#pragma once
// Which kernel runs an instruction on the cpu target (kernel_registry.cpp).
#include <memory>
#include <string_view>

#include "targets/cpu/kernels/kernel_algorithm.hpp"

namespace kiln {

class kernel_tuner;

// How the algorithm is picked from the instruction's family list.
struct kernel_selection {
    // The algorithm a loaded compiled file recorded; when it is unknown, not
    // eligible or does not build, the default rule (the caller warns). Empty: none.
    std::string_view pinned;
    // Times the eligible algorithms (exhaustive_tune); null: the default rule.
    kernel_tuner* tuner = nullptr;
};

// The fast kernel for the instruction if the cpu target has one, otherwise
// the op's reference compute (algorithm "reference").
chosen_kernel make_cpu_kernel(const kernel_request& request, const kernel_selection& how = {});

}  // namespace kiln
