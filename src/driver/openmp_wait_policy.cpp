#include "driver/openmp_wait_policy.hpp"

#include <cstdlib>
#include <unistd.h>

namespace kiln::driver {

void reexec_with_passive_openmp_wait(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
    if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
    execv("/proc/self/exe", argv);
}

}  // namespace kiln::driver
