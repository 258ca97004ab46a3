#include "runtime/memory_planner.hpp"

#include <algorithm>
#include <numeric>

namespace kiln {

namespace {
bool lifetimes_overlap(const buffer_lifetime& a, const buffer_lifetime& b) {
    return a.first_step <= b.last_step && b.first_step <= a.last_step;
}
}  // namespace

memory_plan plan_memory(const std::vector<buffer_lifetime>& buffers, std::size_t alignment) {
    // Largest buffers first, each at the lowest offset that fits between the
    // buffers already placed whose lifetimes overlap its own.
    std::vector<std::size_t> order(buffers.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return buffers[a].bytes > buffers[b].bytes; });

    memory_plan plan;
    plan.offsets.assign(buffers.size(), 0);
    std::vector<std::size_t> placed;
    struct range {
        std::size_t begin, end;
    };
    std::vector<range> busy;
    for (std::size_t b : order) {
        std::size_t size = (buffers[b].bytes + alignment - 1) / alignment * alignment;
        busy.clear();
        for (std::size_t p : placed)
            if (lifetimes_overlap(buffers[b], buffers[p])) {
                std::size_t psize = (buffers[p].bytes + alignment - 1) / alignment * alignment;
                busy.push_back({plan.offsets[p], plan.offsets[p] + psize});
            }
        std::sort(busy.begin(), busy.end(), [](const range& x, const range& y) { return x.begin < y.begin; });
        std::size_t offset = 0;
        for (const auto& r : busy) {
            if (offset + size <= r.begin) break;
            offset = std::max(offset, r.end);
        }
        plan.offsets[b] = offset;
        plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
        placed.push_back(b);
    }
    return plan;
}

bool plan_is_valid(const std::vector<buffer_lifetime>& buffers, const memory_plan& plan) {
    for (std::size_t i = 0; i < buffers.size(); ++i) {
        if (plan.offsets[i] + buffers[i].bytes > plan.arena_bytes) return false;
        for (std::size_t j = i + 1; j < buffers.size(); ++j) {
            if (!lifetimes_overlap(buffers[i], buffers[j]) || buffers[i].bytes == 0 || buffers[j].bytes == 0) continue;
            bool disjoint = plan.offsets[i] + buffers[i].bytes <= plan.offsets[j] ||
                            plan.offsets[j] + buffers[j].bytes <= plan.offsets[i];
            if (!disjoint) return false;
        }
    }
    return true;
}

}  // namespace kiln
