// A convolution of an input with a few plain channels (an image), run as one
// oneDNN convolution per input channel, image by image: each sums its
// kh * kw products from zero and adds the previous channel's partial result
// through a binary post-op. The reason is float32 accuracy: oneDNN's direct
// kernel accumulates all C * kh * kw products of an output in one register,
// and on ResNet-50's 7 x 7 stem that rounding (1.6x ONNX Runtime's, which
// sums per channel too), amplified by the fifty layers after it, was most of
// the cpu target's distance from the float64 answer. Split, the stem matches
// ONNX Runtime's error for about 6% more time on that one layer.
//
// A compiled file stores the per-channel kernels' packed weights one after
// another (64-byte aligned), each with its kernel's layout; a load on the
// same CPU and Kiln version hands each kernel its part to read in place.
#include <algorithm>
#include <cstring>

#include "targets/cpu/kernels/convolution/convolution_algorithms.hpp"
#include "targets/cpu/kernels/own_packed_layout.hpp"
#include "targets/cpu/kernels/packed_constant_values.hpp"
#include "targets/cpu/kernels/scratch_alignment.hpp"

namespace kiln {

namespace {

constexpr std::size_t min_taps = 16;

// Runs channel c's kernel for one image: inputs are x's channel, the
// (prepacked, unread) weights, the bias when the last kernel adds it, and
// the previous partial result for every kernel but the first.
class channel_split_kernel final : public cpu_kernel {
public:
    channel_split_kernel(std::vector<std::shared_ptr<const cpu_kernel>> per_channel, shape channel, shape image_result,
                         bool has_bias, std::size_t out_channels, std::size_t taps)
        : per_channel_(std::move(per_channel)),
          channel_(std::move(channel)),
          image_result_(std::move(image_result)),
          partial_bytes_(scratch_aligned(image_result_.bytes())),
          has_bias_(has_bias),
          out_channels_(out_channels),
          taps_(taps) {
        for (const auto& k : per_channel_) kernel_scratch_ = std::max(kernel_scratch_, k->scratch_bytes());
    }

    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        const std::size_t channels = per_channel_.size();
        const std::size_t images = result.get_shape().lens()[0];
        std::byte* partials[2] = {scratch, scratch + partial_bytes_};
        std::byte* kernel_scratch = scratch + 2 * partial_bytes_;
        for (std::size_t n = 0; n < images; ++n) {
            const argument image_out(image_result_, result.data() + n * image_result_.bytes());
            for (std::size_t c = 0; c < channels; ++c) {
                const bool last = c + 1 == channels;
                std::vector<argument> in{argument(channel_, inputs[0].data() + (n * channels + c) * channel_.bytes()),
                                         argument()};
                if (last && has_bias_) in.push_back(inputs[2]);
                if (c > 0) in.emplace_back(image_result_, partials[(c - 1) % 2]);
                const argument out = last ? image_out : argument(image_result_, partials[c % 2]);
                per_channel_[c]->run(out, in, kernel_scratch);
            }
        }
    }
    std::size_t scratch_bytes() const override { return 2 * partial_bytes_ + kernel_scratch_; }

    // The weights live only in the per-channel kernels' copies, a slice each.
    bool keeps_own_copy(std::size_t index) const override {
        return index == 1 && std::all_of(per_channel_.begin(), per_channel_.end(),
                                         [](const auto& k) { return k->keeps_own_copy(1); });
    }
    std::size_t own_copy_bytes() const override {
        std::size_t bytes = 0;
        for (const auto& k : per_channel_) bytes += k->own_copy_bytes();
        return bytes;
    }
    void restore_constant(std::size_t index, const argument& into) const override {
        if (index != 1) return cpu_kernel::restore_constant(index, into);
        const std::size_t channels = per_channel_.size(), m = into.get_shape().lens()[0];
        const std::size_t taps = into.get_shape().elements() / (m * channels);
        argument slice(shape(dtype::float_type, {m, 1, taps}));
        float* dst = into.data_as<float>();
        for (std::size_t c = 0; c < channels; ++c) {
            per_channel_[c]->restore_constant(1, slice);
            for (std::size_t o = 0; o < m; ++o)
                std::copy_n(slice.data_as<float>() + o * taps, taps, dst + (o * channels + c) * taps);
        }
    }
    std::shared_ptr<const packed_constant> packed_copy(std::size_t index) const override;
    std::size_t adopted_bytes() const override {
        std::size_t bytes = 0;
        for (const auto& k : per_channel_) bytes += k->adopted_bytes();
        return bytes;
    }

private:
    std::vector<std::shared_ptr<const cpu_kernel>> per_channel_;
    shape channel_;       // [1, 1, H, W]
    shape image_result_;  // the result of one image
    std::size_t partial_bytes_;
    bool has_bias_;
    std::size_t out_channels_;
    std::size_t taps_;  // of the window
    std::size_t kernel_scratch_ = 0;
};

own_layout::geometry layout_geometry(std::size_t m, std::size_t channels, std::size_t taps) {
    return {{"out_channels", static_cast<std::int64_t>(m)},
            {"channels", static_cast<std::int64_t>(channels)},
            {"taps", static_cast<std::int64_t>(taps)}};
}

// Where channel c's part lies in the stored bytes, and its kernel's layout.
value part_entry(const value& layout, std::size_t offset, std::size_t bytes) {
    return value_map{{"layout", layout},
                     {"offset", static_cast<std::int64_t>(offset)},
                     {"bytes", static_cast<std::int64_t>(bytes)}};
}

std::int64_t part_integer(const value& part, const std::string& name) {
    const value* v = part.is_map() ? part.find(name) : nullptr;
    if (v == nullptr || !v->is_int() || v->as_int() < 0)
        fail(error_kind::parse_error, "packed weights: a channel-split part has no byte count '" + name + "'");
    return v->as_int();
}

// The per-channel parts of a channel-split form, `channels` of them.
std::vector<std::shared_ptr<const packed_constant>> parts_of(const packed_constant& form, std::size_t channels) {
    const value& parts = own_layout::member(form, "parts");
    if (!parts.is_list() || parts.as_list().size() != channels)
        fail(error_kind::parse_error, "packed weights: the channel-split layout does not list one part for each of its " +
                                          std::to_string(channels) + " channels");
    std::vector<std::shared_ptr<const packed_constant>> out;
    for (const value& part : parts.as_list()) {
        const value* layout = part.is_map() ? part.find("layout") : nullptr;
        if (layout == nullptr) fail(error_kind::parse_error, "packed weights: a channel-split part has no layout");
        out.push_back(own_layout::part_of(form, *layout, static_cast<std::size_t>(part_integer(part, "offset")),
                                          static_cast<std::size_t>(part_integer(part, "bytes"))));
    }
    return out;
}

std::shared_ptr<const packed_constant> channel_split_kernel::packed_copy(std::size_t index) const {
    if (index != 1) return nullptr;
    std::vector<std::shared_ptr<const packed_constant>> inner;
    std::size_t total = 0;
    for (const auto& k : per_channel_) {
        inner.push_back(k->packed_copy(1));
        if (inner.back() == nullptr) return nullptr;
        total = scratch_aligned(total) + inner.back()->bytes.get_shape().bytes();
    }
    // One buffer for the file (a copy: the parts stay where each kernel reads them).
    argument bytes(shape(dtype::uint8_type, {total}));
    value_list parts;
    std::size_t offset = 0;
    for (const auto& form : inner) {
        offset = scratch_aligned(offset);
        const std::size_t n = form->bytes.get_shape().bytes();
        std::memcpy(bytes.data() + offset, form->bytes.data(), n);
        parts.push_back(part_entry(form->layout, offset, n));
        offset += n;
    }
    return own_layout::export_form(channel_split_convolution.name,
                                   layout_geometry(out_channels_, per_channel_.size(), taps_), bytes,
                                   {{"parts", std::move(parts)}});
}

// Weights [M, C, k...] -> channel c's [M, 1, k...].
argument channel_weights(const argument& w, std::size_t c) {
    std::vector<std::size_t> lens = w.get_shape().lens();
    const std::size_t m = lens[0], channels = lens[1];
    lens[1] = 1;
    argument out(shape(dtype::float_type, lens));
    const std::size_t taps = out.get_shape().elements() / m;
    const float* src = w.data_as<float>();
    float* dst = out.data_as<float>();
    for (std::size_t o = 0; o < m; ++o) std::copy_n(src + (o * channels + c) * taps, taps, dst + o * taps);
    return out;
}

bool eligible(const kernel_request& r) {
    const auto& conv = requested_convolution(r);
    const shape& x = r.input_shapes[0];
    const shape& w = r.input_shapes[1];
    if (conv.input_layout != op::tensor_layout::nchw || conv.conv.group != 1 || conv.post.binary_count() > 0 ||
        x.type() != dtype::float_type || w.type() != dtype::float_type || x.ndim() != 4 || !x.standard() ||
        !r.output_shape.standard() || !r.is_constant(1) || !w.standard())
        return false;
    const std::size_t channels = x.lens()[1];
    // Only image-like inputs (wider ones are blocked and summed by other
    // kernels) under windows of 16 taps or more: the sum over a 3 x 3 window
    // of a few channels is short already, and splitting it made MobileNetV2
    // 3% slower for no gain worth having.
    return channels >= 2 && channels < ops::avx2_channel_block && w.elements() / (w.lens()[0] * channels) >= min_taps;
}

// `inner` builds the per-channel convolutions.
std::shared_ptr<const cpu_kernel> build(const kernel_request& r, const kernel_builder& inner) {
    const auto& conv = requested_convolution(r);
    const shape& x = r.input_shapes[0];
    const shape& w = r.input_shapes[1];
    const std::size_t channels = x.lens()[1], m = w.lens()[0], taps = w.elements() / (m * channels);
    // A loaded file's parts, one per channel kernel, when they are this
    // layout for these shapes (each kernel reads its own in place).
    std::vector<std::shared_ptr<const packed_constant>> parts;
    argument weights;
    const packed_constant* form = r.packed_input(1);
    if (form != nullptr && form->adoptable &&
        own_layout::same_layout(*form, channel_split_convolution.name, layout_geometry(m, channels, taps)))
        parts = parts_of(*form, channels);
    else
        weights = constant_values(r, 1);

    shape channel(dtype::float_type, {1, 1, x.lens()[2], x.lens()[3]});
    std::vector<std::size_t> image_lens = r.output_shape.lens();
    image_lens[0] = 1;
    shape image_result(dtype::float_type, image_lens);
    std::vector<std::shared_ptr<const cpu_kernel>> per_channel;
    for (std::size_t c = 0; c < channels; ++c) {
        const bool last = c + 1 == channels;
        op::fused_convolution part = conv;
        part.has_bias = conv.has_bias && last;
        part.post = {};
        if (c > 0) part.post.append(op::post_op_kind::add);
        if (last)
            for (std::size_t k = 0; k < conv.post.kinds.size(); ++k)
                part.post.append(conv.post.kinds[k], conv.post.alpha[k], conv.post.beta[k]);
        std::vector<std::size_t> part_lens = w.lens();
        part_lens[1] = 1;
        const argument part_weights =
            parts.empty() ? channel_weights(weights, c) : argument(shape(dtype::float_type, part_lens), nullptr);
        std::vector<shape> shapes{channel, part_weights.get_shape()};
        std::vector<argument> constants{argument(), part_weights};
        if (part.has_bias) {
            shapes.push_back(r.input_shapes[2]);
            constants.push_back(r.constant_inputs[2]);
        }
        if (c > 0) {
            shapes.push_back(image_result);
            constants.emplace_back();
        }
        const operation op(part);
        std::vector<std::shared_ptr<const packed_constant>> packed(shapes.size());
        kernel_request request{op, shapes, image_result, constants, r.threads};
        if (!parts.empty()) {
            packed[1] = parts[c];
            request.packed = &packed;
        }
        auto kernel = inner(request);
        if (kernel == nullptr) return nullptr;
        per_channel.push_back(std::move(kernel));
    }
    return std::make_shared<channel_split_kernel>(std::move(per_channel), std::move(channel), std::move(image_result),
                                                  conv.has_bias, m, taps);
}

}  // namespace

// An image's few plain channels, one convolution each, for float32 accuracy
// (see the top of this file).
const kernel_algorithm channel_split_convolution{"channel_split", eligible, build};

argument channel_split_restore_weights(const packed_constant& form, const shape& whole) {
    constexpr std::int64_t most = std::int64_t{1} << 24;
    const auto m = static_cast<std::size_t>(own_layout::entry(form, "out_channels", 1, most));
    const auto channels = static_cast<std::size_t>(own_layout::entry(form, "channels", 1, most));
    const auto taps = static_cast<std::size_t>(own_layout::entry(form, "taps", 1, most));
    if (whole.type() != dtype::float_type || whole.elements() != m * channels * taps)
        fail(error_kind::parse_error, "packed weights: a channel-split layout of " + std::to_string(m) + " x " +
                                          std::to_string(channels) + " x " + std::to_string(taps) +
                                          " weights is stored for a " + to_string(whole) + " literal");
    argument values(whole);
    float* dst = values.data_as<float>();
    const auto parts = parts_of(form, channels);
    for (std::size_t c = 0; c < channels; ++c) {
        const argument slice = restore_packed_constant(*parts[c], shape(dtype::float_type, {m, 1, taps}));
        for (std::size_t o = 0; o < m; ++o)
            std::copy_n(slice.data_as<float>() + o * taps, taps, dst + (o * channels + c) * taps);
    }
    return values;
}

}  // namespace kiln
