#pragma once
// The gpu target on a host-backed device (no CUDA needed) and compiling for it,
// shared by the tests of the gpu target's plan and of its stream handling.
#include <memory>

#include "kiln/program.hpp"
#include "targets/gpu/gpu_target.hpp"
#include "targets/gpu/host_backed_device.hpp"

namespace kiln::test {

struct host_backed_gpu {
    std::shared_ptr<host_backed_device> device = std::make_shared<host_backed_device>();
    gpu_target target{device};
};

// `p` compiled for `t` with the pass verifier on.
inline program compiled_on(const program& p, const target& t, bool offload_copy = true) {
    program copy = p;
    compile_options options;
    options.verify_passes = true;
    options.offload_copy = offload_copy;
    copy.compile(t, options);
    return copy;
}

}  // namespace kiln::test
