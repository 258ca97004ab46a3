// The cpu kernels for softmax, log_softmax and layer_norm over the last
// dimensions of a standard float32 tensor: AVX2 row loops, threaded over
// rows (softmax_avx2.cpp, layer_norm_avx2.cpp). Other layouts, dtypes or
// CPUs decline to the reference compute.
#include <optional>

#include "ops/norm.hpp"
#include "ops/op_helpers.hpp"
#include "targets/cpu/kernels/normalization/normalization_avx2.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/cpu_kernels.hpp"

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

class softmax_kernel final : public cpu_kernel {
public:
    softmax_kernel(avx2::row_layout layout, bool take_log) : layout_(layout), take_log_(take_log) {}
    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        avx2::run_softmax(layout_, take_log_, inputs[0].data_as<const float>(), result.data_as<float>());
    }

private:
    avx2::row_layout layout_;
    bool take_log_;
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

class layer_norm_kernel final : public cpu_kernel {
public:
    layer_norm_kernel(avx2::row_layout layout, double epsilon, row_parameter scale, row_parameter bias)
        : layout_(layout), epsilon_(epsilon), scale_(std::move(scale)), bias_(std::move(bias)) {}
    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        avx2::run_layer_norm(layout_, epsilon_, inputs[0].data_as<const float>(), pointer(scale_, inputs, 1),
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
};

}  // namespace

std::shared_ptr<const cpu_kernel> make_softmax_kernel(const kernel_request& r) {
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
    return std::make_shared<softmax_kernel>(*layout, take_log);
}

std::shared_ptr<const cpu_kernel> make_layer_norm_kernel(const kernel_request& r) {
    const auto* ln = r.op.get_if<op::layer_norm>();
    if (ln == nullptr) return nullptr;
    const shape& x = r.input_shapes.at(0);
    const std::size_t a = ops::normalize_axis(r.op.name(), ln->axis, x.ndim());
    auto layout = rows_from(x, a, r, 8);
    auto scale = row_parameter_of(r, 1, x, a);
    auto bias = row_parameter_of(r, 2, x, a);
    if (!layout || !scale || !bias) return nullptr;
    return std::make_shared<layer_norm_kernel>(*layout, ln->epsilon, std::move(*scale), std::move(*bias));
}

}  // namespace kiln
