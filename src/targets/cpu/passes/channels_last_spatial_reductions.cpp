// An int8 convolution whose float result only reductions read (ResNet-50's
// last layer, whose ReLU output goes to the global average pool in float)
// stores that result channels-last, as its kernel computes it, when the
// cpu reduce kernel reads it so: over H and W the channels-last tensor is
// [N, H*W, C], each channel a contiguous lane. Saves the kernel's reorder of
// its result into NCHW (1 x 2048 x 7 x 7 float: 0.13 ms of one thread on
// this machine), and the reduction reads whole vectors of channels instead
// of one channel's 49 values at a time.
#include <vector>

#include "kiln/module.hpp"
#include "ops/fused_quantized_linalg.hpp"
#include "passes/rewriter.hpp"
#include "targets/cpu/kernels/cpu_kernels.hpp"
#include "targets/cpu/passes/cpu_passes.hpp"

namespace kiln {

namespace {

bool is_reduction(const instruction& ins) {
    const std::string n = ins.name();
    return n == "reduce_mean" || n == "reduce_sum" || n == "reduce_max" || n == "reduce_min";
}

// Whether the cpu reduce kernel runs `reader` on input 0 of shape `x`.
bool reduce_kernel_takes(const instruction& reader, const shape& x) {
    const std::vector<shape> shapes{x};
    const std::vector<argument> constants(1);
    return make_reduce_kernel({reader.get_operator(), shapes, reader.get_shape(), constants, 1}) != nullptr;
}

void store_channels_last(module& m, instruction_ref conv) {
    const auto* f = conv->get_operator().get_if<op::fused_quant_convolution>();
    if (f == nullptr || f->channels_last || conv->get_shape().type() != dtype::float_type ||
        conv->get_shape().ndim() != 4 || conv->outputs().empty())
        return;
    auto changed = *f;
    changed.channels_last = true;
    const operation op(changed);
    std::vector<shape> input_shapes;
    for (auto in : conv->inputs()) input_shapes.push_back(in->get_shape());
    const shape features = op.compute_shape(input_shapes);
    for (auto reader : conv->outputs())
        if (!is_reduction(*reader) || reader->inputs().size() != 1 || !reduce_kernel_takes(*reader, features)) return;
    const auto restrided = m.insert_instruction(conv, op, conv->inputs());
    if (!replace_value_restrided(m, conv, restrided)) {
        m.remove_instruction(restrided);
        return;
    }
    m.remove_instruction(conv);
}

}  // namespace

void channels_last_spatial_reductions::apply(module& m) const {
    // Each visit may remove the instruction it is at: the next one is found first.
    for (auto ins = m.begin(); ins != m.end();) {
        const auto current = ins++;
        if (current->name() == "fused_quant_convolution") store_channels_last(m, current);
    }
}

}  // namespace kiln
