#include "driver/openmp_wait_policy.hpp"

#include <cstdlib>
#include <unistd.h>

namespace kiln::driver {

namespace {

constexpr const char* spin_count = "300000";  // why: python/kiln/_openmp_wait_policy.py

}  // namespace

void reexec_with_kilns_openmp_spin(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
    if (setenv("GOMP_SPINCOUNT", spin_count, 1) != 0) return;
    execv("/proc/self/exe", argv);
}

}  // namespace kiln::driver
