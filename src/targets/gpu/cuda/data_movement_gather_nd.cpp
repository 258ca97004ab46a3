// gather_nd (ONNX GatherND, e.g. BERT's attention-mask preparation on bool
// data): any strides on data and indices, batch_dims, int32 or int64 indices,
// negative indices counting from the end, elements of 1, 2, 4 or 8 bytes. An
// index outside its dim stores the launch's status code.
#include "targets/gpu/cuda/data_movement_gather_nd.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/shape.hpp"
#include "ops/index_scatter.hpp"
#include "targets/gpu/cuda/cuda_device.hpp"
#include "targets/gpu/cuda/data_movement_layout.hpp"
#include "targets/gpu/kernels/gpu_kernel.hpp"

namespace kiln::data_movement {

namespace {

class gather_nd_kernel final : public gpu_kernel {
public:
    gather_nd_kernel(std::size_t batch_dims, std::string message)
        : batch_dims_(batch_dims), message_(std::move(message)) {}

    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        const shape& data = inputs.at(0).get_shape();
        const shape& indices = inputs.at(1).get_shape();
        const std::uint64_t count = result.get_shape().elements();
        if (count == 0) return;
        const std::size_t b = batch_dims_;
        const std::size_t outer_rank = indices.ndim() - 1;
        const std::size_t m = indices.lens().back();
        gather_nd_walk walk;
        walk.outer_rank = static_cast<int>(outer_rank);
        for (std::size_t d = 0; d < outer_rank; ++d) {
            walk.outer_lens[d] = indices.lens()[d];
            walk.index_strides[d] = indices.strides()[d];
            // The batch dims of the result are data's own (same lens, checked by the factory).
            walk.outer_data_strides[d] = d < b ? data.strides()[d] : 0;
        }
        walk.index_last_stride = indices.strides().back();
        walk.depth = static_cast<int>(m);
        for (std::size_t j = 0; j < m; ++j) {
            walk.addressed_extents[j] = data.lens()[b + j];
            walk.addressed_strides[j] = data.strides()[b + j];
        }
        walk.inner = walk_of(data, b + m, data.ndim(), true);
        walk.inner_count = 1;
        for (std::size_t d = b + m; d < data.ndim(); ++d) walk.inner_count *= data.lens()[d];
        const bool wide = needs_wide_index({count, span(data), span(indices)});
        launch_gather_nd(as_cuda(launch.stream), result.data(), inputs[0].data(), inputs[1].data(),
                         indices.type() == dtype::int64_type, walk, count, data.element_size(), wide, launch.status,
                         launch.status_code);
    }
    std::string algorithm() const override { return "cuda_gather_nd"; }
    bool reports_status() const override { return true; }
    std::string status_message() const override { return message_; }

private:
    std::size_t batch_dims_;
    std::string message_;
};

// The result lens gather_nd::compute_shape gives, into `lens`; false where it would fail.
bool expected_lens(const shape& data, const shape& indices, std::int64_t batch_dims, std::vector<std::size_t>& lens) {
    if (data.ndim() == 0 || indices.ndim() == 0 || batch_dims < 0) return false;
    const auto b = static_cast<std::size_t>(batch_dims);
    if (b >= data.ndim() || b >= indices.ndim()) return false;
    for (std::size_t d = 0; d < b; ++d)
        if (data.lens()[d] != indices.lens()[d]) return false;
    const std::size_t m = indices.lens().back();
    if (m < 1 || m > data.ndim() - b) return false;
    lens.assign(indices.lens().begin(), indices.lens().end() - 1);
    lens.insert(lens.end(), data.lens().begin() + static_cast<std::ptrdiff_t>(b + m), data.lens().end());
    return true;
}

}  // namespace

std::shared_ptr<const gpu_kernel> make_gather_nd_kernel(const gpu_kernel_request& request) {
    const auto* op = request.op.get_if<op::gather_nd>();
    if (op == nullptr || request.input_shapes.size() != 2) return nullptr;
    const shape& data = request.input_shapes[0];
    const shape& indices = request.input_shapes[1];
    const shape& out = request.output_shape;
    if (!walkable(data) || !walkable(indices) || out.is_tuple() || !out.standard()) return nullptr;
    if (!movable_dtype(data.type()) || out.type() != data.type()) return nullptr;
    if (indices.type() != dtype::int32_type && indices.type() != dtype::int64_type) return nullptr;
    std::vector<std::size_t> lens;
    if (!expected_lens(data, indices, op->batch_dims, lens) || out.lens() != lens) return nullptr;
    return std::make_shared<gather_nd_kernel>(
        static_cast<std::size_t>(op->batch_dims),
        "gather_nd: an index is out of range for the dims of data " + to_string(data.lens()) +
            " it addresses (an index into a dim of extent n must be in [-n, n - 1])");
}

}  // namespace kiln::data_movement
