// Strided copies: contiguous (the plan's packing copy), reshape and flatten of
// a non-standard input, and concat (each input copied into its window of the
// result). All are "copy these lens from these strides to those strides".
#include <cstddef>
#include <vector>

#include "ops/op_helpers.hpp"
#include "ops/shape_ops.hpp"
#include "targets/gpu/cuda/cuda_check.hpp"
#include "targets/gpu/cuda/cuda_device.hpp"
#include "targets/gpu/cuda/data_movement_kernels.hpp"
#include "targets/gpu/cuda/data_movement_layout.hpp"
#include "targets/gpu/cuda/data_movement_ops.hpp"

namespace kiln::data_movement {

namespace {

// Below this extent on either side a tile is mostly empty: the plain copy does as well.
constexpr std::uint64_t min_transpose_extent = 8;

// Runs a simplified copy as tiled 2-D transposes when the destination is
// contiguous along the innermost dim and the source along another one (a
// permute such as NCHW -> NHWC or swapping the last two dims); false when
// it does not apply.
bool enqueue_transpose(cudaStream_t stream, std::byte* dst, const std::byte* src, const copy_walk& walk,
                       std::uint64_t count, std::size_t size) {
    const int i = walk.rank - 1;
    if (i < 1 || walk.dst_strides[i] != 1 || walk.src_strides[i] == 1) return false;
    int j = -1;
    for (int d = 0; d < i && j < 0; ++d)
        if (walk.src_strides[d] == 1) j = d;
    if (j < 0 || walk.lens[i] < min_transpose_extent || walk.lens[j] < min_transpose_extent) return false;
    transpose_walk t;
    t.len_i = walk.lens[i];
    t.len_j = walk.lens[j];
    t.src_stride_i = walk.src_strides[i];
    t.src_stride_j = walk.src_strides[j];
    t.dst_stride_i = walk.dst_strides[i];
    t.dst_stride_j = walk.dst_strides[j];
    for (int d = 0; d < i; ++d) {
        if (d == j) continue;
        t.batch.lens[t.batch.rank] = walk.lens[d];
        t.batch.src_strides[t.batch.rank] = walk.src_strides[d];
        t.batch.dst_strides[t.batch.rank] = walk.dst_strides[d];
        ++t.batch.rank;
    }
    if (!transpose_grid_fits(t)) return false;
    const std::uint64_t batches = count / (t.len_i * t.len_j);
    const bool wide = needs_wide_index(
        {count, span(walk.lens, walk.src_strides, walk.rank), span(walk.lens, walk.dst_strides, walk.rank)});
    launch_tiled_transpose(stream, dst, src, t, batches, size, wide);
    return true;
}

// Copies the elements of `src` (its lens, its strides) to `dst` laid out
// with `dst_strides` (element units) over the same lens.
void enqueue_strided_copy(cudaStream_t stream, std::byte* dst, const std::vector<std::size_t>& dst_strides,
                          const std::byte* src, const shape& src_shape) {
    const std::size_t count = src_shape.elements();
    if (count == 0) return;
    const std::size_t size = src_shape.element_size();
    copy_walk walk = simplified_copy(src_shape.lens(), src_shape.strides(), dst_strides);
    // Contiguous on both sides: one memcpy (a graph captures it as a copy node).
    if (walk.rank == 0 || (walk.rank == 1 && walk.src_strides[0] == 1 && walk.dst_strides[0] == 1)) {
        KILN_CUDA(cudaMemcpyAsync(dst, src, count * size, cudaMemcpyDeviceToDevice, stream));
        return;
    }
    if (enqueue_transpose(stream, dst, src, walk, count, size)) return;
    const std::size_t unit = widen_copy(walk, size, dst, src);
    const std::uint64_t units = count / (unit / size);
    const bool wide = needs_wide_index({units, span(walk.lens, walk.src_strides, walk.rank),
                                        span(walk.lens, walk.dst_strides, walk.rank)});
    launch_strided_copy(stream, dst, src, walk, units, unit, wide);
}

bool plain_tensors(const gpu_kernel_request& request) {
    if (!walkable(request.output_shape) || !request.output_shape.standard()) return false;
    if (!movable_dtype(request.output_shape.type())) return false;
    for (const auto& s : request.input_shapes)
        if (!walkable(s) || s.type() != request.output_shape.type()) return false;
    return true;
}

// The result is the input's elements in row-major order, written standard.
class row_major_copy_kernel final : public gpu_kernel {
public:
    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        const shape& in = inputs.at(0).get_shape();
        enqueue_strided_copy(as_cuda(launch.stream), result.data(), shape::standard_strides(in.lens()),
                             inputs[0].data(), in);
    }
    std::string algorithm() const override { return "cuda_strided_copy"; }
};

class concat_kernel final : public gpu_kernel {
public:
    explicit concat_kernel(std::int64_t axis) : axis_(axis) {}
    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        const shape& out = result.get_shape();
        const std::size_t a = ops::normalize_axis("concat", axis_, out.ndim());
        const std::size_t size = out.element_size();
        std::size_t start = 0;
        for (const auto& in : inputs) {
            const shape& s = in.get_shape();
            // This input's window: its lens at the result's strides, from `start` along the axis.
            std::byte* window = result.data() + start * out.strides()[a] * size;
            enqueue_strided_copy(as_cuda(launch.stream), window, out.strides(), in.data(), s);
            start += s.lens()[a];
        }
    }
    std::string algorithm() const override { return "cuda_concat"; }

private:
    std::int64_t axis_;
};

}  // namespace

std::shared_ptr<const gpu_kernel> make_row_major_copy_kernel(const gpu_kernel_request& request) {
    const std::string name = request.op.name();
    if (name != "contiguous" && name != "reshape" && name != "flatten") return nullptr;
    if (request.input_shapes.size() != 1 || !plain_tensors(request)) return nullptr;
    if (request.input_shapes[0].elements() != request.output_shape.elements()) return nullptr;
    return std::make_shared<row_major_copy_kernel>();
}

std::shared_ptr<const gpu_kernel> make_concat_kernel(const gpu_kernel_request& request) {
    const auto* op = request.op.get_if<op::concat>();
    if (op == nullptr || request.input_shapes.empty() || !plain_tensors(request)) return nullptr;
    const auto rank = static_cast<std::int64_t>(request.output_shape.ndim());
    if (op->axis < -rank || op->axis >= rank) return nullptr;
    for (const auto& s : request.input_shapes)
        if (s.ndim() != request.output_shape.ndim()) return nullptr;
    return std::make_shared<concat_kernel>(op->axis);
}

}  // namespace kiln::data_movement
