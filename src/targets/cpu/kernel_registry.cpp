// Which kernel runs each op on the cpu target, listed explicitly. Ops not
// listed, and instructions a fast kernel declines, run their reference compute.
#include <map>
#include <string>

#include "targets/cpu/cpu_kernels.hpp"

namespace kiln {

namespace {

class reference_kernel final : public cpu_kernel {
public:
    explicit reference_kernel(operation op) : op_(std::move(op)) {}
    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        op_.compute(result, inputs);
    }

private:
    operation op_;
};

using kernel_factory = std::shared_ptr<const cpu_kernel> (*)(const kernel_request&);

std::shared_ptr<const cpu_kernel> pooling_kernel(const kernel_request& r) {
    if (auto kernel = make_pooling_kernel(r)) return kernel;
    return make_max_pooling_kernel(r);
}

const std::map<std::string, kernel_factory>& kernel_factories() {
    static const std::map<std::string, kernel_factory> factories{
        {"convolution", make_convolution_kernel},
        {"fused_convolution", make_convolution_kernel},
        {"dot", make_matmul_kernel},
        {"fused_dot", make_matmul_kernel},
        {"pooling", pooling_kernel},
        {"to_blocked", make_reorder_kernel},
        {"from_blocked", make_reorder_kernel},
        {"concat", make_concat_kernel},
    };
    return factories;
}

}  // namespace

void cpu_kernel::restore_constant(std::size_t index, const argument&) const {
    fail(error_kind::runtime, "this kernel keeps no copy of its input " + std::to_string(index));
}

std::shared_ptr<const cpu_kernel> make_cpu_kernel(const kernel_request& request) {
    auto it = kernel_factories().find(request.op.name());
    if (it != kernel_factories().end())
        if (auto kernel = it->second(request)) return kernel;
    return std::make_shared<reference_kernel>(request.op);
}

}  // namespace kiln
