// Concatenation as a list of memory copies, prepared when the kernel is
// built: with standard inputs and output, each input contributes one
// contiguous run per index of the dimensions before the axis. Long runs are
// split so that the threads share them (DenseNet concatenates a whole block's
// features before every layer, a few MiB each time). Any dtype: bytes move.
// An input that is a strided view (ViT's patch embeddings, a transposed
// [C, H*W], joining the class token) is copied in row-major order into its
// contiguous place with a strided copy, in pieces too.
#include <cstring>
#include <optional>

#include "ops/op_helpers.hpp"
#include "ops/shape_ops.hpp"
#include "targets/cpu/kernels/cpu_kernels.hpp"
#include "targets/cpu/kernels/copy/strided_copy.hpp"

namespace kiln {

namespace {

// Copies below this many bytes in all stay on one thread: waking the others
// costs more than a few microseconds of copying.
constexpr std::size_t parallel_bytes = std::size_t{1} << 18;
// Runs are split into pieces of at most this size to balance the threads.
constexpr std::size_t piece_bytes = std::size_t{1} << 17;

struct copy_job {
    std::size_t input;
    std::size_t from;  // byte offset in the input
    std::size_t to;    // byte offset in the result
    std::size_t bytes;
    // A strided input's block: elements [first, last) of its row-major
    // order, the block starting at `from` in the input and `to` in the result.
    bool strided = false;
    std::size_t first = 0, last = 0;
};

class concat_kernel final : public cpu_kernel {
public:
    concat_kernel(std::vector<copy_job> jobs, std::vector<std::optional<strided_copy>> blocks, std::size_t total_bytes,
                  int threads)
        : jobs_(std::move(jobs)), blocks_(std::move(blocks)), parallel_(total_bytes >= parallel_bytes), threads_(threads) {}

    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        const auto count = static_cast<std::ptrdiff_t>(jobs_.size());
        std::byte* out = result.data();
        const int threads = parallel_ ? threads_ : 1;
#pragma omp parallel for schedule(static) num_threads(threads)
        for (std::ptrdiff_t k = 0; k < count; ++k) {
            const copy_job& job = jobs_[static_cast<std::size_t>(k)];
            if (job.strided)
                blocks_[job.input]->copy_range(inputs[job.input].data() + job.from, out + job.to, job.first, job.last);
            else
                std::memcpy(out + job.to, inputs[job.input].data() + job.from, job.bytes);
        }
    }

private:
    std::vector<copy_job> jobs_;
    std::vector<std::optional<strided_copy>> blocks_;  // per input: how a strided one's blocks are read
    bool parallel_;
    int threads_;
};

}  // namespace

std::shared_ptr<const cpu_kernel> make_concat_kernel(const kernel_request& r) {
    const auto* concat = r.op.get_if<op::concat>();
    const shape& out = r.output_shape;
    if (concat == nullptr || !out.standard() || out.elements() == 0) return nullptr;
    const std::size_t axis = ops::normalize_axis("concat", concat->axis, out.ndim());
    // Per strided input: its block for one index of the dimensions before
    // the axis (lens and strides from the axis on).
    std::vector<std::optional<strided_copy>> blocks(r.input_shapes.size());
    for (std::size_t i = 0; i < r.input_shapes.size(); ++i) {
        const shape& s = r.input_shapes[i];
        if (s.standard()) continue;
        if (s.type() != out.type() || s.ndim() != out.ndim() || s.ndim() > 16) return nullptr;
        blocks[i].emplace(std::vector<std::size_t>(s.lens().begin() + axis, s.lens().end()),
                          std::vector<std::size_t>(s.strides().begin() + axis, s.strides().end()), s.element_size());
    }
    std::size_t outer = 1, inner_bytes = out.element_size();
    for (std::size_t d = 0; d < axis; ++d) outer *= out.lens()[d];
    for (std::size_t d = axis + 1; d < out.ndim(); ++d) inner_bytes *= out.lens()[d];
    const std::size_t out_run = out.lens()[axis] * inner_bytes;

    std::vector<copy_job> jobs;
    for (std::size_t o = 0; o < outer; ++o) {
        std::size_t to = o * out_run;
        for (std::size_t i = 0; i < r.input_shapes.size(); ++i) {
            const shape& s = r.input_shapes[i];
            const std::size_t run = s.lens()[axis] * inner_bytes;
            if (blocks[i]) {
                // The block's start: index o of the dimensions before the axis.
                std::size_t from = 0;
                for (std::size_t d = axis, rest = o; d-- > 0;) {
                    from += (rest % s.lens()[d]) * s.strides()[d];
                    rest /= s.lens()[d];
                }
                const std::size_t es = s.element_size(), n = blocks[i]->elements(), piece = piece_bytes / es;
                for (std::size_t first = 0; first < n; first += piece)
                    jobs.push_back({i, from * es, to, 0, true, first, std::min(n, first + piece)});
            } else {
                for (std::size_t done = 0; done < run; done += piece_bytes)
                    jobs.push_back({i, o * run + done, to + done, std::min(piece_bytes, run - done)});
            }
            to += run;
        }
    }
    return std::make_shared<concat_kernel>(std::move(jobs), std::move(blocks), out.bytes(), r.threads);
}

}  // namespace kiln
