#include "ops/conv_transpose.hpp"

#include "ops/conv.hpp"
#include "ops/op_helpers.hpp"

namespace kiln::op {

namespace {

ops::window transpose_window(const convolution_transpose& op, const shape& w) {
    std::vector<std::size_t> kernel(w.lens().begin() + 2, w.lens().end());
    return ops::make_window(op.name(), kernel, op.padding, op.stride, op.dilation);
}

std::vector<std::size_t> output_padding_of(const convolution_transpose& op, std::size_t rank) {
    if (op.output_padding.empty()) return std::vector<std::size_t>(rank, 0);
    if (op.output_padding.size() != rank)
        fail("convolution_transpose: output_padding has " + std::to_string(op.output_padding.size()) +
             " values but the input has " + std::to_string(rank) + " spatial dimensions");
    std::vector<std::size_t> out;
    for (auto v : op.output_padding) {
        if (v < 0) fail("convolution_transpose: output_padding values must be non-negative, got " + std::to_string(v));
        out.push_back(static_cast<std::size_t>(v));
    }
    return out;
}

}  // namespace

shape convolution_transpose::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 2);
    const shape& x = inputs[0];
    const shape& w = inputs[1];
    ops::expect_floating(name(), x, "input x");
    ops::expect_same_type(name(), inputs);
    if (x.ndim() < 3 || x.ndim() > 5)
        fail("convolution_transpose: input x must be [N, C, spatial...] with 1 to 3 spatial dimensions, got " +
             to_string(x.lens()));
    if (w.ndim() != x.ndim())
        fail("convolution_transpose: weights " + to_string(w.lens()) + " must have the rank of the input " +
             to_string(x.lens()));
    if (group < 1) fail("convolution_transpose: group must be positive, got " + std::to_string(group));
    if (w.lens()[0] != x.lens()[1] || x.lens()[1] % static_cast<std::size_t>(group) != 0)
        fail("convolution_transpose: weights " + to_string(w.lens()) + " must start with the " +
             std::to_string(x.lens()[1]) + " input channels of x " + to_string(x.lens()) + ", a multiple of group " +
             std::to_string(group));
    const std::size_t rank = x.ndim() - 2;
    const auto win = transpose_window(*this, w);
    const auto extra = output_padding_of(*this, rank);
    std::vector<std::size_t> lens{x.lens()[0], w.lens()[1] * static_cast<std::size_t>(group)};
    for (std::size_t d = 0; d < rank; ++d) {
        const std::size_t in = x.lens()[2 + d];
        const std::size_t full = win.stride[d] * (in - 1) + extra[d] + win.dilation[d] * (win.kernel[d] - 1) + 1;
        const std::size_t cut = win.pad_begin[d] + win.pad_end[d];
        if (in == 0 || win.kernel[d] == 0 || full <= cut)
            fail("convolution_transpose: spatial dimension " + std::to_string(d) + " would be empty: unpadded extent " +
                 std::to_string(in == 0 ? 0 : full) + " with padding " + std::to_string(cut));
        lens.push_back(full - cut);
    }
    return {x.type(), lens};
}

void convolution_transpose::compute(const argument& result, const std::vector<argument>& inputs) const {
    const ops::view5 x = ops::as_5d(inputs[0].get_shape());
    const ops::view5 w = ops::as_5d(inputs[1].get_shape());
    const ops::view5 y = ops::as_5d(result.get_shape());
    const ops::window3 win = ops::as_3d(transpose_window(*this, inputs[1].get_shape()));
    const std::size_t out_per_group = w.lens[1];
    const std::size_t in_per_group = x.lens[1] / static_cast<std::size_t>(group);
    // The input position feeding output o through tap k along dim d, or -1
    // when o + pad - k * dilation is not a multiple of the stride or falls outside.
    auto source = [&](int d, std::size_t o, std::size_t k) -> std::int64_t {
        std::int64_t p =
            static_cast<std::int64_t>(o + win.pad_begin[d]) - static_cast<std::int64_t>(k * win.dilation[d]);
        const auto s = static_cast<std::int64_t>(win.stride[d]);
        if (p < 0 || p % s != 0 || p / s >= static_cast<std::int64_t>(x.lens[2 + d])) return -1;
        return p / s;
    };
    visit_type(inputs[0].get_shape().type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (is_float_like_v<T>) {
            const T* xp = inputs[0].data_as<T>();
            const T* wp = inputs[1].data_as<T>();
            auto output_at = [&](std::size_t n, std::size_t m, const std::size_t(&o)[3]) {
                const std::size_t g = m / out_per_group;
                const std::size_t local = m % out_per_group;
                double acc = 0;
                for (std::size_t kd = 0; kd < win.kernel[0]; ++kd)
                    for (std::size_t kh = 0; kh < win.kernel[1]; ++kh)
                        for (std::size_t kw = 0; kw < win.kernel[2]; ++kw) {
                            std::int64_t i[3] = {source(0, o[0], kd), source(1, o[1], kh), source(2, o[2], kw)};
                            if (i[0] < 0 || i[1] < 0 || i[2] < 0) continue;
                            std::size_t xo = n * x.strides[0];
                            for (int d = 0; d < 3; ++d) xo += static_cast<std::size_t>(i[d]) * x.strides[2 + d];
                            const std::size_t wo =
                                local * w.strides[1] + kd * w.strides[2] + kh * w.strides[3] + kw * w.strides[4];
                            for (std::size_t c = g * in_per_group; c < (g + 1) * in_per_group; ++c)
                                acc += static_cast<double>(xp[xo + c * x.strides[1]]) *
                                       static_cast<double>(wp[wo + c * w.strides[0]]);
                        }
                return acc;
            };
            ops::write_in_order(result.data_as<T>(), y, output_at);
        }
    });
}

}  // namespace kiln::op
