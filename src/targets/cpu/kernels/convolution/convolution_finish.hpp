#pragma once
// What Kiln's own blocked convolution kernels (pairwise-sum, Winograd) apply
// after the sums and the bias: one of a few post-op chains. Plain data, read
// by the portable kernels and by their AVX2 loops alike (a template argument
// there, so the epilogue has no branch per vector; each value indexes the
// loops' tables).
#include <cstddef>

namespace kiln::blocked_convolution {

enum class finish : int { none, relu, add, add_relu };
constexpr std::size_t finish_kinds = 4;

}  // namespace kiln::blocked_convolution
