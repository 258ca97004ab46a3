#pragma once
// Places buffers with known lifetimes at offsets in one arena so that buffers
// alive at the same time never overlap, keeping the arena small.
#include <cstddef>
#include <vector>

namespace kiln {

struct buffer_lifetime {
    std::size_t bytes = 0;
    std::size_t first_step = 0;  // step that writes the buffer
    std::size_t last_step = 0;   // last step that reads it (inclusive)
};

struct memory_plan {
    std::vector<std::size_t> offsets;  // one per buffer, multiples of the alignment
    std::size_t arena_bytes = 0;       // planned peak
};

memory_plan plan_memory(const std::vector<buffer_lifetime>& buffers, std::size_t alignment = 64);

// True when no two buffers that are alive at the same step share a byte.
bool plan_is_valid(const std::vector<buffer_lifetime>& buffers, const memory_plan& plan);

}  // namespace kiln
