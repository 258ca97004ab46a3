#pragma once
// deform_conv: ONNX DeformConv (2-D). x [N, C, H, W], w [OC, C / group, kH, kW],
// offset [N, offset_group * 2 * kH * kW, oH, oW] and optionally bias [OC] and
// mask [N, offset_group * kH * kW, oH, oW] -> [N, OC, oH, oW].
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

// Every kernel tap (i, j) of output (oh, ow) reads x bilinearly at
// (oh * stride - pad_top + i * dilation + dy, ow * stride - pad_left + j * dilation + dx),
// (dy, dx) taken from offset for the tap's offset group (input channels split
// evenly into offset_group groups); corners outside the input read 0. The
// sample is scaled by the mask (1 without one). Inputs: x, w, offset[, bias[, mask]];
// has_bias / has_mask say which of the optional trailing inputs are present.
struct deform_conv : op_base {
    std::vector<std::int64_t> strides{1, 1};
    std::vector<std::int64_t> pads{0, 0, 0, 0};  // top, left, bottom, right
    std::vector<std::int64_t> dilations{1, 1};
    std::int64_t group = 1;
    std::int64_t offset_group = 1;
    bool has_bias = false;
    bool has_mask = false;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.strides, "strides");
        f(self.pads, "pads");
        f(self.dilations, "dilations");
        f(self.group, "group");
        f(self.offset_group, "offset_group");
        f(self.has_bias, "has_bias");
        f(self.has_mask, "has_mask");
    }
    std::string name() const { return "deform_conv"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
