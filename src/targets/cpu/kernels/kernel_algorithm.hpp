#pragma once
// An ordered list of algorithms is how the cpu target picks a kernel for an
// op family with several ways to run it (convolution: Winograd, pairwise
// sums, im2col, channel split, oneDNN). Each entry has a name (what `kiln
// perf` and `kiln read` show), a cheap eligibility check, and a builder; the
// first eligible entry whose builder succeeds wins.
#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "targets/cpu/kernels/cpu_kernel.hpp"

namespace kiln {

// Builds the kernel for a request, or returns nullptr when it cannot.
using kernel_builder = std::function<std::shared_ptr<const cpu_kernel>(const kernel_request&)>;

struct kernel_algorithm {
    std::string_view name;
    // Whether the algorithm runs this instruction (dtypes, layouts, shapes,
    // constant weights); no packing or other work.
    bool (*eligible)(const kernel_request& r);
    // Builds the kernel for an eligible instruction. `inner` chooses from the
    // same list for an instruction this algorithm wraps (im2col's 1 x 1
    // convolution over the columns, channel split's per-channel ones). May
    // still return nullptr (oneDNN has no implementation for the shapes);
    // the next eligible entry is then tried.
    std::shared_ptr<const cpu_kernel> (*build)(const kernel_request& r, const kernel_builder& inner);
};

struct chosen_kernel {
    std::shared_ptr<const cpu_kernel> kernel;  // null when no entry builds one
    std::string_view algorithm;
};

chosen_kernel choose_kernel(std::span<const kernel_algorithm> algorithms, const kernel_request& r);

}  // namespace kiln
