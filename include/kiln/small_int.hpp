#pragma once
// 4- and 2-bit integer storage types (int4, uint4, int2, uint2). One element
// per byte, the value's two's-complement bits in the low bits and zeros above,
// as ml_dtypes stores them; ONNX's packed tensors are unpacked on import.
// Kiln has no arithmetic on them: they convert to and from int.
#include <cstdint>

namespace kiln {

template <int Bits, bool Signed>
struct small_int {
    static constexpr int bits_count = Bits;
    static constexpr bool is_signed = Signed;
    static constexpr std::uint32_t mask = (1u << Bits) - 1;
    static constexpr int min = Signed ? -(1 << (Bits - 1)) : 0;
    static constexpr int max = Signed ? (1 << (Bits - 1)) - 1 : (1 << Bits) - 1;

    std::uint8_t bits = 0;

    small_int() = default;
    // Keeps the low bits, as ONNX's Cast does between integer types (200 -> int4 is 8 -> -8).
    small_int(std::int64_t v) : bits(static_cast<std::uint8_t>(static_cast<std::uint64_t>(v) & mask)) {}  // NOLINT
    operator int() const {  // NOLINT: implicit on purpose
        const int v = static_cast<int>(bits & mask);
        if constexpr (Signed) return v > max ? v - (1 << Bits) : v;
        return v;
    }

    static small_int from_bits(std::uint8_t b) {
        small_int v;
        v.bits = b;
        return v;
    }
};

using int4_t = small_int<4, true>;
using uint4_t = small_int<4, false>;
using int2_t = small_int<2, true>;
using uint2_t = small_int<2, false>;

}  // namespace kiln
