#include "targets/cpu/kernels/quantize/code_map_avx512vbmi.hpp"

#include <immintrin.h>

namespace kiln::avx512 {

namespace {

// Each permute looks 64 codes up in 128 entries (their low seven bits pick
// one of two registers' bytes); the top bit chooses which half of the map.
struct map_registers {
    __m512i quarter[4];
    __m512i look_up(__m512i codes) const {
        const __m512i low = _mm512_permutex2var_epi8(quarter[0], codes, quarter[1]);
        const __m512i high = _mm512_permutex2var_epi8(quarter[2], codes, quarter[3]);
        return _mm512_mask_blend_epi8(_mm512_movepi8_mask(codes), low, high);
    }
};

}  // namespace

void map_codes(const std::uint8_t* map, const std::uint8_t* in, std::uint8_t* out, std::size_t n) {
    map_registers m{};
    for (int q = 0; q < 4; ++q) m.quarter[q] = _mm512_loadu_si512(map + 64 * q);
    std::size_t i = 0;
    for (; i + 64 <= n; i += 64) _mm512_storeu_si512(out + i, m.look_up(_mm512_loadu_si512(in + i)));
    if (i == n) return;
    // Masked loads and stores touch nothing past the last code.
    const __mmask64 tail = (std::uint64_t{1} << (n - i)) - 1;  // n - i < 64
    _mm512_mask_storeu_epi8(out + i, tail, m.look_up(_mm512_maskz_loadu_epi8(tail, in + i)));
}

}  // namespace kiln::avx512
