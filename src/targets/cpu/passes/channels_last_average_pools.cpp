// See cpu_passes.hpp. A DenseNet transition is an int8 1x1 convolution with a
// float result that only a 2x2 average pool reads; the pool's result is the
// next block's input, which channels_last_concat_pieces copies channels-last
// for the block's concat programs. The convolution computes channels-last, so
// storing NCHW cost a reorder of its whole result (1 x 128 x 56 x 56 float:
// 0.18 ms of one thread), the pool ran on NCHW, and its result was copied back
// to channels-last. Kept channels-last end to end, oneDNN pools [N, H, W, C]
// into [N, H, W, C] and the block reads the pool's result as it is.
#include <vector>

#include "kiln/module.hpp"
#include "ops/fused_quantized_linalg.hpp"
#include "ops/pool.hpp"
#include "passes/rewriter.hpp"
#include "targets/cpu/passes/cpu_passes.hpp"

namespace kiln {

namespace {

bool is_average_pool(const instruction& ins) {
    const auto* pool = ins.get_operator().get_if<op::pooling>();
    return pool != nullptr && pool->mode == op::pooling_mode::average && !pool->channels_last &&
           ins.inputs().size() == 1 && ins.get_shape().ndim() == 4;
}

void store_channels_last(module& m, instruction_ref conv) {
    const auto* f = conv->get_operator().get_if<op::fused_quant_convolution>();
    if (f == nullptr || f->channels_last || conv->get_shape().type() != dtype::float_type ||
        conv->get_shape().ndim() != 4 || conv->outputs().size() != 1)
        return;
    const auto pool = conv->outputs().front();
    if (!is_average_pool(*pool)) return;
    auto conv_op = *f;
    conv_op.channels_last = true;
    auto pool_op = *pool->get_operator().get_if<op::pooling>();
    pool_op.channels_last = true;
    const auto restrided_conv = m.insert_instruction(conv, operation(conv_op), conv->inputs());
    const auto restrided_pool = m.insert_instruction(pool, operation(pool_op), {restrided_conv});
    // Only together: a pool with a channels-last input and an NCHW result runs oneDNN's reference code.
    if (!replace_value_restrided(m, pool, restrided_pool)) {
        m.remove_instruction(restrided_pool);
        m.remove_instruction(restrided_conv);
        return;
    }
    m.remove_instruction(pool);
    m.remove_instruction(conv);
}

}  // namespace

void channels_last_average_pools::apply(module& m) const {
    // Found first: a visit removes the convolution and the pool after it.
    std::vector<instruction_ref> convs;
    for (auto ins = m.begin(); ins != m.end(); ++ins)
        if (ins->name() == "fused_quant_convolution") convs.push_back(ins);
    for (auto conv : convs) store_channels_last(m, conv);
}

}  // namespace kiln
