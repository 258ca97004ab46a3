// The cpu kernel for scatter_nd without a reduction: the data copied into
// the result, then each update slice copied whole to the place its index
// row names. What a language model's prefill writes into a new static KV
// cache (index_put of the prompt's keys at their positions) runs as a few
// contiguous copies instead of the reference's per-element walk. Offsets
// that depend only on shapes are worked out once, when the kernel is built.
// scatter_nd_in_place runs the same kernel without the copy of the data:
// its result is the data, and only the update slices are written.
#include <cstdint>
#include <string>

#include "ops/index_scatter.hpp"
#include "targets/cpu/kernels/copy/strided_copy.hpp"
#include "targets/cpu/kernels/cpu_kernels.hpp"

namespace kiln {

namespace {

// The element offsets of each index of a row-major walk over `lens` through `strides`.
std::vector<std::size_t> walk_offsets(const std::vector<std::size_t>& lens, const std::vector<std::size_t>& strides) {
    std::vector<std::size_t> offsets{0};
    for (std::size_t d = 0; d < lens.size(); ++d) {
        std::vector<std::size_t> next;
        next.reserve(offsets.size() * lens[d]);
        for (auto o : offsets)
            for (std::size_t i = 0; i < lens[d]; ++i) next.push_back(o + i * strides[d]);
        offsets = std::move(next);
    }
    return offsets;
}

class scatter_nd_slices_kernel final : public cpu_kernel {
public:
    scatter_nd_slices_kernel(const shape& data, const shape& indices, const shape& updates, const shape& result,
                             bool in_place)
        : in_place_(in_place),
          data_copy_(data),
          slice_copy_(std::vector<std::size_t>(updates.lens().begin() + static_cast<std::ptrdiff_t>(indices.ndim() - 1),
                                               updates.lens().end()),
                      std::vector<std::size_t>(updates.strides().begin() +
                                                   static_cast<std::ptrdiff_t>(indices.ndim() - 1),
                                               updates.strides().end()),
                      updates.element_size()),
          depth_(indices.lens().back()),
          wide_indices_(indices.type() != dtype::int32_type),
          index_stride_(indices.strides().back()),
          result_lens_(result.lens().begin(), result.lens().begin() + static_cast<std::ptrdiff_t>(depth_)),
          result_strides_(result.strides().begin(), result.strides().begin() + static_cast<std::ptrdiff_t>(depth_)) {
        const std::vector<std::size_t> slice_lens(indices.lens().begin(), indices.lens().end() - 1);
        index_rows_ = walk_offsets(slice_lens, {indices.strides().begin(), indices.strides().end() - 1});
        const auto slice_dims = static_cast<std::ptrdiff_t>(slice_lens.size());
        update_slices_ = walk_offsets(slice_lens, {updates.strides().begin(), updates.strides().begin() + slice_dims});
    }

    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        std::byte* out = result.data();
        if (in_place_) {
            // Every index is checked before the first write: an error leaves the caller's data as it was.
            for (std::size_t t = 0; t < index_rows_.size(); ++t)
                for (std::size_t d = 0; d < depth_; ++d) index_at(inputs[1], index_rows_[t] + d * index_stride_, d);
        } else {
            data_copy_.copy_range(inputs[0].data(), out, 0, data_copy_.elements());
        }
        const std::byte* updates = inputs[2].data();
        const std::size_t element_size = slice_copy_.element_size();
        for (std::size_t t = 0; t < index_rows_.size(); ++t) {
            std::size_t base = 0;
            for (std::size_t d = 0; d < depth_; ++d)
                base += index_at(inputs[1], index_rows_[t] + d * index_stride_, d) * result_strides_[d];
            slice_copy_.copy_range(updates + update_slices_[t] * element_size, out + base * element_size, 0,
                                   slice_copy_.elements());
        }
    }

private:
    // Index `d` of a row, made non-negative; an out-of-range one is the
    // reference's error.
    std::size_t index_at(const argument& indices, std::size_t offset, std::size_t d) const {
        const std::int64_t v = wide_indices_ ? indices.data_as<const std::int64_t>()[offset]
                                             : indices.data_as<const std::int32_t>()[offset];
        const auto n = static_cast<std::int64_t>(result_lens_[d]);
        if (v < -n || v >= n)
            fail(error_kind::out_of_range, "scatter_nd: index " + std::to_string(v) + " is out of range for axis " +
                                               std::to_string(d) + " of extent " + std::to_string(n) +
                                               (n == 0 ? std::string(" (the axis is empty)")
                                                       : " (valid indices are " + std::to_string(-n) + " to " +
                                                             std::to_string(n - 1) + ")"));
        return static_cast<std::size_t>(v < 0 ? v + n : v);
    }

    bool in_place_;            // the result is the data: no copy of it
    strided_copy data_copy_;   // data -> result, row-major
    strided_copy slice_copy_;  // one update slice -> its place in the result
    std::size_t depth_;        // index values per row
    bool wide_indices_;
    std::size_t index_stride_;
    std::vector<std::size_t> result_lens_, result_strides_;  // of the indexed axes
    std::vector<std::size_t> index_rows_;                    // element offset of each index row
    std::vector<std::size_t> update_slices_;                 // element offset of each update slice
};

}  // namespace

std::shared_ptr<const cpu_kernel> make_scatter_nd_kernel(const kernel_request& r) {
    const bool in_place = r.op.get_if<op::scatter_nd_in_place>() != nullptr;
    const auto* scatter = r.op.get_if<op::scatter_nd>();
    if (!in_place && (scatter == nullptr || scatter->reduction != op::scatter_reduction::none)) return nullptr;
    const shape& data = r.input_shapes.at(0);
    const shape& indices = r.input_shapes.at(1);
    const shape& updates = r.input_shapes.at(2);
    if (!r.output_shape.standard() || data.ndim() > 16 || updates.ndim() > 16) return nullptr;
    if (updates.ndim() + 1 <= indices.ndim()) return nullptr;  // each slice a single element: the reference
    if (indices.type() != dtype::int32_type && indices.type() != dtype::int64_type) return nullptr;
    return std::make_shared<scatter_nd_slices_kernel>(data, indices, updates, r.output_shape, in_place);
}

}  // namespace kiln
