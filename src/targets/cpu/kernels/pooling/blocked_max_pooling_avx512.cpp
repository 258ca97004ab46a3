// blocked_max_pooling with AVX-512 (blocked_max_pooling_avx512.hpp).
#include "targets/cpu/kernels/pooling/blocked_max_pooling_avx512.hpp"

#include <immintrin.h>

#include <cstddef>
#include <limits>

namespace kiln::avx512 {

namespace {

constexpr std::size_t lanes = 16;

// The taps of a window that fall inside the input along one dimension:
// [first, first + count) of the kernel's taps.
struct tap_range {
    std::size_t first = 0, count = 0;
};

tap_range inside(std::size_t o, std::size_t stride, std::size_t pad, std::size_t dilation, std::size_t kernel,
                 std::size_t extent) {
    const auto start = static_cast<std::ptrdiff_t>(o * stride) - static_cast<std::ptrdiff_t>(pad);
    const auto d = static_cast<std::ptrdiff_t>(dilation);
    tap_range t;
    while (t.first < kernel && start + static_cast<std::ptrdiff_t>(t.first) * d < 0) ++t.first;
    std::size_t last = t.first;
    while (last < kernel && start + static_cast<std::ptrdiff_t>(last) * d < static_cast<std::ptrdiff_t>(extent)) ++last;
    t.count = last - t.first;
    return t;
}

// best = (v > best or v is NaN) ? v : best, lane by lane: a NaN tap wins and,
// since nothing compares greater than it, stays (the portable loop's rule).
// (A max_ps with the NaN taps kept in a mask apart, off this dependency
// chain, measured no faster: the loop waits on memory.)
inline __m512 max_keeping_nan(__m512 best, __m512 v) {
    const __mmask16 take = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_mov_ps(best, take, v);
}

}  // namespace

void blocked_max_pooling(const blocked_max_pooling_args& a, std::size_t first, std::size_t last) {
    const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (std::size_t p = first; p < last; ++p) {
        const float* plane = a.x + p * a.h * a.w * lanes;
        float* out = a.y + p * a.out_h * a.out_w * lanes;
        for (std::size_t oh = 0; oh < a.out_h; ++oh) {
            const tap_range rows = inside(oh, a.stride[0], a.pad_begin[0], a.dilation[0], a.kernel[0], a.h);
            const std::size_t r0 = oh * a.stride[0] + rows.first * a.dilation[0] - a.pad_begin[0];
            for (std::size_t ow = 0; ow < a.out_w; ++ow) {
                const tap_range cols = inside(ow, a.stride[1], a.pad_begin[1], a.dilation[1], a.kernel[1], a.w);
                __m512 best = lowest;  // a window wholly in padding stays -inf, as on ref
                if (rows.count != 0 && cols.count != 0) {
                    const std::size_t c0 = ow * a.stride[1] + cols.first * a.dilation[1] - a.pad_begin[1];
                    for (std::size_t i = 0; i < rows.count; ++i) {
                        const float* row = plane + ((r0 + i * a.dilation[0]) * a.w + c0) * lanes;
                        for (std::size_t j = 0; j < cols.count; ++j)
                            best = max_keeping_nan(best, _mm512_loadu_ps(row + j * a.dilation[1] * lanes));
                    }
                }
                _mm512_storeu_ps(out + (oh * a.out_w + ow) * lanes, best);
            }
        }
    }
}

}  // namespace kiln::avx512
