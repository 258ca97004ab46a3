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
        {"reduce_sum", make_reduce_kernel},
        {"reduce_mean", make_reduce_kernel},
        {"reduce_max", make_reduce_kernel},
        {"reduce_min", make_reduce_kernel},
        {"softmax", make_softmax_kernel},
        {"log_softmax", make_softmax_kernel},
        {"layer_norm", make_layer_norm_kernel},
        {"fused_attention", make_attention_kernel},
        {"reshape", make_strided_copy_kernel},
        {"flatten", make_strided_copy_kernel},
        {"contiguous", make_strided_copy_kernel},
        // elementwise ops: one-step pointwise programs
        {"fused_pointwise", make_pointwise_kernel},
        {"fused_concat_pointwise", make_concat_pointwise_kernel},
        {"abs", make_pointwise_kernel},
        {"neg", make_pointwise_kernel},
        {"exp", make_pointwise_kernel},
        {"log", make_pointwise_kernel},
        {"sqrt", make_pointwise_kernel},
        {"rsqrt", make_pointwise_kernel},
        {"reciprocal", make_pointwise_kernel},
        {"sin", make_pointwise_kernel},
        {"cos", make_pointwise_kernel},
        {"tanh", make_pointwise_kernel},
        {"sigmoid", make_pointwise_kernel},
        {"relu", make_pointwise_kernel},
        {"erf", make_pointwise_kernel},
        {"floor", make_pointwise_kernel},
        {"ceil", make_pointwise_kernel},
        {"round", make_pointwise_kernel},
        {"sign", make_pointwise_kernel},
        {"not", make_pointwise_kernel},
        {"gelu", make_pointwise_kernel},
        {"tan", make_pointwise_kernel},
        {"asin", make_pointwise_kernel},
        {"acos", make_pointwise_kernel},
        {"atan", make_pointwise_kernel},
        {"sinh", make_pointwise_kernel},
        {"cosh", make_pointwise_kernel},
        {"asinh", make_pointwise_kernel},
        {"acosh", make_pointwise_kernel},
        {"atanh", make_pointwise_kernel},
        {"convert", make_pointwise_kernel},
        {"add", make_pointwise_kernel},
        {"sub", make_pointwise_kernel},
        {"mul", make_pointwise_kernel},
        {"div", make_pointwise_kernel},
        {"pow", make_pointwise_kernel},
        {"max", make_pointwise_kernel},
        {"min", make_pointwise_kernel},
        {"mod", make_pointwise_kernel},
        {"equal", make_pointwise_kernel},
        {"less", make_pointwise_kernel},
        {"greater", make_pointwise_kernel},
        {"and", make_pointwise_kernel},
        {"or", make_pointwise_kernel},
        {"xor", make_pointwise_kernel},
        {"where", make_pointwise_kernel},
        {"clip", make_pointwise_kernel},
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
