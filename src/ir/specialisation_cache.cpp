#include "ir/specialisation_cache.hpp"

#include <algorithm>

namespace kiln {

void specialisation_cache::pin(const parameter_lens& lens) {
    auto compiled = get(lens);
    std::lock_guard lock(mutex_);
    entries_[lens] = entry{std::move(compiled), true, ++clock_};
}

void specialisation_cache::pin(const parameter_lens& lens, std::shared_ptr<const program> compiled) {
    std::lock_guard lock(mutex_);
    entries_[lens] = entry{std::move(compiled), true, ++clock_};
}

std::shared_ptr<const program> specialisation_cache::get(const parameter_lens& lens) {
    {
        std::lock_guard lock(mutex_);
        if (auto it = entries_.find(lens); it != entries_.end()) {
            it->second.last_use = ++clock_;
            return it->second.compiled;
        }
        for (const auto& g : generics_)
            if (!g.accepts || g.accepts(lens)) return g.compiled;
    }
    auto compiled = make_(lens);
    std::lock_guard lock(mutex_);
    // Another thread may have compiled the same extents meanwhile: keep one.
    auto [it, inserted] = entries_.try_emplace(lens, entry{std::move(compiled), false, 0});
    it->second.last_use = ++clock_;
    auto result = it->second.compiled;
    if (inserted) evict_beyond_capacity();
    return result;
}

std::size_t specialisation_cache::size() const {
    std::lock_guard lock(mutex_);
    return entries_.size() + generics_.size();
}

void specialisation_cache::evict_beyond_capacity() {
    auto unpinned = [&] {
        return static_cast<std::size_t>(
            std::count_if(entries_.begin(), entries_.end(), [](const auto& e) { return !e.second.pinned; }));
    };
    while (unpinned() > capacity_) {
        auto oldest = entries_.end();
        for (auto it = entries_.begin(); it != entries_.end(); ++it)
            if (!it->second.pinned && (oldest == entries_.end() || it->second.last_use < oldest->second.last_use))
                oldest = it;
        entries_.erase(oldest);
    }
}

}  // namespace kiln
