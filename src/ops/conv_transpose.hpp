#pragma once
// Transposed convolution (the gradient of convolution with respect to its
// input), ONNX ConvTranspose semantics without the bias.
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/operation.hpp"

namespace kiln::op {

// x [N, C, in...] (1 to 3 spatial dims) with weights w [C, M / group, kernel...]
// gives [N, M, out...], out = stride * (in - 1) + output_padding
// + dilation * (kernel - 1) + 1 - pad_begin - pad_end. Input position i and
// tap k add x * w into output position i * stride + k * dilation - pad_begin.
// padding holds k symmetric values or [begins..., ends...]; empty lists mean
// zeros (padding, output_padding) or ones (stride, dilation).
struct convolution_transpose : op_base {
    std::vector<std::int64_t> padding;
    std::vector<std::int64_t> stride;
    std::vector<std::int64_t> dilation;
    std::vector<std::int64_t> output_padding;
    std::int64_t group = 1;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.padding, "padding");
        f(self.stride, "stride");
        f(self.dilation, "dilation");
        f(self.output_padding, "output_padding");
        f(self.group, "group");
    }
    std::string name() const { return "convolution_transpose"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
