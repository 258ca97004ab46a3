#include "ops/pool.hpp"

#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/conv.hpp"
#include "ops/fused_quantized_linalg.hpp"
#include "ops/op_helpers.hpp"

namespace kiln::op {

namespace {

ops::window pool_window(const pooling& op, const std::vector<std::size_t>& spatial) {
    if (op.global) return ops::make_window(op.name(), spatial, {}, {}, {});
    if (op.lengths.size() != spatial.size())
        fail("pooling: lengths has " + std::to_string(op.lengths.size()) + " values but the input has " +
             std::to_string(spatial.size()) + " spatial dimensions");
    std::vector<std::size_t> kernel;
    for (auto l : op.lengths) {
        if (l < 1) fail("pooling: lengths must be positive, got " + std::to_string(l));
        kernel.push_back(static_cast<std::size_t>(l));
    }
    return ops::make_window(op.name(), kernel, op.padding, op.stride, op.dilation);
}

std::vector<std::size_t> spatial_lens(const shape& s) {
    return {s.lens().begin() + 2, s.lens().end()};
}

template <class C>
bool is_nan(C v) {
    if constexpr (std::is_floating_point_v<C>)
        return std::isnan(v);
    else
        return false;
}

// What max pooling yields for a window that covers no input element.
template <class T>
T lowest_value() {
    if constexpr (is_float_like_v<T>)
        return T(-std::numeric_limits<float>::infinity());
    else
        return std::numeric_limits<T>::lowest();
}

}  // namespace

shape pooling::compute_shape(const std::vector<shape>& inputs) const {
    ops::expect_inputs(name(), inputs, 1);
    const shape& x = inputs[0];
    if (mode == pooling_mode::average) ops::expect_floating(name(), x, "input of average pooling");
    if (x.type() == dtype::bool_type)
        fail(error_kind::type_error, "pooling: input must be a numeric type, got " + to_string(x.type()));
    if (x.ndim() < 3 || x.ndim() > 5)
        fail("pooling: input must be [N, C, spatial...] with 1 to 3 spatial dimensions, got " + to_string(x.lens()));
    auto spatial = spatial_lens(x);
    auto out = ops::window_output_lens(name(), spatial, pool_window(*this, spatial), ceil_mode && !global);
    std::vector<std::size_t> lens{x.lens()[0], x.lens()[1]};
    lens.insert(lens.end(), out.begin(), out.end());
    if (!channels_last) return {x.type(), lens};
    if (lens.size() != 4) fail("pooling: channels_last needs a 4-D input, got " + to_string(x.lens()));
    return {x.type(), lens, channels_last_strides(lens)};
}

void pooling::compute(const argument& result, const std::vector<argument>& inputs) const {
    const ops::view5 x = ops::as_5d(inputs[0].get_shape());
    const ops::view5 y = ops::as_5d(result.get_shape());
    const ops::window3 win = ops::as_3d(pool_window(*this, spatial_lens(inputs[0].get_shape())));
    visit_type(inputs[0].get_shape().type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (!std::is_same_v<T, bool>) {
            using C = ops::compute_t<T>;
            const T* xp = inputs[0].data_as<T>();
            auto pool_at = [&](std::size_t n, std::size_t c, const std::size_t(&o)[3]) -> T {
                double sum = 0;
                std::size_t count = 0;         // input elements in the window
                std::size_t padded_count = 1;  // window taps inside the padded input
                C best{};
                for (int d = 0; d < 3; ++d) {
                    // Taps k with o*s + k*dil < pad_begin + in + pad_end (the ceil_mode tail is cut off).
                    std::size_t limit = win.pad_begin[d] + x.lens[2 + d] + win.pad_end[d];
                    std::size_t taps = 0;
                    for (std::size_t k = 0; k < win.kernel[d]; ++k)
                        if (o[d] * win.stride[d] + k * win.dilation[d] < limit) ++taps;
                    padded_count *= taps;
                }
                for (std::size_t kd = 0; kd < win.kernel[0]; ++kd)
                    for (std::size_t kh = 0; kh < win.kernel[1]; ++kh)
                        for (std::size_t kw = 0; kw < win.kernel[2]; ++kw) {
                            const std::size_t k[3] = {kd, kh, kw};
                            std::size_t offset = n * x.strides[0] + c * x.strides[1];
                            bool inside = true;
                            for (int d = 0; d < 3 && inside; ++d) {
                                // Position in the unpadded input; negative in the begin padding.
                                std::int64_t p =
                                    static_cast<std::int64_t>(o[d] * win.stride[d] + k[d] * win.dilation[d]) -
                                    static_cast<std::int64_t>(win.pad_begin[d]);
                                inside = p >= 0 && p < static_cast<std::int64_t>(x.lens[2 + d]);
                                offset += static_cast<std::size_t>(p) * x.strides[2 + d];
                            }
                            if (!inside) continue;
                            C v = static_cast<C>(xp[offset]);
                            sum += static_cast<double>(v);
                            // max propagates NaN, as PyTorch and onnxruntime do
                            if (count == 0 || (!is_nan(best) && (is_nan(v) || best < v))) best = v;
                            ++count;
                        }
                if (mode == pooling_mode::max) return count == 0 ? lowest_value<T>() : T(best);
                std::size_t divisor = count_include_pad ? padded_count : count;
                return divisor == 0 ? T(C(0)) : T(static_cast<C>(sum / static_cast<double>(divisor)));
            };
            T* out = result.data_as<T>();
            for (std::size_t n = 0; n < y.lens[0]; ++n)
                for (std::size_t c = 0; c < y.lens[1]; ++c)
                    for (std::size_t od = 0; od < y.lens[2]; ++od)
                        for (std::size_t oh = 0; oh < y.lens[3]; ++oh)
                            for (std::size_t ow = 0; ow < y.lens[4]; ++ow)
                                out[n * y.strides[0] + c * y.strides[1] + od * y.strides[2] + oh * y.strides[3] +
                                    ow * y.strides[4]] = pool_at(n, c, {od, oh, ow});
        }
    });
}

}  // namespace kiln::op
