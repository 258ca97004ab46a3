// The cpu kernel for reshape and contiguous when they copy (a view cannot
// express the result): the input's elements in row-major order written out
// contiguously (strided_copy.hpp).
#include <omp.h>

#include "targets/cpu/kernels/cpu_kernels.hpp"
#include "targets/cpu/kernels/copy/strided_copy.hpp"

namespace kiln {

namespace {

// Work below this many bytes stays on one thread.
constexpr std::size_t parallel_bytes = std::size_t{1} << 20;

class strided_copy_kernel final : public cpu_kernel {
public:
    strided_copy_kernel(const shape& in, int threads) : copy_(in), threads_(threads) {}

    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        const std::byte* src = inputs[0].data();
        std::byte* dst = result.data();
        const std::size_t elements = copy_.elements();
        const bool parallel = threads_ > 1 && elements * copy_.element_size() >= parallel_bytes;
        if (!parallel) {
            copy_.copy_range(src, dst, 0, elements);
            return;
        }
#pragma omp parallel num_threads(threads_)
        {
            const auto t = static_cast<std::size_t>(omp_get_thread_num());
            const auto nt = static_cast<std::size_t>(omp_get_num_threads());
            copy_.copy_range(src, dst, elements * t / nt, elements * (t + 1) / nt);
        }
    }

private:
    strided_copy copy_;
    int threads_;
};

}  // namespace

std::shared_ptr<const cpu_kernel> make_strided_copy_kernel(const kernel_request& r) {
    const shape& in = r.input_shapes.at(0);
    if (in.elements() != r.output_shape.elements() || !r.output_shape.standard() || in.ndim() > 16) return nullptr;
    if (in.type() != r.output_shape.type()) return nullptr;
    return std::make_shared<strided_copy_kernel>(in, r.threads);
}

}  // namespace kiln
