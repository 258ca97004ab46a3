#pragma once
// Lowers a module to the cpu target's execution plan: one kernel per
// instruction (kernel_registry.hpp), views placed at fixed offsets into
// their roots, intermediates at offsets the memory planner gives in one
// arena, constants handed over to the kernels that pack their own copies.
#include <memory>

#include "kiln/target.hpp"

namespace kiln {

// `threads`: the resolved thread count (openmp_threads.hpp) every kernel is
// built and run for.
std::shared_ptr<executable> build_cpu_plan(const module& m, const compile_options& options, int threads);

}  // namespace kiln
