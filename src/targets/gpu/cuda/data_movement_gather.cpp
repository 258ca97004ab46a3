// gather (ONNX Gather, embedding lookups) and gather_elements: any strides on
// data and indices, int32 or int64 indices, negative indices counting from
// the end. An index outside the axis stores the launch's status code.
#include <cstdint>
#include <string>

#include "ops/index.hpp"
#include "ops/index_scatter.hpp"
#include "ops/op_helpers.hpp"
#include "targets/gpu/cuda/cuda_device.hpp"
#include "targets/gpu/cuda/data_movement_kernels.hpp"
#include "targets/gpu/cuda/data_movement_layout.hpp"
#include "targets/gpu/cuda/data_movement_ops.hpp"

namespace kiln::data_movement {

namespace {

bool index_dtype(dtype t) { return t == dtype::int32_type || t == dtype::int64_type; }

// Moves k elements at once where each gathered row (the dims after the axis)
// is contiguous and every step between rows, and both pointers, allow it.
std::size_t widen_gather(gather_walk& w, std::size_t element_bytes, std::uint64_t& count, const void* dst,
                         const void* data) {
    if (w.inner.rank != 1 || w.inner.strides[0] != 1) return element_bytes;
    const auto dst_address = reinterpret_cast<std::uintptr_t>(dst);
    const auto data_address = reinterpret_cast<std::uintptr_t>(data);
    for (std::size_t unit = 16; unit > element_bytes; unit /= 2) {
        const std::size_t k = unit / element_bytes;
        bool fits = w.inner.lens[0] % k == 0 && w.axis_stride % k == 0 && dst_address % unit == 0 &&
                    data_address % unit == 0;
        for (int d = 0; fits && d < w.outer.rank; ++d) fits = w.outer.strides[d] % k == 0;
        if (!fits) continue;
        w.inner.lens[0] /= k;
        w.inner_count /= k;
        w.axis_stride /= k;
        for (int d = 0; d < w.outer.rank; ++d) w.outer.strides[d] /= k;
        count /= k;
        return unit;
    }
    return element_bytes;
}

std::string range_message(const std::string& op, std::size_t axis, std::size_t extent) {
    return op + ": an index is out of range for axis " + std::to_string(axis) + " of extent " + std::to_string(extent) +
           " (valid indices are -" + std::to_string(extent) + " to " +
           std::to_string(static_cast<std::int64_t>(extent) - 1) + ")";
}

class gather_kernel final : public gpu_kernel {
public:
    gather_kernel(std::int64_t axis, std::string message) : axis_(axis), message_(std::move(message)) {}

    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        const shape& data = inputs.at(0).get_shape();
        const shape& indices = inputs.at(1).get_shape();
        std::uint64_t count = result.get_shape().elements();
        if (count == 0) return;
        const std::size_t a = ops::normalize_axis("gather", axis_, data.ndim());
        gather_walk walk;
        walk.outer = walk_of(data, 0, a, true);
        walk.index = walk_of(indices, 0, indices.ndim(), true);
        walk.inner = walk_of(data, a + 1, data.ndim(), true);
        walk.index_count = indices.elements();
        walk.inner_count = 1;
        for (std::size_t d = a + 1; d < data.ndim(); ++d) walk.inner_count *= data.lens()[d];
        walk.axis_extent = data.lens()[a];
        walk.axis_stride = data.strides()[a];
        const std::size_t size = data.element_size();
        const std::size_t unit = widen_gather(walk, size, count, result.data(), inputs[0].data());
        const bool wide = needs_wide_index({count, span(data), span(indices)});
        launch_gather(as_cuda(launch.stream), result.data(), inputs[0].data(), inputs[1].data(),
                      indices.type() == dtype::int64_type, walk, count, unit, wide, launch.status,
                      launch.status_code);
    }
    std::string algorithm() const override { return "cuda_gather"; }
    bool reports_status() const override { return true; }
    std::string status_message() const override { return message_; }

private:
    std::int64_t axis_;
    std::string message_;
};

class gather_elements_kernel final : public gpu_kernel {
public:
    gather_elements_kernel(std::int64_t axis, std::string message) : axis_(axis), message_(std::move(message)) {}

    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        const shape& data = inputs.at(0).get_shape();
        const shape& indices = inputs.at(1).get_shape();
        const std::uint64_t count = indices.elements();
        if (count == 0) return;
        const std::size_t a = ops::normalize_axis("gather_elements", axis_, data.ndim());
        gather_elements_walk walk;
        walk.rank = static_cast<int>(indices.ndim());
        walk.axis = static_cast<int>(a);
        for (std::size_t d = 0; d < indices.ndim(); ++d) {
            walk.lens[d] = indices.lens()[d];
            walk.index_strides[d] = indices.strides()[d];
            walk.data_strides[d] = data.strides()[d];
        }
        walk.axis_extent = data.lens()[a];
        const bool wide = needs_wide_index({count, span(data), span(indices)});
        launch_gather_elements(as_cuda(launch.stream), result.data(), inputs[0].data(), inputs[1].data(),
                               indices.type() == dtype::int64_type, walk, count, data.element_size(), wide,
                               launch.status, launch.status_code);
    }
    std::string algorithm() const override { return "cuda_gather_elements"; }
    bool reports_status() const override { return true; }
    std::string status_message() const override { return message_; }

private:
    std::int64_t axis_;
    std::string message_;
};

// The checks both gathers share: two plain inputs, movable data, int indices, a standard result.
bool gatherable(const gpu_kernel_request& request) {
    if (request.input_shapes.size() != 2) return false;
    const shape& data = request.input_shapes[0];
    const shape& indices = request.input_shapes[1];
    const shape& out = request.output_shape;
    return walkable(data) && walkable(indices) && !out.is_tuple() && out.standard() && data.ndim() >= 1 &&
           movable_dtype(data.type()) && out.type() == data.type() && index_dtype(indices.type());
}

bool axis_in_range(std::int64_t axis, std::size_t rank) {
    const auto r = static_cast<std::int64_t>(rank);
    return axis >= -r && axis < r;
}

std::size_t normalized(std::int64_t axis, std::size_t rank) {
    return static_cast<std::size_t>(axis < 0 ? axis + static_cast<std::int64_t>(rank) : axis);
}

}  // namespace

std::shared_ptr<const gpu_kernel> make_gather_kernel(const gpu_kernel_request& request) {
    const auto* op = request.op.get_if<op::gather>();
    if (op == nullptr || !gatherable(request)) return nullptr;
    const shape& data = request.input_shapes[0];
    const shape& indices = request.input_shapes[1];
    if (!axis_in_range(op->axis, data.ndim())) return nullptr;
    const std::size_t a = normalized(op->axis, data.ndim());
    // data.lens[:a] + indices.lens + data.lens[a+1:], as op::gather::compute_shape.
    std::vector<std::size_t> lens(data.lens().begin(), data.lens().begin() + static_cast<std::ptrdiff_t>(a));
    lens.insert(lens.end(), indices.lens().begin(), indices.lens().end());
    lens.insert(lens.end(), data.lens().begin() + static_cast<std::ptrdiff_t>(a) + 1, data.lens().end());
    if (request.output_shape.lens() != lens) return nullptr;
    return std::make_shared<gather_kernel>(op->axis, range_message("gather", a, data.lens()[a]));
}

std::shared_ptr<const gpu_kernel> make_gather_elements_kernel(const gpu_kernel_request& request) {
    const auto* op = request.op.get_if<op::gather_elements>();
    if (op == nullptr || !gatherable(request)) return nullptr;
    const shape& data = request.input_shapes[0];
    const shape& indices = request.input_shapes[1];
    if (!axis_in_range(op->axis, data.ndim()) || indices.ndim() != data.ndim()) return nullptr;
    const std::size_t a = normalized(op->axis, data.ndim());
    for (std::size_t d = 0; d < data.ndim(); ++d)
        if (d != a && indices.lens()[d] > data.lens()[d]) return nullptr;
    if (request.output_shape.lens() != indices.lens()) return nullptr;
    return std::make_shared<gather_elements_kernel>(op->axis, range_message("gather_elements", a, data.lens()[a]));
}

}  // namespace kiln::data_movement
