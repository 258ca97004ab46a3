// The targets this build has, listed explicitly.
#include "targets/cpu/cpu_target.hpp"
#include "targets/ref/ref_target.hpp"

namespace kiln {

namespace {
const std::vector<const target*>& all_targets() {
    static const ref_target ref;
    static const cpu_target cpu;
    static const std::vector<const target*> targets = {&ref, &cpu};
    return targets;
}
}  // namespace

const target& get_target(const std::string& name) {
    for (const target* t : all_targets())
        if (t->name() == name) return *t;
    std::string known;
    for (const auto& n : get_target_names()) known += (known.empty() ? "" : ", ") + n;
    fail(error_kind::not_implemented, "unknown target '" + name + "'; this build of Kiln has: " + known);
}

std::vector<std::string> get_target_names() {
    std::vector<std::string> names;
    for (const target* t : all_targets()) names.push_back(t->name());
    return names;
}

}  // namespace kiln
