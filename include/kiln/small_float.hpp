#pragma once
// 8- and 4-bit floating-point storage types: float8 e4m3fn, e4m3fnuz, e5m2,
// e5m2fnuz and e8m0fnu, float4 e2m1fn. One element per byte, as ml_dtypes
// stores them (a float4 code sits in the low four bits). Kiln has no
// arithmetic on them: a value converts to float exactly, and a float or
// double converts to them with round to nearest even and ONNX's saturation
// rules (Cast's `saturate`). The implicit conversion from float saturates,
// as ONNX's Cast does by default.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace kiln {

// How a format spends the codes that are not plain finite numbers.
enum class float_specials {
    ieee,  // e5m2: exponent all ones is infinity (mantissa 0) or NaN
    fn,    // finite: no infinity; exponent and mantissa all ones is NaN (e4m3fn)
    fnuz,  // finite, unsigned zero: no infinity, no -0; the -0 code is the only NaN
    none,  // no infinity and no NaN (float4 e2m1fn)
};

template <int ExponentBits, int MantissaBits, int Bias, float_specials Specials>
struct small_float {
    static constexpr int exponent_bits = ExponentBits;
    static constexpr int mantissa_bits = MantissaBits;
    static constexpr int bias = Bias;
    static constexpr float_specials specials = Specials;
    static constexpr int total_bits = 1 + ExponentBits + MantissaBits;
    static constexpr std::uint32_t sign_bit = 1u << (ExponentBits + MantissaBits);
    static constexpr std::uint32_t exponent_ones = (1u << ExponentBits) - 1;
    static constexpr std::uint32_t mantissa_ones = (1u << MantissaBits) - 1;
    // The largest finite magnitude's code.
    static constexpr std::uint32_t max_code =
        Specials == float_specials::ieee ? ((exponent_ones - 1) << MantissaBits) | mantissa_ones
        : Specials == float_specials::fn ? (exponent_ones << MantissaBits) | (mantissa_ones - 1)
                                         : (exponent_ones << MantissaBits) | mantissa_ones;
    static constexpr int min_exponent = 1 - Bias;  // of the smallest normal number

    std::uint8_t bits = 0;

    small_float() = default;
    small_float(float f) : bits(encode(f, true)) {}  // NOLINT: implicit on purpose
    operator float() const { return decode(bits); }

    static small_float from_bits(std::uint8_t b) {
        small_float v;
        v.bits = b;
        return v;
    }
    static small_float from_double(double x, bool saturate) { return from_bits(encode(x, saturate)); }

    static float decode(std::uint8_t code) {
        const std::uint32_t c = code & ((1u << total_bits) - 1);
        const bool negative = (c & sign_bit) != 0;
        const std::uint32_t magnitude = c & (sign_bit - 1);
        const std::uint32_t exponent = magnitude >> MantissaBits;
        const std::uint32_t mantissa = magnitude & mantissa_ones;
        if constexpr (Specials == float_specials::fnuz) {
            if (c == sign_bit) return -std::numeric_limits<float>::quiet_NaN();  // the -0 code: NaN, signed as ml_dtypes reads it
        } else if constexpr (Specials == float_specials::fn) {
            if (magnitude == sign_bit - 1)
                return negative ? -std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::quiet_NaN();
        } else if constexpr (Specials == float_specials::ieee) {
            if (exponent == exponent_ones) {
                const float special =
                    mantissa == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
                return negative ? -special : special;
            }
        }
        // Every value is exact in float: at most 4 significant bits, exponents within float's range.
        const float value =
            exponent == 0 ? std::ldexp(static_cast<float>(mantissa), min_exponent - MantissaBits)
                          : std::ldexp(static_cast<float>(mantissa | (1u << MantissaBits)),
                                       static_cast<int>(exponent) - Bias - MantissaBits);
        return negative ? -value : value;
    }

    // Rounds to nearest even. Beyond the largest finite value (after rounding)
    // and for infinities: the largest finite value with `saturate`; otherwise
    // infinity (ieee), NaN (fn, fnuz) or still the largest value (none, which
    // has neither).
    static std::uint8_t encode(double x, bool saturate) {
        const bool negative = std::signbit(x);
        const std::uint32_t sign = negative ? sign_bit : 0;
        if (std::isnan(x)) return nan_code(negative);
        const double a = std::fabs(x);
        std::int64_t code = static_cast<std::int64_t>(max_code) + 1;  // overflow unless finite and in range
        if (a == 0) {
            code = 0;
        } else if (std::isfinite(a)) {
            int e = 0;
            std::frexp(a, &e);  // a = f * 2^e with f in [0.5, 1)
            const int exponent = e - 1 > min_exponent ? e - 1 : min_exponent;
            if (exponent <= min_exponent + static_cast<int>(exponent_ones) + 1) {
                // a / 2^(exponent - M) lies in [0, 2^(M+1)): rint rounds it to nearest even. A carry into
                // 2^(M+1) moves to the next exponent by itself, since the code is exponent field | mantissa.
                const auto q = static_cast<std::int64_t>(std::rint(std::ldexp(a, MantissaBits - exponent)));
                code = (static_cast<std::int64_t>(exponent - min_exponent) << MantissaBits) + q;
            }
        }
        if (code > static_cast<std::int64_t>(max_code)) {
            if (saturate || Specials == float_specials::none) return static_cast<std::uint8_t>(sign | max_code);
            if constexpr (Specials == float_specials::ieee)
                return static_cast<std::uint8_t>(sign | (exponent_ones << MantissaBits));
            return nan_code(negative);
        }
        if (Specials == float_specials::fnuz && code == 0) return 0;  // no negative zero
        return static_cast<std::uint8_t>(sign | static_cast<std::uint32_t>(code));
    }

    // The NaN code for a NaN of the given sign.
    static std::uint8_t nan_code(bool negative) {
        const std::uint32_t sign = negative ? sign_bit : 0;
        if constexpr (Specials == float_specials::ieee)
            return static_cast<std::uint8_t>(sign | (exponent_ones << MantissaBits) | (1u << (MantissaBits - 1)));
        else if constexpr (Specials == float_specials::fn)
            return static_cast<std::uint8_t>(sign | (sign_bit - 1));
        else if constexpr (Specials == float_specials::fnuz)
            return static_cast<std::uint8_t>(sign_bit);
        else  // no NaN: ml_dtypes (and so ONNX's reference) writes the zero of the opposite sign
            return static_cast<std::uint8_t>(negative ? 0 : sign_bit);
    }
};

using float8_e4m3fn = small_float<4, 3, 7, float_specials::fn>;
using float8_e4m3fnuz = small_float<4, 3, 8, float_specials::fnuz>;
using float8_e5m2 = small_float<5, 2, 15, float_specials::ieee>;
using float8_e5m2fnuz = small_float<5, 2, 16, float_specials::fnuz>;
using float4_e2m1fn = small_float<2, 1, 1, float_specials::none>;

// How a value between two powers of two becomes one (float8 e8m0's rounding).
enum class e8m0_rounding { up, down, nearest };

// float8 e8m0fnu: an unsigned power of two, 2^(code - 127) for codes 0..254;
// 0xff is NaN. The scale type of the MX formats.
struct float8_e8m0fnu {
    std::uint8_t bits = 0;

    float8_e8m0fnu() = default;
    float8_e8m0fnu(float f) : bits(encode(f, true, e8m0_rounding::up)) {}  // NOLINT: implicit on purpose
    operator float() const { return decode(bits); }

    static float8_e8m0fnu from_bits(std::uint8_t b) {
        float8_e8m0fnu v;
        v.bits = b;
        return v;
    }
    // As ONNX's reference, through float32.
    static float8_e8m0fnu from_double(double x, bool saturate, e8m0_rounding rounding = e8m0_rounding::up) {
        return from_bits(encode(static_cast<float>(x), saturate, rounding));
    }

    static float decode(std::uint8_t code) {
        if (code == 0xff) return std::numeric_limits<float>::quiet_NaN();
        return std::ldexp(1.0f, static_cast<int>(code) - 127);
    }

    // ONNX's conversion (Cast with round_mode and saturate): the float32
    // exponent field, rounded by the mantissa; the sign is ignored, 0 gives the
    // smallest code and NaN or infinity 0xff. Without `saturate`, rounding up
    // past the largest power gives 0xff (NaN).
    static std::uint8_t encode(float x, bool saturate, e8m0_rounding rounding) {
        std::uint32_t f = 0;
        std::memcpy(&f, &x, sizeof f);
        std::uint32_t exponent = (f >> 23) & 0xffu;
        if (exponent == 0xffu) return 0xff;
        bool round_up = false;
        if (rounding == e8m0_rounding::up) {
            round_up = (f & 0x7fffffu) != 0;
        } else if (rounding == e8m0_rounding::nearest) {
            const bool guard = (f & 0x400000u) != 0;
            const bool rest = (f & 0x3fffffu) != 0;
            round_up = guard && (rest || exponent > 0);  // ties go up, except below the smallest normal float
        }
        if (round_up && !(saturate && exponent == 0xfeu)) ++exponent;
        return static_cast<std::uint8_t>(exponent);
    }
};

}  // namespace kiln
