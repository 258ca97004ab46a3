#include "targets/cpu/kernels/pooling/pooling_algorithms.hpp"

namespace kiln {

std::span<const kernel_algorithm> pooling_algorithms() {
    static const kernel_algorithm algorithms[] = {
        onednn_average_pooling,
        max_pooling_avx512,
        max_pooling,
        onednn_int8_max_pooling,
    };
    return algorithms;
}

}  // namespace kiln
