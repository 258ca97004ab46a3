// See shared_derived_values.hpp.
#include "passes/shared_derived_values.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>

namespace kiln {

namespace {

struct entry {
    std::weak_ptr<void> owner;
    shape value_shape;
    std::byte* data = nullptr;
    std::vector<std::weak_ptr<void>> sources;

    bool alive() const {
        return !owner.expired() &&
               std::none_of(sources.begin(), sources.end(), [](const std::weak_ptr<void>& w) { return w.expired(); });
    }
};

struct table {
    std::mutex mutex;
    std::map<std::string, entry> by_key;
    // Expired entries are dropped when the table outgrows this.
    std::size_t prune_above = 256;
};

table& values_in_this_process() {
    static table t;
    return t;
}

}  // namespace

std::optional<argument> find_shared_derived_value(const std::string& key) {
    table& t = values_in_this_process();
    const std::lock_guard<std::mutex> lock(t.mutex);
    auto found = t.by_key.find(key);
    if (found == t.by_key.end()) return std::nullopt;
    auto owner = found->second.owner.lock();
    if (owner == nullptr || !found->second.alive()) {
        t.by_key.erase(found);
        return std::nullopt;
    }
    return argument(found->second.value_shape, std::move(owner), found->second.data);
}

void share_derived_value(const std::string& key, const argument& value, std::vector<std::weak_ptr<void>> sources) {
    if (key.empty() || !value.owns_memory()) return;
    table& t = values_in_this_process();
    const std::lock_guard<std::mutex> lock(t.mutex);
    t.by_key.insert_or_assign(key, entry{value.owner(), value.get_shape(), value.data(), std::move(sources)});
    if (t.by_key.size() <= t.prune_above) return;
    // Entries whose value or sources are gone (the programs that held them were freed).
    for (auto it = t.by_key.begin(); it != t.by_key.end();)
        it = it->second.alive() ? std::next(it) : t.by_key.erase(it);
    t.prune_above = 2 * t.by_key.size() + 256;
}

argument shared_derived_value(const argument& source, const std::string& derivation,
                              const std::function<argument()>& derive) {
    // Only a buffer with an owner can be told apart from a later one at its address.
    if (!source.owns_memory()) return derive();
    std::ostringstream key;
    key << "derived " << derivation << " of " << static_cast<const void*>(source.data()) << " " << source.get_shape();
    if (auto shared = find_shared_derived_value(key.str())) return *shared;
    argument value = derive();
    share_derived_value(key.str(), value, {source.owner()});
    return value;
}

}  // namespace kiln
