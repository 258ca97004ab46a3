// Concatenation as a list of memory copies, prepared when the kernel is
// built: with standard inputs and output, each input contributes one
// contiguous run per index of the dimensions before the axis. Long runs are
// split so that the threads share them (DenseNet concatenates a whole block's
// features before every layer, a few MiB each time). Any dtype: bytes move.
#include <omp.h>

#include <cstring>

#include "ops/op_helpers.hpp"
#include "ops/shape_ops.hpp"
#include "targets/cpu/cpu_kernels.hpp"

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
};

class concat_kernel final : public cpu_kernel {
public:
    concat_kernel(std::vector<copy_job> jobs, std::size_t total_bytes, int threads)
        : jobs_(std::move(jobs)), parallel_(total_bytes >= parallel_bytes), threads_(threads) {}

    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        const auto count = static_cast<std::ptrdiff_t>(jobs_.size());
        std::byte* out = result.data();
        const int threads = parallel_ ? (threads_ > 0 ? threads_ : omp_get_max_threads()) : 1;
#pragma omp parallel for schedule(static) num_threads(threads)
        for (std::ptrdiff_t k = 0; k < count; ++k) {
            const copy_job& job = jobs_[static_cast<std::size_t>(k)];
            std::memcpy(out + job.to, inputs[job.input].data() + job.from, job.bytes);
        }
    }

private:
    std::vector<copy_job> jobs_;
    bool parallel_;
    int threads_;
};

}  // namespace

std::shared_ptr<const cpu_kernel> make_concat_kernel(const kernel_request& r) {
    const auto* concat = r.op.get_if<op::concat>();
    const shape& out = r.output_shape;
    if (concat == nullptr || !out.standard() || out.elements() == 0) return nullptr;
    for (const auto& s : r.input_shapes)
        if (!s.standard()) return nullptr;
    const std::size_t axis = ops::normalize_axis("concat", concat->axis, out.ndim());
    std::size_t outer = 1, inner_bytes = out.element_size();
    for (std::size_t d = 0; d < axis; ++d) outer *= out.lens()[d];
    for (std::size_t d = axis + 1; d < out.ndim(); ++d) inner_bytes *= out.lens()[d];
    const std::size_t out_run = out.lens()[axis] * inner_bytes;

    std::vector<copy_job> jobs;
    for (std::size_t o = 0; o < outer; ++o) {
        std::size_t to = o * out_run;
        for (std::size_t i = 0; i < r.input_shapes.size(); ++i) {
            const std::size_t run = r.input_shapes[i].lens()[axis] * inner_bytes;
            for (std::size_t done = 0; done < run; done += piece_bytes)
                jobs.push_back({i, o * run + done, to + done, std::min(piece_bytes, run - done)});
            to += run;
        }
    }
    return std::make_shared<concat_kernel>(std::move(jobs), out.bytes(), r.threads);
}

}  // namespace kiln
