#pragma once
// 16-bit floating-point storage types. Arithmetic happens in float: each value
// converts implicitly, so generic kernels work on them unchanged.
#include <bit>
#include <cstdint>
#include <cstring>

namespace kiln {

struct half {
    std::uint16_t bits = 0;

    half() = default;
    half(float f) : bits(from_float(f)) {}  // NOLINT: implicit on purpose
    operator float() const { return to_float(bits); }

    static half from_bits(std::uint16_t b) {
        half h;
        h.bits = b;
        return h;
    }

private:
    static float to_float(std::uint16_t h) {
        std::uint32_t sign = (h & 0x8000u) << 16;
        std::uint32_t exp = (h >> 10) & 0x1fu;
        std::uint32_t mant = h & 0x3ffu;
        std::uint32_t out;
        if (exp == 0) {
            if (mant == 0) {
                out = sign;
            } else {  // subnormal: renormalize
                int e = -1;
                do {
                    ++e;
                    mant <<= 1;
                } while ((mant & 0x400u) == 0);
                out = sign | ((127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
            }
        } else if (exp == 0x1f) {
            out = sign | 0x7f800000u | (mant << 13);
        } else {
            out = sign | ((exp + 127 - 15) << 23) | (mant << 13);
        }
        return std::bit_cast<float>(out);
    }

    static std::uint16_t from_float(float f) {
        std::uint32_t x = std::bit_cast<std::uint32_t>(f);
        std::uint32_t sign = (x >> 16) & 0x8000u;
        std::uint32_t abs = x & 0x7fffffffu;
        if (abs >= 0x7f800000u)  // inf or nan
            return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
        if (abs >= 0x477ff000u)  // rounds to a value beyond the largest half
            return static_cast<std::uint16_t>(sign | 0x7c00u);
        if (abs < 0x38800000u) {  // result is subnormal or zero
            if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign);
            std::uint32_t e = abs >> 23;
            std::uint32_t m = (abs & 0x7fffffu) | 0x800000u;
            std::uint32_t shift = 126 - e;  // 14 + (112 - e) ... gives mantissa bits kept
            std::uint32_t half_m = m >> (shift - 0);
            std::uint32_t rem = m & ((1u << shift) - 1);
            std::uint32_t halfway = 1u << (shift - 1);
            if (rem > halfway || (rem == halfway && (half_m & 1u))) ++half_m;
            return static_cast<std::uint16_t>(sign | half_m);
        }
        std::uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);  // round to nearest even
        return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
    }
};

struct bfloat16 {
    std::uint16_t bits = 0;

    bfloat16() = default;
    bfloat16(float f) : bits(from_float(f)) {}  // NOLINT: implicit on purpose
    operator float() const { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

    static bfloat16 from_bits(std::uint16_t b) {
        bfloat16 h;
        h.bits = b;
        return h;
    }

private:
    static std::uint16_t from_float(float f) {
        std::uint32_t x = std::bit_cast<std::uint32_t>(f);
        if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet nan
        x += 0x7fffu + ((x >> 16) & 1u);
        return static_cast<std::uint16_t>(x >> 16);
    }
};

}  // namespace kiln
