#pragma once
// Laying out several buffers in one kernel's scratch (cpu_kernel.hpp): each
// buffer's size rounded up so that the next one starts aligned.
#include <cstddef>

#include "kiln/argument.hpp"

namespace kiln {

// `bytes` rounded up to a multiple of buffer_alignment (64).
constexpr std::size_t scratch_aligned(std::size_t bytes) {
    return (bytes + buffer_alignment - 1) / buffer_alignment * buffer_alignment;
}

}  // namespace kiln
