// See cpu_passes.hpp. A convolution whose kernel tiles its input exactly
// (stride equal to the kernel, no padding, no dilation, one group: ViT's
// 16 x 16 stride-16 patch embedding) reads every input value once, so it is
// a matrix product of the patches, [N * patches, C * kh * kw], by the
// weights, [C * kh * kw, M]. oneDNN's convolution (and Kiln's channel-split
// one) ran ViT-B/16's patch embedding at about a tenth of the rate of the
// model's matmuls of the same size (5% of ViT-B/16's time at batch 8);
// written as a product it runs at theirs, after a copy of the input into
// patch order.
#include <cstdint>
#include <vector>

#include "kiln/module.hpp"
#include "ops/conv.hpp"
#include "ops/linalg.hpp"
#include "ops/shape_ops.hpp"
#include "passes/rewriter.hpp"
#include "targets/cpu/passes/cpu_passes.hpp"

namespace kiln {

namespace {

// Kernels smaller than this many taps (1 x 1 above all) stay convolutions:
// oneDNN runs those well, and the patch copy would be most of the work.
constexpr std::size_t min_taps = 4;

operation reshape_op(std::vector<std::int64_t> dims) {
    op::reshape r;
    r.dims = std::move(dims);
    return r;
}

operation transpose_op(std::vector<std::int64_t> permutation) {
    op::transpose t;
    t.permutation = std::move(permutation);
    return t;
}

// Whether `conv` is a 2-D float32 convolution of constant weights whose
// kernel tiles its input exactly.
bool tiles_input(const instruction& conv) {
    const auto* c = conv.get_operator().get_if<op::convolution>();
    if (c == nullptr || conv.inputs().size() != 2 || !conv.inputs()[1]->is_literal()) return false;
    const shape& x = conv.inputs()[0]->get_shape();
    const shape& w = conv.inputs()[1]->get_shape();
    if (x.ndim() != 4 || w.ndim() != 4 || x.type() != dtype::float_type || w.type() != dtype::float_type ||
        conv.get_shape().type() != dtype::float_type || c->group != 1)
        return false;
    for (std::size_t d = 0; d < 2; ++d) {
        const auto k = static_cast<std::int64_t>(w.lens()[2 + d]);
        if (c->stride.size() != 2 || c->stride[d] != k || (!c->dilation.empty() && c->dilation[d] != 1) ||
            x.lens()[2 + d] % static_cast<std::size_t>(k) != 0)
            return false;
    }
    for (auto p : c->padding)
        if (p != 0) return false;
    return w.lens()[2] * w.lens()[3] >= min_taps;
}

// x [N, C, H, W] as patches [N, H/kh * W/kw, C * kh * kw], times the weights
// [M, C, kh, kw] as [C * kh * kw, M], then back to [N, M, H/kh, W/kw].
void rewrite(module& m, instruction_ref conv) {
    const auto as_int = [](std::size_t v) { return static_cast<std::int64_t>(v); };
    const auto& xl = conv->inputs()[0]->get_shape().lens();
    const auto& wl = conv->inputs()[1]->get_shape().lens();
    const std::int64_t n = as_int(xl[0]), c = as_int(xl[1]), kh = as_int(wl[2]), kw = as_int(wl[3]);
    const std::int64_t oh = as_int(xl[2]) / kh, ow = as_int(xl[3]) / kw, outs = as_int(wl[0]);
    auto split = m.insert_instruction(conv, reshape_op({n, c, oh, kh, ow, kw}), {conv->inputs()[0]});
    auto ordered = m.insert_instruction(conv, transpose_op({0, 2, 4, 1, 3, 5}), {split});
    auto patches = m.insert_instruction(conv, reshape_op({n, oh * ow, c * kh * kw}), {ordered});
    auto flat_weights = m.insert_instruction(conv, reshape_op({outs, c * kh * kw}), {conv->inputs()[1]});
    auto weights = m.insert_instruction(conv, transpose_op({1, 0}), {flat_weights});
    auto product = m.insert_instruction(conv, op::dot{}, {patches, weights});
    auto grid = m.insert_instruction(conv, reshape_op({n, oh, ow, outs}), {product});
    auto result = m.insert_instruction(conv, transpose_op({0, 3, 1, 2}), {grid});
    // Readers that take the channels-last strides read the product in place; otherwise a copy.
    if (!replace_value_restrided(m, conv, result)) replace_value(m, conv, result);
}

}  // namespace

void patch_convolutions_as_products::apply(module& m) const {
    std::vector<instruction_ref> found;
    for (auto it = m.begin(); it != m.end(); ++it)
        if (tiles_input(*it)) found.push_back(it);
    for (auto conv : found) rewrite(m, conv);
    remove_dead_instructions(m);
}

}  // namespace kiln
