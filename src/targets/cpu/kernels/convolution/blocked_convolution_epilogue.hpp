// What Kiln's own blocked (nChw8c, Winograd's also nChw16c) convolution kernels (pairwise-sum,
// Winograd) apply after the sums: bias, then one of a few post-op chains.
// Both accept the same cases, so the decision is made here once.
#pragma once

#include <optional>

#include "ops/blocked_layout.hpp"
#include "ops/fused_convolution.hpp"
#include "targets/cpu/kernels/convolution/convolution_finish.hpp"
#include "targets/cpu/kernels/cpu_kernel.hpp"

namespace kiln::blocked_convolution {

struct epilogue {
    bool has_bias = false;
    finish then = finish::none;
};

// The epilogue's operands among the kernel's inputs (x, w [, bias] [, residual]); null where absent.
struct epilogue_operands {
    const float* bias = nullptr;
    const float* residual = nullptr;
};
epilogue_operands operands_of(const epilogue& e, const std::vector<argument>& inputs);

// True when `conv` is a float32, group-1 convolution from and to blocks of
// `block` channels (nChw8c, or nChw16c for Winograd's AVX-512 loops) with
// standard layouts and constant weights [M, C, kh, kw], M a multiple of the
// block: what these kernels read.
bool reads_blocked_float(const op::fused_convolution& conv, const kernel_request& r,
                         std::size_t block = ops::avx2_channel_block);

// The epilogue of `conv` (plain relu, residual add, add then relu, or none,
// with an optional bias of `out_channels`), or nullopt when its post-ops or
// their operands' layouts are not ones these kernels apply.
std::optional<epilogue> epilogue_of(const op::fused_convolution& conv, const kernel_request& r,
                                    std::size_t out_channels);

}  // namespace kiln::blocked_convolution
