#include "targets/cpu/kernels/fewer_threads_kernel.hpp"

#include "targets/cpu/lowering/openmp_threads.hpp"

namespace kiln {

namespace {

class fewer_threads_kernel final : public wrapping_kernel {
public:
    fewer_threads_kernel(std::shared_ptr<const cpu_kernel> inner, int threads)
        : wrapping_kernel(std::move(inner)), threads_(threads) {}
    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        const scoped_openmp_threads guard(threads_);
        inner_->run(result, inputs, scratch);
    }
    std::size_t scratch_bytes() const override { return inner_->scratch_bytes(); }
    std::string arithmetic() const override { return inner_->arithmetic(); }

private:
    int threads_;
};

}  // namespace

std::shared_ptr<const cpu_kernel> on_threads(int threads,
                                             const std::function<std::shared_ptr<const cpu_kernel>()>& build) {
    std::shared_ptr<const cpu_kernel> inner;
    {
        const scoped_openmp_threads guard(threads);
        inner = build();
    }
    if (inner == nullptr) return nullptr;
    return std::make_shared<fewer_threads_kernel>(std::move(inner), threads);
}

}  // namespace kiln
