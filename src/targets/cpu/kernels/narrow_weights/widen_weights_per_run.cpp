// widen_weights_per_run: the weights widened to float32 into the run's
// scratch, then a float32 kernel that reads them as a run-time input. The
// float32 kernels cannot prepack them (they are not constant to them), so
// this is the general, slower way; it keeps the narrow weights' memory.
#include "kiln/operation.hpp"
#include "ops/narrow_weights.hpp"
#include "targets/cpu/kernels/convolution/convolution_algorithms.hpp"
#include "targets/cpu/kernels/copy/widen_to_float32.hpp"
#include "targets/cpu/kernels/narrow_weights/narrow_weights_algorithms.hpp"
#include "targets/cpu/kernels/scratch_alignment.hpp"

namespace kiln {

namespace {

class widen_weights_per_run_kernel final : public cpu_kernel {
public:
    widen_weights_per_run_kernel(std::shared_ptr<const cpu_kernel> inner, shape widened, dtype stored)
        : inner_(std::move(inner)), widened_(std::move(widened)), widen_(widen_to_float32_function(stored)) {}

    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        // All the memory the weights' view spans, widened flat: the float32
        // view keeps its strides (transposed or broadcast views of a literal too).
        auto* weights = reinterpret_cast<float*>(scratch);
        widen_(inputs[1].data(), weights, widened_.element_space());
        std::vector<argument> with_widened = inputs;
        with_widened[1] = argument(widened_, weights);
        inner_->run(result, with_widened, scratch + scratch_aligned(widened_.bytes()));
    }
    std::size_t scratch_bytes() const override { return scratch_aligned(widened_.bytes()) + inner_->scratch_bytes(); }

private:
    std::shared_ptr<const cpu_kernel> inner_;
    shape widened_;
    widen_function widen_;
};

}  // namespace

bool is_narrow_weight_type(const operation& op, dtype stored) {
    return ops::is_16bit_float(stored) || (stored == dtype::int8_type && op.name() == "fused_dot");
}

bool has_narrow_weights(const kernel_request& r) {
    return r.input_shapes.size() > 1 && !r.constant_inputs[1].empty() &&
           is_narrow_weight_type(r.op, r.input_shapes[1].type());
}

std::shared_ptr<const cpu_kernel> build_widen_weights_per_run(std::span<const kernel_algorithm> float32_algorithms,
                                                              const kernel_request& r) {
    if (!has_narrow_weights(r)) return nullptr;
    const shape& stored = r.input_shapes[1];
    const shape widened{dtype::float_type, stored.lens(), stored.strides()};
    std::vector<shape> shapes = r.input_shapes;
    shapes[1] = widened;
    std::vector<argument> constants = r.constant_inputs;
    constants[1] = argument();  // read at run time: the float32 kernel must not keep a copy
    const kernel_request widened_request{r.op, shapes, r.output_shape, constants, r.threads};
    auto inner = choose_kernel(float32_algorithms, widened_request).kernel;
    if (inner == nullptr) return nullptr;
    return std::make_shared<widen_weights_per_run_kernel>(std::move(inner), widened, r.input_shapes[1].type());
}

namespace {

std::shared_ptr<const cpu_kernel> build_convolution(const kernel_request& r, const kernel_builder&) {
    return build_widen_weights_per_run(convolution_algorithms(), r);
}

}  // namespace

std::span<const kernel_algorithm> narrow_weights_convolution_algorithms() {
    static const kernel_algorithm algorithms[] = {onednn_bf16_convolution,  // dnnl_convolution.cpp
                                                  {"widen_weights_per_run", has_narrow_weights, build_convolution}};
    return algorithms;
}

}  // namespace kiln
