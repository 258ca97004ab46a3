#pragma once
// A kernel run on fewer OpenMP threads than the program's: a layer too
// small to split pays more for waking and joining the second thread (and,
// on a shared machine, for waiting until both are scheduled) than it gains.
// oneDNN sizes a primitive's parallel work for the thread count current
// when the primitive is created, so `build` runs under that count too.
#include <functional>
#include <memory>

#include "targets/cpu/kernels/cpu_kernel.hpp"

namespace kiln {

// Builds a kernel with `build` while OpenMP's thread count is `threads`,
// and returns one that runs it with that count (nullptr when `build` gives
// nullptr).
std::shared_ptr<const cpu_kernel> on_threads(int threads,
                                             const std::function<std::shared_ptr<const cpu_kernel>()>& build);

}  // namespace kiln
