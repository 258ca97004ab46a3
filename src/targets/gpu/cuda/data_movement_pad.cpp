// pad in all three modes (constant, reflect, edge), any input strides.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/shape_ops.hpp"
#include "targets/gpu/cuda/cuda_device.hpp"
#include "targets/gpu/cuda/data_movement_kernels.hpp"
#include "targets/gpu/cuda/data_movement_layout.hpp"
#include "targets/gpu/cuda/data_movement_ops.hpp"

namespace kiln::data_movement {

namespace {

// The pad value as the reference converts it (op::pad::compute): through
// float for floating types, saturating for integers with NaN as 0.
template <class T>
T converted_fill(double v) {
    if constexpr (std::is_same_v<T, bool>) {
        return v != 0.0;
    } else if constexpr (is_float_like_v<T>) {
        return T(static_cast<float>(v));
    } else {
        if (std::isnan(v)) return T{0};
        if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
        if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
        return static_cast<T>(v);
    }
}

// The fill's bytes in the low bytes of a word (what launch_pad expects).
std::uint64_t fill_bits(dtype t, double value) {
    std::uint64_t bits = 0;
    visit_type(t, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T fill = converted_fill<T>(value);
        static_assert(sizeof(T) <= sizeof(bits));
        std::memcpy(&bits, &fill, sizeof(T));
    });
    return bits;
}

pad_walk_mode walk_mode(op::pad_mode mode) {
    switch (mode) {
    case op::pad_mode::reflect: return pad_walk_mode::reflect;
    case op::pad_mode::edge: return pad_walk_mode::edge;
    default: return pad_walk_mode::constant;
    }
}

class pad_kernel final : public gpu_kernel {
public:
    pad_kernel(std::vector<std::int64_t> pads, pad_walk_mode mode, std::uint64_t fill)
        : pads_(std::move(pads)), mode_(mode), fill_(fill) {}

    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        const shape& in = inputs.at(0).get_shape();
        const shape& out = result.get_shape();
        const std::size_t count = out.elements();
        if (count == 0) return;
        pad_walk walk;
        walk.rank = static_cast<int>(in.ndim());
        walk.mode = mode_;
        for (std::size_t d = 0; d < in.ndim(); ++d) {
            walk.out_lens[d] = out.lens()[d];
            walk.in_lens[d] = in.lens()[d];
            walk.in_strides[d] = in.strides()[d];
            walk.begin[d] = pads_[d];
        }
        const bool wide = needs_wide_index({count, span(in)});
        launch_pad(as_cuda(launch.stream), result.data(), inputs[0].data(), walk, count, in.element_size(), fill_,
                   wide);
    }
    std::string algorithm() const override { return "cuda_pad"; }

private:
    std::vector<std::int64_t> pads_;
    pad_walk_mode mode_;
    std::uint64_t fill_;
};

}  // namespace

std::shared_ptr<const gpu_kernel> make_pad_kernel(const gpu_kernel_request& request) {
    const auto* op = request.op.get_if<op::pad>();
    if (op == nullptr || request.input_shapes.size() != 1) return nullptr;
    const shape& in = request.input_shapes[0];
    const shape& out = request.output_shape;
    // visit_type (the fill conversion) knows no storage types: those stay on the host.
    if (is_storage_type(in.type()) || !movable_dtype(in.type()) || in.type() != out.type()) return nullptr;
    if (!walkable(in) || !walkable(out) || !out.standard() || in.ndim() != out.ndim()) return nullptr;
    if (op->pads.size() != 2 * in.ndim()) return nullptr;
    for (auto p : op->pads)
        if (p < 0) return nullptr;
    return std::make_shared<pad_kernel>(op->pads, walk_mode(op->mode), fill_bits(in.type(), op->value));
}

}  // namespace kiln::data_movement
