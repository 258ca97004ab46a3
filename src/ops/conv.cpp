#include "ops/conv.hpp"

#include "ops/op_helpers.hpp"

namespace kiln::ops {

namespace {

std::vector<std::size_t> positive_values(const std::string& op, const char* attr,
                                         const std::vector<std::int64_t>& given, std::size_t rank) {
    if (given.empty()) return std::vector<std::size_t>(rank, 1);
    if (given.size() != rank)
        fail(op + ": " + attr + " has " + std::to_string(given.size()) + " values but the input has " +
             std::to_string(rank) + " spatial dimensions");
    std::vector<std::size_t> out;
    for (auto v : given) {
        if (v < 1) fail(op + ": " + attr + " values must be positive, got " + std::to_string(v));
        out.push_back(static_cast<std::size_t>(v));
    }
    return out;
}

}  // namespace

window make_window(const std::string& op, const std::vector<std::size_t>& kernel,
                   const std::vector<std::int64_t>& padding, const std::vector<std::int64_t>& stride,
                   const std::vector<std::int64_t>& dilation) {
    const std::size_t rank = kernel.size();
    window w;
    w.kernel = kernel;
    w.stride = positive_values(op, "stride", stride, rank);
    w.dilation = positive_values(op, "dilation", dilation, rank);
    w.pad_begin.assign(rank, 0);
    w.pad_end.assign(rank, 0);
    if (!padding.empty() && padding.size() != rank && padding.size() != 2 * rank)
        fail(op + ": padding has " + std::to_string(padding.size()) + " values; expected " + std::to_string(rank) +
             " or " + std::to_string(2 * rank) + " for " + std::to_string(rank) + " spatial dimensions");
    for (auto p : padding)
        if (p < 0) fail(op + ": padding values must be non-negative, got " + std::to_string(p));
    for (std::size_t i = 0; i < rank && !padding.empty(); ++i) {
        w.pad_begin[i] = static_cast<std::size_t>(padding[i]);
        w.pad_end[i] = static_cast<std::size_t>(padding.size() == rank ? padding[i] : padding[rank + i]);
    }
    return w;
}

std::vector<std::size_t> window_output_lens(const std::string& op, const std::vector<std::size_t>& input,
                                            const window& w, bool ceil_mode) {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < input.size(); ++i) {
        std::size_t padded = input[i] + w.pad_begin[i] + w.pad_end[i];
        std::size_t extent = w.dilation[i] * (w.kernel[i] - 1) + 1;
        if (w.kernel[i] == 0 || padded < extent)
            fail(op + ": spatial dimension " + std::to_string(i) + " would be empty: input extent " +
                 std::to_string(input[i]) + " padded to " + std::to_string(padded) +
                 " is smaller than the dilated kernel extent " + std::to_string(extent));
        std::size_t span = padded - extent;
        std::size_t n = (ceil_mode ? (span + w.stride[i] - 1) / w.stride[i] : span / w.stride[i]) + 1;
        // A last window starting in the end padding would see no input.
        if (ceil_mode && (n - 1) * w.stride[i] >= input[i] + w.pad_begin[i]) --n;
        out.push_back(n);
    }
    return out;
}

view5 as_5d(const shape& s) {
    view5 v{{1, 1, 1, 1, 1}, {0, 0, 0, 0, 0}};
    const std::size_t pad = 5 - s.ndim();
    for (std::size_t i = 0; i < s.ndim(); ++i) {
        // Batch and channel stay in front; spatial dims move to the back.
        std::size_t to = i < 2 ? i : pad + i;
        v.lens[to] = s.lens()[i];
        v.strides[to] = s.strides()[i];
    }
    return v;
}

window3 as_3d(const window& w) {
    window3 v{{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}};
    const std::size_t pad = 3 - w.kernel.size();
    for (std::size_t i = 0; i < w.kernel.size(); ++i) {
        v.kernel[pad + i] = w.kernel[i];
        v.stride[pad + i] = w.stride[i];
        v.dilation[pad + i] = w.dilation[i];
        v.pad_begin[pad + i] = w.pad_begin[i];
        v.pad_end[pad + i] = w.pad_end[i];
    }
    return v;
}

}  // namespace kiln::ops

namespace kiln::op {

namespace {

ops::window conv_window(const convolution& op, const shape& w) {
    std::vector<std::size_t> kernel(w.lens().begin() + 2, w.lens().end());
    return ops::make_window(op.name(), kernel, op.padding, op.stride, op.dilation);
}

}  // namespace

shape convolution::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 2);
    const shape& x = inputs[0];
    const shape& w = inputs[1];
    ops::expect_floating(name(), x, "input x");
    ops::expect_same_type(name(), inputs);
    if (x.ndim() < 3 || x.ndim() > 5)
        fail("convolution: input x must be [N, C, spatial...] with 1 to 3 spatial dimensions, got " +
             to_string(x.lens()));
    if (w.ndim() != x.ndim())
        fail("convolution: weights " + to_string(w.lens()) + " must have the rank of the input " + to_string(x.lens()));
    if (group < 1) fail("convolution: group must be positive, got " + std::to_string(group));
    const auto g = static_cast<std::size_t>(group);
    const std::size_t channels = x.lens()[1];
    const std::size_t filters = w.lens()[0];
    if (channels % g != 0)
        fail("convolution: input channels " + std::to_string(channels) + " are not divisible by group " +
             std::to_string(g));
    if (w.lens()[1] * g != channels)
        fail("convolution: weights " + to_string(w.lens()) + " expect " + std::to_string(w.lens()[1] * g) +
             " input channels (C / group = " + std::to_string(w.lens()[1]) + "), but x " + to_string(x.lens()) +
             " has " + std::to_string(channels));
    if (filters % g != 0)
        fail("convolution: output channels " + std::to_string(filters) + " are not divisible by group " +
             std::to_string(g));
    std::vector<std::size_t> spatial(x.lens().begin() + 2, x.lens().end());
    auto out_spatial = ops::window_output_lens(name(), spatial, conv_window(*this, w));
    std::vector<std::size_t> lens{x.lens()[0], filters};
    lens.insert(lens.end(), out_spatial.begin(), out_spatial.end());
    return {x.type(), lens};
}

void convolution::compute(const argument& result, const std::vector<argument>& inputs) const {
    const ops::view5 x = ops::as_5d(inputs[0].get_shape());
    const ops::view5 w = ops::as_5d(inputs[1].get_shape());
    const ops::view5 y = ops::as_5d(result.get_shape());
    const ops::window3 win = ops::as_3d(conv_window(*this, inputs[1].get_shape()));
    const std::size_t in_per_group = w.lens[1];
    const std::size_t out_per_group = y.lens[1] / static_cast<std::size_t>(group);
    // Input position along spatial dim d of output o and kernel tap k; negative in the padding.
    auto position = [&](int d, std::size_t o, std::size_t k) {
        return static_cast<std::int64_t>(o * win.stride[d] + k * win.dilation[d]) -
               static_cast<std::int64_t>(win.pad_begin[d]);
    };
    auto inside = [&](int d, std::int64_t p) { return p >= 0 && p < static_cast<std::int64_t>(x.lens[2 + d]); };
    visit_type(inputs[0].get_shape().type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (is_float_like_v<T>) {
            const T* xp = inputs[0].data_as<T>();
            const T* wp = inputs[1].data_as<T>();
            // One output element: its group's channels times every kernel tap inside the input.
            auto output_at = [&](std::size_t n, std::size_t m, const std::size_t(&o)[3]) {
                const std::size_t first_c = (m / out_per_group) * in_per_group;
                double acc = 0;
                for (std::size_t c = 0; c < in_per_group; ++c)
                    for (std::size_t kd = 0; kd < win.kernel[0]; ++kd)
                        for (std::size_t kh = 0; kh < win.kernel[1]; ++kh)
                            for (std::size_t kw = 0; kw < win.kernel[2]; ++kw) {
                                std::int64_t p[3] = {position(0, o[0], kd), position(1, o[1], kh),
                                                     position(2, o[2], kw)};
                                if (!inside(0, p[0]) || !inside(1, p[1]) || !inside(2, p[2])) continue;
                                std::size_t xo = n * x.strides[0] + (first_c + c) * x.strides[1];
                                for (int d = 0; d < 3; ++d) xo += static_cast<std::size_t>(p[d]) * x.strides[2 + d];
                                std::size_t wo = m * w.strides[0] + c * w.strides[1] + kd * w.strides[2] +
                                                 kh * w.strides[3] + kw * w.strides[4];
                                acc += static_cast<double>(xp[xo]) * static_cast<double>(wp[wo]);
                            }
                return acc;
            };
            ops::write_in_order(result.data_as<T>(), y, output_at);
        }
    });
}

}  // namespace kiln::op
