#include "targets/cpu/kernels/gelu_arrays.hpp"

#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/pointwise/pointwise_avx2.hpp"
#include "targets/cpu/kernels/vector_math_arrays_avx512.hpp"

namespace kiln {

float_array_function gelu_array(op::post_op_kind kind) {
    const bool erf = kind == op::post_op_kind::gelu_erf;
    if (!erf && kind != op::post_op_kind::gelu_tanh) return nullptr;
    if (avx512::enabled()) return erf ? avx512::gelu_erf_array : avx512::gelu_tanh_array;
    if (avx2::supported()) return erf ? avx2::gelu_erf_array : avx2::gelu_tanh_array;
    return nullptr;
}

}  // namespace kiln
