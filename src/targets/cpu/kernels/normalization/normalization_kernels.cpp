// The cpu kernels for softmax, log_softmax, layer_norm and rms_norm over the last
// dimensions of a standard float32 tensor: AVX2 row loops, threaded over
// rows (softmax_avx2.cpp, layer_norm_avx2.cpp, or their AVX-512 versions
// softmax_avx512.cpp, layer_norm_avx512.cpp where avx512::enabled()); and for softmax_quantize /
// layer_norm_quantize, the same rows written as 8-bit codes (on 8 or 16
// lanes the same way; softmax_quantize may read 8-bit codes too). Other layouts,
// dtypes or CPUs decline to the reference compute.
#include <optional>

#include "ops/norm.hpp"
#include "ops/op_helpers.hpp"
#include "ops/quantized_norm.hpp"
#include "targets/cpu/kernels/normalization/normalization_avx2.hpp"
#include "targets/cpu/kernels/normalization/normalization_avx512.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/cpu_kernels.hpp"
#include "targets/cpu/kernels/follows_run_time_extents.hpp"

namespace kiln {

namespace {

// Work (float operations, roughly) below which threads do not pay.
constexpr std::size_t parallel_work = std::size_t{1} << 18;

// Rows of `length` elements when the dimensions from `axis` on are the
// normalized ones of a standard float32 tensor.
std::optional<avx2::row_layout> rows_from(const shape& x, std::size_t axis, const kernel_request& r,
                                          std::size_t cost_per_element) {
    if (!avx2::supported() || x.type() != dtype::float_type || !x.standard() || x.elements() == 0) return std::nullopt;
    avx2::row_layout layout;
    layout.length = 1;
    for (std::size_t d = axis; d < x.ndim(); ++d) layout.length *= x.lens()[d];
    layout.rows = x.elements() / layout.length;
    layout.threads = r.threads;
    layout.parallel_rows = std::max<std::size_t>(2, parallel_work / (layout.length * cost_per_element));
    return layout;
}

// The row loops of one ISA.
using softmax_rows = void (*)(const avx2::row_layout&, bool, const float*, float*);
using layer_norm_rows = void (*)(const avx2::row_layout&, double, const float*, const float*, const float*, float*);
using softmax_quantize_rows = void (*)(const avx2::row_layout&, const void*, const avx2::row_quantize*, const float*,
                                       const std::size_t*, const avx2::row_quantize&, void*, float*);
using layer_norm_quantize_rows = void (*)(const avx2::row_layout&, double, const float*, const float*, const float*,
                                          const avx2::row_quantize&, void*);

// The rows of this run: as many as the input has (fewer than built for
// when the program runs at a smaller run-time extent); each as long as built.
avx2::row_layout rows_of_run(avx2::row_layout layout, const argument& x) {
    layout.rows = x.get_shape().elements() / layout.length;
    return layout;
}

class softmax_kernel final : public cpu_kernel, public follows_run_time_extents {
public:
    softmax_kernel(avx2::row_layout layout, bool take_log, softmax_rows rows, std::size_t axis)
        : layout_(layout), take_log_(take_log), rows_(rows), axis_(axis) {}
    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        rows_(rows_of_run(layout_, inputs[0]), take_log_, inputs[0].data_as<const float>(), result.data_as<float>());
    }
    // A dimension before the normalized ones only changes the number of rows.
    bool follows_extent_of(std::size_t dim) const override { return dim < axis_; }

private:
    avx2::row_layout layout_;
    bool take_log_;
    softmax_rows rows_;
    std::size_t axis_;
};

// A scale or bias as `length` contiguous floats: the input itself when it is
// laid out so, else its constant value expanded at build time.
struct row_parameter {
    bool present = false;
    bool from_input = false;
    std::vector<float> expanded;
};

std::optional<row_parameter> row_parameter_of(const kernel_request& r, std::size_t index, const shape& x,
                                              std::size_t axis) {
    row_parameter p;
    if (index >= r.input_shapes.size()) return p;
    p.present = true;
    const shape& s = r.input_shapes[index];
    const std::vector<std::size_t> norm_lens(x.lens().begin() + static_cast<std::ptrdiff_t>(axis), x.lens().end());
    std::size_t length = 1;
    for (auto l : norm_lens) length *= l;
    if (s.type() != dtype::float_type) return std::nullopt;
    if (s.elements() == length && s.standard()) {
        p.from_input = true;
        return p;
    }
    const argument& value = r.constant_inputs[index];
    if (value.empty()) return std::nullopt;
    // Broadcast the constant over the normalized dimensions.
    const auto strides = ops::broadcast_strides(s, norm_lens);
    const float* v = value.data_as<const float>();
    p.expanded.resize(length);
    ops::for_each_broadcast<1>(norm_lens, {strides},
                               [&](std::size_t i, const std::size_t* off) { p.expanded[i] = v[off[0]]; });
    return p;
}

class layer_norm_kernel final : public cpu_kernel, public follows_run_time_extents {
public:
    layer_norm_kernel(avx2::row_layout layout, double epsilon, row_parameter scale, row_parameter bias,
                      layer_norm_rows rows, std::size_t axis)
        : layout_(layout), epsilon_(epsilon), scale_(std::move(scale)), bias_(std::move(bias)), rows_(rows), axis_(axis) {}
    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        rows_(rows_of_run(layout_, inputs[0]), epsilon_, inputs[0].data_as<const float>(), pointer(scale_, inputs, 1),
                             pointer(bias_, inputs, 2), result.data_as<float>());
    }

private:
    static const float* pointer(const row_parameter& p, const std::vector<argument>& inputs, std::size_t index) {
        if (!p.present) return nullptr;
        return p.from_input ? inputs[index].data_as<const float>() : p.expanded.data();
    }
    avx2::row_layout layout_;
    double epsilon_;
    row_parameter scale_, bias_;
    layer_norm_rows rows_;
    std::size_t axis_;

public:
    // Scale and bias span the normalized dimensions only (row_parameter_of).
    bool follows_extent_of(std::size_t dim) const override { return dim < axis_; }
};

// One float row per thread, in scratch, for the variants that write codes.
std::size_t work_bytes(const avx2::row_layout& layout) {
    const std::size_t bytes = static_cast<std::size_t>(std::max(layout.threads, 1)) * layout.length * sizeof(float);
    return (bytes + 63) / 64 * 64;
}

// The quantize parameters at constant inputs `first` (scale) and `first` + 1 (zero point).
std::optional<avx2::row_quantize> row_quantize_of(const kernel_request& r, std::size_t first) {
    const argument& scale = r.constant_inputs[first];
    const argument& zero_point = r.constant_inputs[first + 1];
    if (scale.empty() || zero_point.empty()) return std::nullopt;
    avx2::row_quantize q;
    q.scale = scale.data_as<const float>()[0];
    q.unsigned_codes = zero_point.get_shape().type() == dtype::uint8_type;
    q.zero_point = q.unsigned_codes ? static_cast<float>(zero_point.data_as<const std::uint8_t>()[0])
                                    : static_cast<float>(zero_point.data_as<const std::int8_t>()[0]);
    return q;
}

class softmax_quantize_kernel final : public cpu_kernel {
public:
    softmax_quantize_kernel(avx2::row_layout layout, std::vector<std::size_t> mask_offsets,
                            std::optional<avx2::row_quantize> input, avx2::row_quantize q, softmax_quantize_rows rows)
        : layout_(layout), mask_offsets_(std::move(mask_offsets)), input_(input), q_(q), rows_(rows) {}
    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        const float* mask = mask_offsets_.empty() ? nullptr : inputs[1].data_as<const float>();
        rows_(layout_, inputs[0].data(), input_ ? &*input_ : nullptr, mask, mask_offsets_.data(), q_,
              result.data_as<std::byte>(), reinterpret_cast<float*>(scratch));
    }
    std::size_t scratch_bytes() const override { return work_bytes(layout_); }

private:
    avx2::row_layout layout_;
    std::vector<std::size_t> mask_offsets_;  // per row; empty without a mask
    std::optional<avx2::row_quantize> input_;  // x's codes' parameters; none for float32 x
    avx2::row_quantize q_;
    softmax_quantize_rows rows_;
};

// Where each row of x's mask starts: x's rows numbered in row-major order,
// the mask broadcast to x's shape, contiguous along the last axis.
std::optional<std::vector<std::size_t>> mask_row_offsets(const shape& x, const shape& mask) {
    if (mask.type() != dtype::float_type || mask.ndim() == 0 || mask.lens().back() != x.lens().back() ||
        mask.strides().back() != 1)
        return std::nullopt;
    const auto strides = ops::broadcast_strides(mask, x.lens());
    const std::vector<std::size_t> outer(x.lens().begin(), x.lens().end() - 1);
    std::vector<std::size_t> offsets;
    offsets.reserve(x.elements() / std::max<std::size_t>(x.lens().back(), 1));
    ops::for_each_broadcast<1>(outer, {std::vector<std::size_t>(strides.begin(), strides.end() - 1)},
                               [&](std::size_t, const std::size_t* off) { offsets.push_back(off[0]); });
    return offsets;
}

class layer_norm_quantize_kernel final : public cpu_kernel {
public:
    layer_norm_quantize_kernel(avx2::row_layout layout, double epsilon, row_parameter scale, row_parameter bias,
                               avx2::row_quantize q, layer_norm_quantize_rows rows)
        : layout_(layout), epsilon_(epsilon), scale_(std::move(scale)), bias_(std::move(bias)), q_(q), rows_(rows) {}
    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        rows_(layout_, epsilon_, inputs[0].data_as<const float>(), pointer(scale_, inputs, 1), pointer(bias_, inputs, 2),
              q_, result.data_as<std::byte>());
    }

private:
    static const float* pointer(const row_parameter& p, const std::vector<argument>& inputs, std::size_t index) {
        return p.from_input ? inputs[index].data_as<const float>() : p.expanded.data();
    }
    avx2::row_layout layout_;
    double epsilon_;
    row_parameter scale_, bias_;
    avx2::row_quantize q_;
    layer_norm_quantize_rows rows_;
};

std::shared_ptr<const cpu_kernel> softmax_quantize_kernel_with(const kernel_request& r, softmax_quantize_rows rows) {
    const auto* f = r.op.get_if<op::softmax_quantize>();
    if (f == nullptr) return nullptr;
    const shape& x = r.input_shapes.at(0);
    const std::size_t first = f->has_mask ? 2 : 1;
    std::optional<avx2::row_quantize> input;
    if (f->reads_codes()) {
        input = avx2::row_quantize{static_cast<float>(f->input_scale), static_cast<float>(f->input_zero_point),
                                   x.type() == dtype::uint8_type};
    }
    // Codes are laid out as the floats they stand for.
    auto layout = rows_from(input ? shape{dtype::float_type, x.lens(), x.strides()} : x, x.ndim() - 1, r, 24);
    auto q = row_quantize_of(r, first);
    if (!layout || !q || !r.output_shape.standard()) return nullptr;
    std::vector<std::size_t> offsets;
    if (f->has_mask) {
        auto o = mask_row_offsets(x, r.input_shapes[1]);
        if (!o) return nullptr;
        offsets = std::move(*o);
    }
    return std::make_shared<softmax_quantize_kernel>(*layout, std::move(offsets), input, *q, rows);
}

std::shared_ptr<const cpu_kernel> layer_norm_quantize_kernel_with(const kernel_request& r,
                                                                  layer_norm_quantize_rows rows) {
    const auto* ln = r.op.get_if<op::layer_norm_quantize>();
    if (ln == nullptr) return nullptr;
    const shape& x = r.input_shapes.at(0);
    const std::size_t a = ops::normalize_axis(r.op.name(), ln->axis, x.ndim());
    auto layout = rows_from(x, a, r, 8);
    auto scale = row_parameter_of(r, 1, x, a);
    auto bias = row_parameter_of(r, 2, x, a);
    auto q = row_quantize_of(r, 3);
    if (!layout || !scale || !bias || !q || !r.output_shape.standard()) return nullptr;
    return std::make_shared<layer_norm_quantize_kernel>(*layout, ln->epsilon, std::move(*scale), std::move(*bias), *q,
                                                        rows);
}

std::shared_ptr<const cpu_kernel> softmax_kernel_with(const kernel_request& r, softmax_rows rows) {
    const shape& x = r.input_shapes.at(0);
    std::int64_t axis = 0;
    bool take_log = false;
    if (const auto* s = r.op.get_if<op::softmax>()) {
        axis = s->axis;
    } else if (const auto* l = r.op.get_if<op::log_softmax>()) {
        axis = l->axis;
        take_log = true;
    } else {
        return nullptr;
    }
    const std::size_t a = ops::normalize_axis(r.op.name(), axis, x.ndim());
    for (std::size_t d = a + 1; d < x.ndim(); ++d)
        if (x.lens()[d] != 1) return nullptr;  // the axis must be the innermost one
    auto layout = rows_from(x, a, r, 24);
    if (!layout) return nullptr;
    return std::make_shared<softmax_kernel>(*layout, take_log, rows, a);
}

// A layer_norm, or an rms_norm (`rows` its loop), over rows.
template <class Norm>
std::shared_ptr<const cpu_kernel> layer_norm_kernel_with(const kernel_request& r, layer_norm_rows rows) {
    const auto* ln = r.op.get_if<Norm>();
    if (ln == nullptr) return nullptr;
    const shape& x = r.input_shapes.at(0);
    const std::size_t a = ops::normalize_axis(r.op.name(), ln->axis, x.ndim());
    auto layout = rows_from(x, a, r, 8);
    auto scale = row_parameter_of(r, 1, x, a);
    auto bias = row_parameter_of(r, 2, x, a);
    if (!layout || !scale || !bias) return nullptr;
    return std::make_shared<layer_norm_kernel>(*layout, ln->epsilon, std::move(*scale), std::move(*bias), rows, a);
}

}  // namespace

std::shared_ptr<const cpu_kernel> make_softmax_kernel(const kernel_request& r) {
    return softmax_kernel_with(r, avx2::run_softmax);
}
std::shared_ptr<const cpu_kernel> make_layer_norm_kernel(const kernel_request& r) {
    return layer_norm_kernel_with<op::layer_norm>(r, avx2::run_layer_norm);
}
std::shared_ptr<const cpu_kernel> make_rms_norm_kernel(const kernel_request& r) {
    return layer_norm_kernel_with<op::rms_norm>(r, avx2::run_rms_norm);
}
std::shared_ptr<const cpu_kernel> make_softmax_avx512_kernel(const kernel_request& r) {
    return avx512::enabled() ? softmax_kernel_with(r, avx512::run_softmax) : nullptr;
}
std::shared_ptr<const cpu_kernel> make_layer_norm_avx512_kernel(const kernel_request& r) {
    return avx512::enabled() ? layer_norm_kernel_with<op::layer_norm>(r, avx512::run_layer_norm) : nullptr;
}
std::shared_ptr<const cpu_kernel> make_rms_norm_avx512_kernel(const kernel_request& r) {
    return avx512::enabled() ? layer_norm_kernel_with<op::rms_norm>(r, avx512::run_rms_norm) : nullptr;
}
std::shared_ptr<const cpu_kernel> make_softmax_quantize_kernel(const kernel_request& r) {
    return softmax_quantize_kernel_with(r, avx2::run_softmax_quantize);
}
std::shared_ptr<const cpu_kernel> make_layer_norm_quantize_kernel(const kernel_request& r) {
    return layer_norm_quantize_kernel_with(r, avx2::run_layer_norm_quantize);
}
std::shared_ptr<const cpu_kernel> make_softmax_quantize_avx512_kernel(const kernel_request& r) {
    return avx512::enabled() ? softmax_quantize_kernel_with(r, avx512::run_softmax_quantize) : nullptr;
}
std::shared_ptr<const cpu_kernel> make_layer_norm_quantize_avx512_kernel(const kernel_request& r) {
    return avx512::enabled() ? layer_norm_quantize_kernel_with(r, avx512::run_layer_norm_quantize) : nullptr;
}

}  // namespace kiln
