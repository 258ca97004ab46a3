#pragma once
// A pass rewrites a module in place. A target's pipeline is a plain list.
#include <memory>
#include <string>
#include <vector>

#include "kiln/module.hpp"

namespace kiln {

class pass {
public:
    virtual ~pass() = default;
    virtual std::string name() const = 0;
    virtual void apply(module& m) const = 0;
};

using pass_list = std::vector<std::shared_ptr<const pass>>;

struct compile_options;

// The pass names that options.disabled_passes and KILN_DISABLE_PASSES
// (comma-separated) disable.
std::vector<std::string> disabled_pass_names(const compile_options& options);

// Runs `passes` over `m` in order, honouring options.trace_passes,
// options.disabled_passes and the KILN_TRACE_PASSES / KILN_DISABLE_PASSES
// environment variables; verifies the module after each pass when
// options.verify_passes is set.
void run_passes(module& m, const pass_list& passes, const compile_options& options);

}  // namespace kiln
