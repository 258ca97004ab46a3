#include "targets/cpu/kernels/convolution/convolution_algorithms.hpp"

namespace kiln {

std::span<const kernel_algorithm> convolution_algorithms() {
    static const kernel_algorithm algorithms[] = {
        winograd_convolution,                    // 3 x 3 stride 1 on 8-channel blocks
        onednn_winograd_convolution,             // 3 x 3 stride 1 on 16-channel blocks, <= 64 input channels
        winograd_convolution_avx512,             // the same, 65 to 256 input channels
        pairwise_sum_convolution,                // blocked, 56 x 56 and up
        im2col_convolution,                      // other k x k on blocked input
        channel_split_convolution,               // an image's few plain channels
        onednn_convolution,                      // everything else
        winograd_convolution_avx512_when_tuned,  // other 16-channel 3 x 3 stride 1: exhaustive tuning times it
    };
    return algorithms;
}

bool sums_for_accuracy(std::string_view algorithm) {
    for (const auto& a :
         {winograd_convolution, pairwise_sum_convolution, im2col_convolution, channel_split_convolution})
        if (a.name == algorithm) return true;
    return false;
}

const op::fused_convolution& requested_convolution(const kernel_request& r) {
    const auto* conv = r.op.get_if<op::fused_convolution>();
    if (conv == nullptr) fail(error_kind::runtime, "a convolution algorithm was asked to run " + r.op.name());
    return *conv;
}

}  // namespace kiln
