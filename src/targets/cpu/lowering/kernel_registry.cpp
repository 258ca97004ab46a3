// Which kernel runs each op on the cpu target, listed explicitly: each op
// name maps to its family's ordered list of algorithms, and every elementwise
// op (is_pointwise) to the pointwise kernel. Other ops, and instructions no
// algorithm of the list builds, run their reference compute.
#include "targets/cpu/lowering/kernel_registry.hpp"

#include <map>
#include <string>

#include "ops/fused_convolution.hpp"
#include "ops/fused_dot.hpp"
#include "ops/linalg.hpp"
#include "targets/cpu/kernels/convolution/convolution_algorithms.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/cpu_kernels.hpp"
#include "targets/cpu/kernels/follows_run_time_extents.hpp"
#include "targets/cpu/kernels/matmul/matmul_algorithms.hpp"
#include "targets/cpu/kernels/narrow_weights/narrow_weights_algorithms.hpp"
#include "targets/cpu/kernels/pooling/pooling_algorithms.hpp"
#include "targets/cpu/lowering/kernel_tuner.hpp"

namespace kiln {

namespace {

// The op's compute reads every length from its arguments, so it runs at any
// run-time extents (the program's shapes of that run).
class reference_kernel final : public cpu_kernel, public follows_run_time_extents {
public:
    explicit reference_kernel(operation op) : op_(std::move(op)) {}
    void run(const argument& result, const std::vector<argument>& inputs, std::byte*) const override {
        op_.compute(result, inputs);
    }
    bool follows_extent_of(std::size_t) const override { return true; }
    bool follows_any_extents() const override { return true; }

private:
    operation op_;
};

// The families with one kernel: its factory is the eligibility check too.
bool any_request(const kernel_request&) {
    return true;
}
// The AVX-512 versions of those kernels, listed before the AVX2 ones.
bool avx512_enabled(const kernel_request&) {
    return avx512::enabled();
}
template <std::shared_ptr<const cpu_kernel> (*make)(const kernel_request&)>
std::shared_ptr<const cpu_kernel> build_with(const kernel_request& r, const kernel_builder&) {
    return make(r);
}

const kernel_algorithm reorder[] = {{"onednn_reorder", any_request, build_with<make_reorder_kernel>}};
const kernel_algorithm concat[] = {{"concat_copy", any_request, build_with<make_concat_kernel>}};
const kernel_algorithm reduce[] = {{"reduce", any_request, build_with<make_reduce_kernel>}};
const kernel_algorithm softmax[] = {{"softmax_avx512", avx512_enabled, build_with<make_softmax_avx512_kernel>},
                                    {"softmax_avx2", any_request, build_with<make_softmax_kernel>}};
const kernel_algorithm layer_norm[] = {{"layer_norm_avx512", avx512_enabled, build_with<make_layer_norm_avx512_kernel>},
                                       {"layer_norm_avx2", any_request, build_with<make_layer_norm_kernel>}};
const kernel_algorithm rms_norm[] = {{"rms_norm_avx512", avx512_enabled, build_with<make_rms_norm_avx512_kernel>},
                                     {"rms_norm_avx2", any_request, build_with<make_rms_norm_kernel>}};
const kernel_algorithm softmax_quantize[] = {
    {"softmax_quantize_avx512", avx512_enabled, build_with<make_softmax_quantize_avx512_kernel>},
    {"softmax_quantize_avx2", any_request, build_with<make_softmax_quantize_kernel>}};
const kernel_algorithm layer_norm_quantize[] = {
    {"layer_norm_quantize_avx512", avx512_enabled, build_with<make_layer_norm_quantize_avx512_kernel>},
    {"layer_norm_quantize_avx2", any_request, build_with<make_layer_norm_quantize_kernel>}};
const kernel_algorithm attention[] = {{"attention_avx512", avx512_enabled, build_with<make_attention_avx512_kernel>},
                                      {"attention_avx2", any_request, build_with<make_attention_kernel>}};
const kernel_algorithm strided_copy[] = {{"strided_copy", any_request, build_with<make_strided_copy_kernel>}};
const kernel_algorithm scatter_nd[] = {{"scatter_nd_slices", any_request, build_with<make_scatter_nd_kernel>}};
const kernel_algorithm pointwise[] = {{"pointwise_avx2", any_request, build_with<make_pointwise_kernel>}};
const kernel_algorithm quantize[] = {{"quantize_8bit", any_request, build_with<make_quantize_kernel>}};
const kernel_algorithm dequantize[] = {{"dequantize_8bit", any_request, build_with<make_dequantize_kernel>}};
const kernel_algorithm concat_pointwise[] = {
    {"concat_pointwise_avx512", avx512_enabled, build_with<make_concat_pointwise_avx512_kernel>},
    {"concat_pointwise_avx2", any_request, build_with<make_concat_pointwise_kernel>}};

const std::map<std::string, std::span<const kernel_algorithm>>& families() {
    static const std::map<std::string, std::span<const kernel_algorithm>> by_op{
        {"fused_convolution", convolution_algorithms()},
        {"fused_dot", matmul_algorithms()},
        {"fused_quant_convolution", quant_convolution_algorithms()},
        {"fused_quant_dot", quant_matmul_algorithms()},
        {"pooling", pooling_algorithms()},
        {"to_blocked", reorder},
        {"from_blocked", reorder},
        {"concat", concat},
        {"reduce_sum", reduce},
        {"reduce_mean", reduce},
        {"reduce_max", reduce},
        {"reduce_min", reduce},
        {"softmax", softmax},
        {"log_softmax", softmax},
        {"layer_norm", layer_norm},
        {"rms_norm", rms_norm},
        {"softmax_quantize", softmax_quantize},
        {"layer_norm_quantize", layer_norm_quantize},
        {"fused_attention", attention},
        {"reshape", strided_copy},
        {"flatten", strided_copy},
        {"contiguous", strided_copy},
        {"scatter_nd", scatter_nd},
        {"scatter_nd_in_place", scatter_nd},
        {"fused_pointwise", pointwise},
        {"fused_concat_pointwise", concat_pointwise},
        {"quantize_linear", quantize},
        {"dequantize_linear", dequantize},
    };
    return by_op;
}

// convolution and dot run as their fused forms with no bias or post-ops.
operation fused_form(const operation& op) {
    if (const auto* conv = op.get_if<op::convolution>()) {
        op::fused_convolution fused;
        fused.conv = *conv;
        return fused;
    }
    if (op.get_if<op::dot>() != nullptr) return op::fused_dot{};
    return op;
}

// A single elementwise op runs as a one-step pointwise program. Products
// with float16 / bfloat16 weights, and fused_dot with int8 weights, have
// lists of their own: the float32 algorithms would read those weights as float32.
std::span<const kernel_algorithm> algorithms_for(const operation& op, const kernel_request& r) {
    const bool product = op.name() == "fused_dot" || op.name() == "fused_convolution";
    if (product && r.input_shapes.size() > 1 && is_narrow_weight_type(op, r.input_shapes[1].type()) &&
        r.input_shapes[0].type() == dtype::float_type) {
        // Weights computed at run time: the reference compute. (Constant ones loaded packed have no
        // values: the list's kernels that read values are not eligible then, and the plan builds again
        // from restored values when none takes the packed form.)
        if (!r.is_constant(1)) return {};
        // (and the reference compute too when no algorithm of the list builds)
        return op.name() == "fused_dot" ? narrow_weights_matmul_algorithms() : narrow_weights_convolution_algorithms();
    }
    auto it = families().find(op.name());
    if (it != families().end()) return it->second;
    if (op.is_pointwise()) return pointwise;
    return {};
}

}  // namespace

void cpu_kernel::restore_constant(std::size_t index, const argument&) const {
    fail(error_kind::runtime, "this kernel keeps no copy of its input " + std::to_string(index));
}

namespace {

// The pinned algorithm when it is in the list, eligible and builds.
chosen_kernel pinned_kernel(std::span<const kernel_algorithm> algorithms, const kernel_request& r,
                            std::string_view pinned) {
    const kernel_builder inner = [algorithms](const kernel_request& q) { return choose_kernel(algorithms, q).kernel; };
    for (const auto& algorithm : algorithms)
        if (algorithm.name == pinned && algorithm.eligible(r))
            if (auto kernel = algorithm.build(r, inner)) return {std::move(kernel), algorithm.name};
    return {};
}

}  // namespace

chosen_kernel make_cpu_kernel(const kernel_request& request, const kernel_selection& how) {
    const operation op = fused_form(request.op);
    const kernel_request fused{op, request.input_shapes, request.output_shape, request.constant_inputs,
                               request.threads, request.packed};
    const auto algorithms = algorithms_for(op, fused);
    chosen_kernel chosen;
    if (!algorithms.empty() && !how.pinned.empty()) chosen = pinned_kernel(algorithms, fused, how.pinned);
    if (!chosen.kernel && !algorithms.empty())
        chosen = how.tuner != nullptr && how.pinned.empty() ? how.tuner->choose(algorithms, fused)
                                                            : choose_kernel(algorithms, fused);
    if (!chosen.kernel) chosen = {std::make_shared<reference_kernel>(request.op), "reference"};
    return chosen;
}

}  // namespace kiln
