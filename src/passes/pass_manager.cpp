#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "kiln/compile_options.hpp"
#include "kiln/pass.hpp"
#include "kiln/verifier.hpp"

namespace kiln {

namespace {

#ifdef NDEBUG
constexpr bool debug_build = false;
#else
constexpr bool debug_build = true;
#endif

std::vector<std::string> split_names(const char* text) {
    std::vector<std::string> names;
    if (text == nullptr) return names;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ','))
        if (!item.empty()) names.push_back(item);
    return names;
}

bool env_flag(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && std::string(v) != "" && std::string(v) != "0";
}

}  // namespace

std::vector<std::string> disabled_pass_names(const compile_options& options) {
    std::vector<std::string> disabled = options.disabled_passes;
    for (auto& n : split_names(std::getenv("KILN_DISABLE_PASSES"))) disabled.push_back(n);
    return disabled;
}

void run_passes(module& m, const pass_list& passes, const compile_options& options) {
    bool trace = options.trace_passes || env_flag("KILN_TRACE_PASSES");
    const std::vector<std::string> disabled = disabled_pass_names(options);

    for (const auto& p : passes) {
        const std::string name = p->name();
        if (std::find(disabled.begin(), disabled.end(), name) != disabled.end()) {
            if (trace) std::cerr << "pass " << name << ": disabled\n";
            continue;
        }
        auto start = std::chrono::steady_clock::now();
        p->apply(m);
        auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        if (options.verify_passes || debug_build) verify_module(m, "after pass '" + name + "'");
        if (trace) std::cerr << "pass " << name << ": " << ms << " ms\n" << m << "\n";
    }
}

}  // namespace kiln
