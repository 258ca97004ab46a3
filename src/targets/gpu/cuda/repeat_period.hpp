#pragma once
// Where an input's element offset is its output index modulo a period: a
// tensor laid out like the output over its inner dims and broadcast over
// all the outer ones (a bias row, a scalar, a same-shape operand). Host-side
// planning shared by the pointwise and matmul-epilogue kernels, whose device
// loops then take one remainder instead of a walk of every dim.
#include <cstdint>

namespace kiln {

// The elements the input repeats over the output's outer dims (the output's
// element count when shaped like it, 1 for a scalar), or 0 where its strides
// are otherwise. Walking out from the innermost dim: dims with the output's
// standard stride extend the period; from the first broadcast dim (stride 0)
// on, every dim must broadcast. Dims of length 1 are skipped.
template <class Size>
std::uint64_t repeat_period(const Size* out_lens, const Size* in_strides, int rank) {
    std::uint64_t standard_stride = 1, period = 1;
    bool broadcasting = false;
    for (int d = rank - 1; d >= 0; --d) {
        const auto len = static_cast<std::uint64_t>(out_lens[d]), stride = static_cast<std::uint64_t>(in_strides[d]);
        if (len == 1) continue;
        if (!broadcasting && stride == standard_stride)
            period = standard_stride * len;
        else if (stride == 0)
            broadcasting = true;
        else
            return 0;
        standard_stride *= len;
    }
    return period;
}

}  // namespace kiln
