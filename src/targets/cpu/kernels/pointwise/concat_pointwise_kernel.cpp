// fused_concat_pointwise: the result is cut into parts, each a contiguous
// run of the result and of one piece: for each index of the dimensions before
// the concatenation axis, a few consecutive indices along the axis within one
// piece (in the blocked layout, channel blocks of H x W x 8 floats, as many
// as make about 16K floats). A pointwise program over a part's shape runs on
// every part, its other inputs offset to the part; threads take parts. The
// parts and offsets are worked out when the kernel is built.
#include <omp.h>

#include <algorithm>
#include <map>
#include <optional>

#include "ops/fused_concat_pointwise.hpp"
#include "ops/op_helpers.hpp"
#include "targets/cpu/kernels/cpu_kernels.hpp"

namespace kiln {

namespace {

// Results below this many elements stay on one thread.
constexpr std::size_t parallel_elements = std::size_t{1} << 15;
// Parts grow to about this many elements (several channel blocks of a small
// image) so that each run of the program has work enough.
constexpr std::size_t part_target_elements = std::size_t{1} << 14;
constexpr std::size_t max_inputs = 64;

struct part {
    std::size_t runner;  // index of the program for the part's extent along the axis
    std::size_t piece;
    std::size_t output_offset;
};

class concat_pointwise_kernel final : public cpu_kernel {
public:
    concat_pointwise_kernel(std::vector<std::shared_ptr<const pointwise_runner>> runners, std::size_t operands,
                            std::vector<part> parts, std::vector<std::size_t> offsets, bool parallel, int threads)
        : runners_(std::move(runners)),
          operands_(operands),
          parts_(std::move(parts)),
          offsets_(std::move(offsets)),
          threads_(parallel ? threads : 1) {
        for (const auto& r : runners_) per_thread_ = std::max(per_thread_, r->scratch_bytes());
    }

    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        const std::size_t pieces = inputs.size() - operands_;
        const auto count = static_cast<std::ptrdiff_t>(parts_.size());
        const std::size_t stride = operands_ + 1;  // offsets per part: the piece's, then each operand's
        float* out = result.data_as<float>();
#pragma omp parallel num_threads(threads_)
        {
            std::byte* own = scratch + static_cast<std::size_t>(omp_get_thread_num()) * per_thread_;
            const void* data[max_inputs];
#pragma omp for schedule(dynamic, 1)
            for (std::ptrdiff_t p = 0; p < count; ++p) {
                const part& pt = parts_[static_cast<std::size_t>(p)];
                const std::size_t* off = offsets_.data() + static_cast<std::size_t>(p) * stride;
                data[0] = inputs[pt.piece].data_as<float>() + off[0];
                for (std::size_t k = 0; k < operands_; ++k)
                    data[k + 1] = inputs[pieces + k].data_as<float>() + off[k + 1];
                runners_[pt.runner]->run(data, out + pt.output_offset, own);
            }
        }
    }
    std::size_t scratch_bytes() const override {
        return static_cast<std::size_t>(threads_) * per_thread_;
    }

private:
    std::vector<std::shared_ptr<const pointwise_runner>> runners_;
    std::size_t operands_;
    std::vector<part> parts_;
    std::vector<std::size_t> offsets_;
    int threads_;
    std::size_t per_thread_ = 0;
};

}  // namespace

std::shared_ptr<const cpu_kernel> make_concat_pointwise_kernel(const kernel_request& r) {
    const auto* op = r.op.get_if<op::fused_concat_pointwise>();
    if (op == nullptr) return nullptr;
    const shape& out = r.output_shape;
    if (out.type() != dtype::float_type || !out.standard() || out.elements() == 0 || op->pieces < 1) return nullptr;
    const auto pieces = static_cast<std::size_t>(op->pieces);
    if (r.input_shapes.size() > max_inputs || pieces > r.input_shapes.size()) return nullptr;
    const std::size_t operands = r.input_shapes.size() - pieces;
    const std::size_t rank = out.ndim();
    const std::size_t axis = ops::normalize_axis(op->name(), op->axis, rank);
    for (std::size_t i = 0; i < pieces; ++i)
        if (r.input_shapes[i].type() != dtype::float_type || !r.input_shapes[i].standard()) return nullptr;
    for (std::size_t k = 0; k < operands; ++k)
        if (r.input_shapes[pieces + k].type() != dtype::float_type) return nullptr;

    const auto& lens = out.lens();
    std::size_t inner = 1, outer = 1;
    for (std::size_t d = axis + 1; d < rank; ++d) inner *= lens[d];
    for (std::size_t d = 0; d < axis; ++d) outer *= lens[d];
    const std::size_t max_extent = std::max<std::size_t>(1, part_target_elements / std::max<std::size_t>(1, inner));
    std::vector<std::vector<std::size_t>> operand_strides;
    for (std::size_t k = 0; k < operands; ++k)
        operand_strides.push_back(ops::broadcast_strides(r.input_shapes[pieces + k], lens));
    std::vector<argument> constants{argument()};
    for (std::size_t k = 0; k < operands; ++k)
        constants.push_back(pieces + k < r.constant_inputs.size() ? r.constant_inputs[pieces + k] : argument());
    op::fused_pointwise program;
    program.steps = op->steps;

    // One program per extent along the axis that parts have: a part is
    // [1, ..., 1, extent, the result's dimensions after the axis].
    std::map<std::size_t, std::size_t> runner_of_extent;
    std::vector<std::shared_ptr<const pointwise_runner>> runners;
    auto runner_for = [&](std::size_t extent) -> std::optional<std::size_t> {
        if (auto it = runner_of_extent.find(extent); it != runner_of_extent.end()) return it->second;
        std::vector<std::size_t> part_lens = lens;
        for (std::size_t d = 0; d < axis; ++d) part_lens[d] = 1;
        part_lens[axis] = extent;
        const shape part_shape{dtype::float_type, part_lens};
        std::vector<shape> program_inputs{part_shape};
        for (std::size_t k = 0; k < operands; ++k) {
            std::vector<std::size_t> own_lens = part_lens;
            for (std::size_t d = axis; d < rank; ++d)
                if (operand_strides[k][d] == 0) own_lens[d] = 1;
            program_inputs.push_back(shape{dtype::float_type, own_lens, operand_strides[k]});
        }
        auto runner = make_pointwise_runner(op->steps, {program, program_inputs, part_shape, constants, 1});
        if (!runner) return std::nullopt;
        runners.push_back(std::move(runner));
        runner_of_extent[extent] = runners.size() - 1;
        return runners.size() - 1;
    };

    std::vector<part> parts;
    std::vector<std::size_t> offsets;
    std::vector<std::size_t> idx(axis, 0);
    for (std::size_t o = 0; o < outer; ++o) {
        std::size_t rest = o;
        for (std::size_t d = axis; d-- > 0;) {
            idx[d] = rest % lens[d];
            rest /= lens[d];
        }
        std::size_t start = 0;  // along the result's axis
        for (std::size_t i = 0; i < pieces; ++i) {
            const auto& piece_strides = r.input_shapes[i].strides();
            const std::size_t len = r.input_shapes[i].lens()[axis];
            for (std::size_t c = 0; c < len; c += max_extent) {
                const std::size_t extent = std::min(max_extent, len - c);
                const auto runner = runner_for(extent);
                if (!runner) return nullptr;
                std::size_t piece_offset = c * piece_strides[axis],
                            output_offset = (o * lens[axis] + start + c) * inner;
                for (std::size_t d = 0; d < axis; ++d) piece_offset += idx[d] * piece_strides[d];
                parts.push_back({*runner, i, output_offset});
                offsets.push_back(piece_offset);
                for (std::size_t k = 0; k < operands; ++k) {
                    std::size_t off = (start + c) * operand_strides[k][axis];
                    for (std::size_t d = 0; d < axis; ++d) off += idx[d] * operand_strides[k][d];
                    offsets.push_back(off);
                }
            }
            start += len;
        }
    }
    const int threads = r.threads;
    return std::make_shared<concat_pointwise_kernel>(std::move(runners), operands, std::move(parts), std::move(offsets),
                                                     out.elements() >= parallel_elements, threads);
}

}  // namespace kiln
