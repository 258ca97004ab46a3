#include "targets/cpu/kernels/copy/widen_to_float32.hpp"

#include <cstdint>

#include "kiln/errors.hpp"
#include "kiln/float16.hpp"
#include "targets/cpu/kernels/copy/widen_16bit_avx2.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"

namespace kiln {

namespace {

template <class T>
void widen_portable(const void* in, float* out, std::size_t n) {
    const T* x = static_cast<const T*>(in);
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i]);
}

void widen_half_avx2(const void* in, float* out, std::size_t n) {
    avx2::widen_half(static_cast<const std::uint16_t*>(in), out, n);
}
void widen_bfloat16_avx2(const void* in, float* out, std::size_t n) {
    avx2::widen_bfloat16(static_cast<const std::uint16_t*>(in), out, n);
}

}  // namespace

widen_function widen_to_float32_function(dtype type) {
    const bool vector = avx2::supported();
    if (type == dtype::half_type) return vector && avx2::f16c_supported() ? widen_half_avx2 : widen_portable<half>;
    if (type == dtype::bf16_type) return vector ? widen_bfloat16_avx2 : widen_portable<bfloat16>;
    if (type == dtype::int8_type) return widen_portable<std::int8_t>;
    fail(error_kind::runtime, "widen_to_float32_function: " + to_string(type) + " is not a narrow weight type");
}

}  // namespace kiln
