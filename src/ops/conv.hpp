#pragma once
// Convolution, and the sliding-window geometry it shares with pooling.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/operation.hpp"
#include "ops/op_helpers.hpp"

namespace kiln::ops {

// A window sliding over the spatial dimensions, one entry per dimension.
struct window {
    std::vector<std::size_t> kernel;
    std::vector<std::size_t> stride;
    std::vector<std::size_t> dilation;
    std::vector<std::size_t> pad_begin;
    std::vector<std::size_t> pad_end;
};

// Checks and expands the attribute vectors for `kernel.size()` spatial
// dimensions: stride and dilation hold one positive value per dimension or
// are empty (all ones); padding holds k symmetric values, 2k values
// [begins..., ends...], or is empty (zeros).
window make_window(const std::string& op, const std::vector<std::size_t>& kernel,
                   const std::vector<std::int64_t>& padding, const std::vector<std::int64_t>& stride,
                   const std::vector<std::int64_t>& dilation);

// Output extents over `input` spatial lens. With ceil_mode the last partial
// window counts unless it starts inside the end padding (PyTorch / ONNX).
// Fails naming the op when a dimension would be empty.
std::vector<std::size_t> window_output_lens(const std::string& op, const std::vector<std::size_t>& input,
                                            const window& w, bool ceil_mode = false);

// A tensor [N, C, spatial...] seen as [N, C, D, H, W]: missing leading spatial
// dimensions get extent 1, so 1-D to 3-D kernels share one loop nest.
struct view5 {
    std::size_t lens[5];
    std::size_t strides[5];
};
view5 as_5d(const shape& s);

// Fills a standard-strided result viewed as `y` in row-major order with
// output_at(n, m, {d, h, w}), converted to T.
template <class T, class F>
void write_in_order(T* out, const view5& y, F&& output_at) {
    std::size_t i = 0;
    for (std::size_t n = 0; n < y.lens[0]; ++n)
        for (std::size_t m = 0; m < y.lens[1]; ++m)
            for (std::size_t od = 0; od < y.lens[2]; ++od)
                for (std::size_t oh = 0; oh < y.lens[3]; ++oh)
                    for (std::size_t ow = 0; ow < y.lens[4]; ++ow) {
                        const std::size_t o[3] = {od, oh, ow};
                        out[i++] = T(static_cast<compute_t<T>>(output_at(n, m, o)));
                    }
}

// A window padded the same way (extent 1, stride 1, no padding in front).
struct window3 {
    std::size_t kernel[3];
    std::size_t stride[3];
    std::size_t dilation[3];
    std::size_t pad_begin[3];
    std::size_t pad_end[3];
};
window3 as_3d(const window& w);

}  // namespace kiln::ops

namespace kiln::op {

// x [N, C, spatial...] (1 to 3 spatial dims) with weights
// w [M, C / group, kernel...] gives [N, M, out...]; no bias.
struct convolution : op_base {
    std::vector<std::int64_t> padding;
    std::vector<std::int64_t> stride;
    std::vector<std::int64_t> dilation;
    std::int64_t group = 1;
    template <class Self, class F>
    static void reflect(Self& self, F&& f) {
        f(self.padding, "padding");
        f(self.stride, "stride");
        f(self.dilation, "dilation");
        f(self.group, "group");
    }
    std::string name() const { return "convolution"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void compute(const argument& result, const std::vector<argument>& inputs) const;
};

}  // namespace kiln::op
