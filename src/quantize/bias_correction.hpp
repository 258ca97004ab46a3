#pragma once
// Bias correction after post-training weight quantization (Nagel et al.,
// "Data-Free Quantization", 2019; NNCF's fast bias correction): rounding a
// layer's weights to int8 moves the mean of each output channel by
// (W_q - W) E[x]. Per output it is as small as the rest of the rounding
// noise, but it is the same at every position and for every input, so
// nothing averages it away: a global pooling keeps it whole while the
// rest of the noise shrinks. On ResNet-50 it was most of the logits' error.
// Taking it out of the layer's bias costs nothing at run time.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/module.hpp"
#include "passes/insert_quantize_dequantize.hpp"

namespace kiln {

// A convolution or dot whose constant weight (input 1) gets quantized and
// whose input 0 is a calibrated activation.
struct bias_correction_site {
    instruction_ref op;
    std::size_t activation;  // index of input 0 among the calibrated activations
};

// The sites among `planned` (before any pair is inserted). `activations`
// lists the calibrated values in calibration order; `channel_axes` (one per
// activation, -1 where none yet) gets the axis whose means each site needs:
// a convolution input's channels (1), a dot input's last axis. A value that
// two sites would read along different axes corrects only the first.
std::vector<bias_correction_site> plan_bias_corrections(const std::vector<quantized_value>& planned,
                                                        const std::vector<instruction_ref>& activations,
                                                        std::vector<std::int64_t>& channel_axes);

// After the pairs are inserted: subtracts (W_q - W) E[x] from the site's
// output, E[x] being `input_means` (one per channel of input 0). For a
// convolution each kernel tap counts in the share of output positions
// where it reads inside the input, not padding. Folded into the constant
// bias the op's only user adds, or added after the op when it has none.
void correct_weight_rounding_bias(module& m, const bias_correction_site& site, const std::vector<double>& input_means);

}  // namespace kiln
