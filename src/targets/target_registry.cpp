// The targets this build has, listed explicitly.
#include <memory>
#include <mutex>

#include "targets/cpu/cpu_target.hpp"
#include "targets/ref/ref_target.hpp"
#ifdef KILN_GPU
#include "targets/gpu/cuda/cuda_device.hpp"
#include "targets/gpu/gpu_target.hpp"
#endif

namespace kiln {

namespace {
const std::vector<const target*>& all_targets() {
    static const ref_target ref;
    static const cpu_target cpu;
    static const std::vector<const target*> targets = {&ref, &cpu};
    return targets;
}

#ifdef KILN_GPU
// Made on first use, so that a process that never asks for the GPU never
// touches the CUDA driver; a machine without one gets the driver's reason.
const target& gpu() {
    static std::once_flag once;
    static std::unique_ptr<gpu_target> made;
    std::call_once(once, [] { made = std::make_unique<gpu_target>(std::make_shared<cuda_device>()); });
    return *made;
}
#endif
}  // namespace

const target& get_target(const std::string& name) {
    for (const target* t : all_targets())
        if (t->name() == name) return *t;
#ifdef KILN_GPU
    if (name == "gpu") return gpu();
#endif
    std::string known;
    for (const auto& n : get_target_names()) known += (known.empty() ? "" : ", ") + n;
    fail(error_kind::not_implemented, "unknown target '" + name + "'; this build of Kiln has: " + known);
}

std::vector<std::string> get_target_names() {
    std::vector<std::string> names;
    for (const target* t : all_targets()) names.push_back(t->name());
#ifdef KILN_GPU
    names.push_back("gpu");
#endif
    return names;
}

}  // namespace kiln
