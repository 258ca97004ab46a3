// A k x k convolution on blocked (nChw8c) activations, run as an im2col copy
// into scratch followed by a 1 x 1 oneDNN convolution over C * kh * kw
// channels. The reason is float32 accuracy: oneDNN's direct AVX2 kernel
// accumulates each output in one register across all C * kh * kw products,
// reloading the partial sum between input-channel blocks, so its rounding
// error grows with the sum's length (2.3x ONNX Runtime's on ResNet-50's
// 3 x 3 layers with C = 64, 4.5x with C = 512). Its 1 x 1 kernel sums each
// reduction block from zero and adds the block to the partial result, which
// brings the error to 1.1x-1.4x ONNX Runtime's for about 2.5% more time on
// ResNet-50 (the copy; the 1 x 1 kernel is as fast as the direct one).
//
// A compiled file stores the weights as the 1 x 1 kernel packed them, its
// layout wrapped in this one's (the taps, for restoring the plain order); a
// load on the same CPU and Kiln version hands them to the 1 x 1 kernel to
// read in place.
#include <algorithm>
#include <cstring>

#include "ops/conv.hpp"
#include "targets/cpu/kernels/convolution/convolution_algorithms.hpp"
#include "targets/cpu/kernels/own_packed_layout.hpp"
#include "targets/cpu/kernels/packed_constant_values.hpp"

namespace kiln {

namespace {

constexpr std::size_t block = ops::avx2_channel_block;  // eligible for nchw8c only

// Where each tap of the window reads, for one image of [C/8, H, W, 8].
struct im2col_geometry {
    std::size_t channel_blocks = 0;
    std::size_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
    std::size_t kernel_h = 0, kernel_w = 0;
    ops::window window;
    std::size_t taps() const { return kernel_h * kernel_w; }
};

// One image's columns [taps * C/8, OH, OW, 8]: channel t * C + c holds input
// channel c shifted by tap t, zero where the tap falls in the padding.
void fill_columns(const im2col_geometry& g, const float* x, float* columns) {
    const std::size_t in_plane = g.in_h * g.in_w * block, out_plane = g.out_h * g.out_w * block;
    const auto planes = static_cast<std::ptrdiff_t>(g.taps() * g.channel_blocks);
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t p = 0; p < planes; ++p) {
        const auto index = static_cast<std::size_t>(p);
        const std::size_t cb = index % g.channel_blocks, tap = index / g.channel_blocks;
        const float* in = x + cb * in_plane;
        float* out = columns + index * out_plane;
        const auto row0 = static_cast<std::ptrdiff_t>(tap / g.kernel_w * g.window.dilation[0]) -
                          static_cast<std::ptrdiff_t>(g.window.pad_begin[0]);
        const auto col0 = static_cast<std::ptrdiff_t>(tap % g.kernel_w * g.window.dilation[1]) -
                          static_cast<std::ptrdiff_t>(g.window.pad_begin[1]);
        // The outputs [lo, hi) of a row read inside the input; the rest is padding.
        const auto sw = static_cast<std::ptrdiff_t>(g.window.stride[1]), in_w = static_cast<std::ptrdiff_t>(g.in_w);
        const auto out_w = static_cast<std::ptrdiff_t>(g.out_w);
        const std::ptrdiff_t lo = std::clamp<std::ptrdiff_t>((-col0 + sw - 1) / sw, 0, out_w);
        const std::ptrdiff_t hi = std::clamp<std::ptrdiff_t>((in_w - col0 + sw - 1) / sw, lo, out_w);
        for (std::size_t oh = 0; oh < g.out_h; ++oh) {
            float* out_row = out + oh * g.out_w * block;
            const auto r = row0 + static_cast<std::ptrdiff_t>(oh * g.window.stride[0]);
            if (r < 0 || r >= static_cast<std::ptrdiff_t>(g.in_h)) {
                std::fill_n(out_row, g.out_w * block, 0.f);
                continue;
            }
            const float* in_row = in + static_cast<std::size_t>(r) * g.in_w * block;
            std::fill_n(out_row, lo * block, 0.f);
            if (sw == 1)
                std::memcpy(out_row + lo * block, in_row + (col0 + lo) * block, (hi - lo) * block * sizeof(float));
            else
                for (std::ptrdiff_t ow = lo; ow < hi; ++ow)
                    std::memcpy(out_row + ow * block, in_row + (col0 + ow * sw) * block, block * sizeof(float));
            std::fill_n(out_row + hi * block, (out_w - hi) * block, 0.f);
        }
    }
}

// A value as one image sees it: cut to the image when its first dimension
// is the batch, shared whole otherwise (bias, broadcast operands).
struct image_view {
    shape image;
    std::size_t step_bytes = 0;
};

image_view view_of_one_image(const shape& s, std::size_t batch) {
    if (batch == 1 || s.ndim() < 4 || s.lens()[0] != batch) return {s, 0};
    std::vector<std::size_t> lens = s.lens();
    lens[0] = 1;
    return {shape(s.type(), lens, s.strides()), s.strides()[0] * s.element_size()};
}

// Columns go to scratch image by image, so the scratch they take does not
// grow with the batch.
class im2col_convolution_kernel final : public cpu_kernel {
public:
    im2col_convolution_kernel(im2col_geometry g, shape columns, std::vector<image_view> views, shape tap_weights,
                              std::shared_ptr<const cpu_kernel> pointwise)
        : geometry_(std::move(g)),
          columns_(std::move(columns)),
          column_bytes_((columns_.bytes() + buffer_alignment - 1) / buffer_alignment * buffer_alignment),
          views_(std::move(views)),
          tap_weights_(std::move(tap_weights)),
          pointwise_(std::move(pointwise)) {}

    // views_[0] is the input, views_[1] the result, then the inputs after the weights.
    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        const std::size_t images = result.get_shape().lens()[0];
        std::vector<argument> per_image(inputs.size());
        per_image[0] = argument(columns_, scratch);
        for (std::size_t n = 0; n < images; ++n) {
            fill_columns(geometry_, reinterpret_cast<const float*>(inputs[0].data() + n * views_[0].step_bytes),
                         reinterpret_cast<float*>(scratch));
            for (std::size_t i = 2; i < inputs.size(); ++i)
                per_image[i] = argument(views_[i].image, inputs[i].data() + n * views_[i].step_bytes);
            const argument out(views_[1].image, result.data() + n * views_[1].step_bytes);
            pointwise_->run(out, per_image, scratch + column_bytes_);
        }
    }
    std::size_t scratch_bytes() const override { return column_bytes_ + pointwise_->scratch_bytes(); }

    // The weights live only in the 1 x 1 kernel's copy, in tap-major order.
    bool keeps_own_copy(std::size_t index) const override { return index == 1 && pointwise_->keeps_own_copy(1); }
    std::size_t own_copy_bytes() const override { return pointwise_->own_copy_bytes(); }
    void restore_constant(std::size_t index, const argument& into) const override;
    std::shared_ptr<const packed_constant> packed_copy(std::size_t index) const override;
    std::size_t adopted_bytes() const override { return pointwise_->adopted_bytes(); }

private:
    im2col_geometry geometry_;
    shape columns_;
    std::size_t column_bytes_;
    std::vector<image_view> views_;
    shape tap_weights_;  // [M, KH * KW * C, 1, 1]
    std::shared_ptr<const cpu_kernel> pointwise_;
};

// Tap-major weights [M, taps * C] back in [M, C, taps] order.
void plain_from_tap_major(const float* src, std::size_t m, std::size_t c, std::size_t taps, float* dst) {
    for (std::size_t o = 0; o < m; ++o)
        for (std::size_t ci = 0; ci < c; ++ci)
            for (std::size_t t = 0; t < taps; ++t) dst[(o * c + ci) * taps + t] = src[(o * taps + t) * c + ci];
}

own_layout::geometry layout_geometry(std::size_t m, std::size_t c, std::size_t taps) {
    return {{"out_channels", static_cast<std::int64_t>(m)},
            {"in_channels", static_cast<std::int64_t>(c)},
            {"taps", static_cast<std::int64_t>(taps)}};
}

shape tap_major_shape(std::size_t m, std::size_t c, std::size_t taps) {
    return shape(dtype::float_type, {m, taps * c, 1, 1});
}

void im2col_convolution_kernel::restore_constant(std::size_t index, const argument& into) const {
    if (index != 1) return cpu_kernel::restore_constant(index, into);
    argument tap_major(tap_weights_);
    pointwise_->restore_constant(1, tap_major);
    const std::size_t m = tap_weights_.lens()[0], taps = geometry_.taps(), c = tap_weights_.lens()[1] / taps;
    plain_from_tap_major(tap_major.data_as<float>(), m, c, taps, into.data_as<float>());
}

std::shared_ptr<const packed_constant> im2col_convolution_kernel::packed_copy(std::size_t index) const {
    auto inner = index == 1 ? pointwise_->packed_copy(1) : nullptr;
    if (inner == nullptr) return nullptr;
    const std::size_t m = tap_weights_.lens()[0], taps = geometry_.taps(), c = tap_weights_.lens()[1] / taps;
    return own_layout::export_form(im2col_convolution.name, layout_geometry(m, c, taps), inner->bytes,
                                   {{"inner", inner->layout}});
}

// Weights [M, C, KH, KW] as the 1 x 1 convolution's [M, KH * KW * C, 1, 1],
// in the columns' channel order.
argument tap_major_weights(const argument& w) {
    const auto& l = w.get_shape().lens();
    const std::size_t m = l[0], c = l[1], taps = l[2] * l[3];
    argument out(shape(dtype::float_type, {m, taps * c, 1, 1}));
    const float* src = w.data_as<float>();
    float* dst = out.data_as<float>();
    for (std::size_t o = 0; o < m; ++o)
        for (std::size_t ci = 0; ci < c; ++ci)
            for (std::size_t t = 0; t < taps; ++t) dst[(o * taps + t) * c + ci] = src[(o * c + ci) * taps + t];
    return out;
}


bool eligible(const kernel_request& r) {
    const auto& conv = requested_convolution(r);
    const shape& x = r.input_shapes[0];
    const shape& w = r.input_shapes[1];
    return conv.input_layout == op::tensor_layout::nchw8c && conv.output_layout == op::tensor_layout::nchw8c &&
           conv.conv.group == 1 && x.ndim() == 5 && w.ndim() == 4 && w.type() == dtype::float_type &&
           r.is_constant(1) && w.standard() &&
           w.lens()[2] * w.lens()[3] > 1;  // else already a 1 x 1 convolution
}

// `inner` builds the 1 x 1 convolution over the columns.
std::shared_ptr<const cpu_kernel> build(const kernel_request& r, const kernel_builder& inner) {
    const auto& conv = requested_convolution(r);
    const shape& x = r.input_shapes[0];
    const shape& w = r.input_shapes[1];
    im2col_geometry g;
    g.kernel_h = w.lens()[2];
    g.kernel_w = w.lens()[3];
    const shape plain_y = conv.plain_output_shape(r.input_shapes);
    const std::size_t batch = x.lens()[0];
    g.channel_blocks = x.lens()[1];
    g.in_h = x.lens()[2];
    g.in_w = x.lens()[3];
    g.out_h = plain_y.lens()[2];
    g.out_w = plain_y.lens()[3];
    g.window = ops::make_window(conv.name(), {g.kernel_h, g.kernel_w}, conv.conv.padding, conv.conv.stride,
                                conv.conv.dilation);

    op::fused_convolution pointwise = conv;
    pointwise.conv.padding.clear();
    pointwise.conv.stride.clear();
    pointwise.conv.dilation.clear();
    // The 1 x 1 kernel's packed weights from a loaded file, when they are its
    // layout for these shapes (it reads them in place), else the values.
    const std::size_t m = w.lens()[0], c = w.lens()[1];
    std::vector<std::shared_ptr<const packed_constant>> inner_packed(r.input_shapes.size());
    argument tap_weights;
    const packed_constant* form = r.packed_input(1);
    if (form != nullptr && form->adoptable &&
        own_layout::same_layout(*form, im2col_convolution.name, layout_geometry(m, c, g.taps()))) {
        inner_packed[1] = own_layout::part_of(*form, own_layout::member(*form, "inner"), 0,
                                              form->bytes.get_shape().bytes());
        tap_weights = argument(tap_major_shape(m, c, g.taps()), nullptr);
    } else {
        tap_weights = tap_major_weights(constant_values(r, 1));
    }
    shape columns(dtype::float_type, {1, g.taps() * g.channel_blocks, g.out_h, g.out_w, block});
    std::vector<image_view> views{view_of_one_image(x, batch), view_of_one_image(r.output_shape, batch)};
    std::vector<shape> shapes{columns, tap_weights.get_shape()};
    for (std::size_t i = 2; i < r.input_shapes.size(); ++i) {
        views.push_back(view_of_one_image(r.input_shapes[i], batch));
        shapes.push_back(views.back().image);
    }
    std::vector<argument> constants = r.constant_inputs;
    constants[0] = argument();
    constants[1] = tap_weights;
    const operation op(pointwise);
    kernel_request pointwise_request{op, shapes, views[1].image, constants, r.threads};
    if (inner_packed[1] != nullptr) pointwise_request.packed = &inner_packed;
    auto kernel = inner(pointwise_request);
    if (kernel == nullptr) return nullptr;
    return std::make_shared<im2col_convolution_kernel>(std::move(g), std::move(columns), std::move(views),
                                                       tap_weights.get_shape(), std::move(kernel));
}

}  // namespace

// k x k layers on blocked input as a column copy and a 1 x 1 convolution,
// for float32 accuracy (see the top of this file).
const kernel_algorithm im2col_convolution{"im2col", eligible, build};

argument im2col_restore_weights(const packed_constant& form, const shape& whole) {
    constexpr std::int64_t most = std::int64_t{1} << 24;
    const auto m = static_cast<std::size_t>(own_layout::entry(form, "out_channels", 1, most));
    const auto c = static_cast<std::size_t>(own_layout::entry(form, "in_channels", 1, most));
    const auto taps = static_cast<std::size_t>(own_layout::entry(form, "taps", 1, most));
    if (whole.type() != dtype::float_type || whole.elements() != m * c * taps)
        fail(error_kind::parse_error, "packed weights: an im2col layout of " + std::to_string(m) + " x " +
                                          std::to_string(c) + " x " + std::to_string(taps) +
                                          " weights is stored for a " + to_string(whole) + " literal");
    const auto inner = own_layout::part_of(form, own_layout::member(form, "inner"), 0, form.bytes.get_shape().bytes());
    const argument tap_major = restore_packed_constant(*inner, tap_major_shape(m, c, taps));
    argument values(whole);
    plain_from_tap_major(tap_major.data_as<float>(), m, c, taps, values.data_as<float>());
    return values;
}

}  // namespace kiln
