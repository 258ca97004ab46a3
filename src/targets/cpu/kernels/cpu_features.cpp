// What the CPU running us supports, asked once.
#include "targets/cpu/kernels/cpu_features.hpp"

namespace kiln::avx2 {

bool supported() {
    static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return yes;
}

}  // namespace kiln::avx2
