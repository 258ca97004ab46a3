#include "targets/cpu/kernels/kernel_algorithm.hpp"

namespace kiln {

chosen_kernel choose_kernel(std::span<const kernel_algorithm> algorithms, const kernel_request& r) {
    const kernel_builder inner = [algorithms](const kernel_request& q) { return choose_kernel(algorithms, q).kernel; };
    for (const auto& algorithm : algorithms)
        if (algorithm.eligible(r))
            if (auto kernel = algorithm.build(r, inner)) return {std::move(kernel), algorithm.name};
    return {};
}

}  // namespace kiln
