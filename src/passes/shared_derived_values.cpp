// See shared_derived_values.hpp.
#include "passes/shared_derived_values.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace kiln {

namespace {

// A derived buffer, held weakly: it lives as long as the programs using it.
// The source's owner, held weakly too, tells a buffer at a reused address
// from the one the value was derived from.
struct derived_entry {
    std::weak_ptr<void> source_owner;
    std::weak_ptr<void> owner;
    shape value_shape;
    std::byte* data = nullptr;
};

using derived_key = std::tuple<const std::byte*, std::string, std::string>;

bool same_owner(const std::shared_ptr<void>& a, const std::shared_ptr<void>& b) {
    return !a.owner_before(b) && !b.owner_before(a);
}

std::mutex& cache_mutex() {
    static std::mutex m;
    return m;
}

std::map<derived_key, derived_entry>& cache() {
    static std::map<derived_key, derived_entry> entries;
    return entries;
}

}  // namespace

argument shared_derived_value(const argument& source, const std::string& derivation,
                              const std::function<argument()>& derive) {
    // Only a buffer with an owner can be told apart from a later one at its address.
    if (!source.owns_memory()) return derive();
    const derived_key key{source.data(), to_string(source.get_shape()), derivation};
    {
        const std::lock_guard<std::mutex> lock(cache_mutex());
        auto found = cache().find(key);
        if (found != cache().end()) {
            const derived_entry& e = found->second;
            auto owner = e.owner.lock();
            if (owner && same_owner(e.source_owner.lock(), source.owner()))
                return argument(e.value_shape, std::move(owner), e.data);
        }
    }
    argument value = derive();
    if (!value.owns_memory() || !value.get_shape().standard()) return value;
    const std::lock_guard<std::mutex> lock(cache_mutex());
    // Entries whose buffers are gone go now, so the cache stays as small as what is in use.
    for (auto it = cache().begin(); it != cache().end();)
        it = it->second.owner.expired() || it->second.source_owner.expired() ? cache().erase(it) : std::next(it);
    cache()[key] = derived_entry{source.owner(), value.owner(), value.get_shape(), value.data()};
    return value;
}

}  // namespace kiln
