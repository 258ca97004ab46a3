// Convolution through oneDNN: plain or blocked activations, weights
// reordered once into the layout the chosen implementation wants, bias and
// post-ops applied by the same primitive. Weights given at run time (float16
// weights widened per run, see narrow_weights/) are reordered into that layout
// in the run's scratch before each run. On a CPU with bfloat16 dot products,
// constant bfloat16 weights (quantize_bf16) run in bfloat16: onednn_bf16.
#include "targets/cpu/kernels/convolution/dnnl_convolution.hpp"

#include "ops/conv.hpp"
#include "targets/cpu/kernels/convolution/convolution_algorithms.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"

namespace kiln {

namespace {

namespace ds = dnnl_support;
using dims = dnnl::memory::dims;

dims to_dims(const std::vector<std::size_t>& v) {
    return dims(v.begin(), v.end());
}

// Weights [M, C/g, k...] as oneDNN sees them: grouped ones get a leading group dimension.
dnnl::memory::desc weights_desc(const shape& w, std::size_t group, dnnl::memory::format_tag tag,
                                dnnl::memory::data_type type) {
    dims d = to_dims(w.lens());
    if (group > 1) {
        d[0] /= static_cast<dnnl::memory::dim>(group);
        d.insert(d.begin(), static_cast<dnnl::memory::dim>(group));
    }
    return dnnl::memory::desc(d, type, tag);
}

// The source as the primitive reads it: x's own layout in float32; in
// another type a dense copy of x in that type (staged by the algorithm).
dnnl::memory::desc source_desc(const shape& x, const shape& plain_x, op::tensor_layout layout,
                               dnnl::memory::data_type type) {
    if (ops::is_blocked(layout)) {
        auto blocked = ds::blocked_desc(plain_x, ops::channel_block(layout));
        blocked.data.data_type = dnnl::memory::convert_to_c(type);  // same blocks, elements of `type`
        return blocked;
    }
    if (type == dnnl::memory::data_type::f32) return ds::plain_desc(x);
    return ds::strided_desc(x.lens(), shape(x.type(), x.lens()).strides(), type);
}

dnnl::memory::format_tag plain_weights_tag(std::size_t spatial, bool grouped) {
    using tag = dnnl::memory::format_tag;
    switch (spatial) {
        case 1:
            return grouped ? tag::goiw : tag::oiw;
        case 2:
            return grouped ? tag::goihw : tag::oihw;
        default:
            return grouped ? tag::goidhw : tag::oidhw;
    }
}

// Whether a binary post-op operand of a blocked [N, C/b, H, W, b] result is
// one oneDNN reads: the blocked tensor itself, a single value, or a
// per-channel one as propagate_blocked_layout writes it, [1, C/b, 1, 1, b]
// (the bytes of a plain [1, C, 1, 1]).
bool blocked_operand_readable(const shape& operand, const shape& result) {
    if (!operand.standard()) return false;
    if (operand.lens() == result.lens() || operand.elements() == 1) return true;
    const auto& lens = operand.lens();
    if (lens.size() != result.ndim()) return false;
    for (std::size_t i = 0; i < lens.size(); ++i)
        if (lens[i] != (i == 1 || i + 1 == lens.size() ? result.lens()[i] : 1)) return false;
    return true;
}

// A binary post-op operand described in the destination's dims.
dnnl::memory::desc operand_desc(const shape& operand, const shape& result, op::tensor_layout layout,
                                const shape& plain_result) {
    if (ops::is_blocked(layout)) {
        if (operand.lens() == result.lens()) return ds::blocked_desc(plain_result, ops::channel_block(layout));
        // A single value or per-channel values: oneDNN broadcasts dims of 1.
        std::vector<std::size_t> dims(plain_result.ndim(), 1);
        if (operand.elements() > 1) dims[1] = plain_result.lens()[1];
        std::vector<std::size_t> strides(dims.size(), 1);
        for (std::size_t i = dims.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * dims[i];
        return ds::strided_desc(dims, strides);
    }
    auto strides = ops::broadcast_strides(operand, result.lens());
    return ds::strided_desc(result.lens(), strides);
}

std::shared_ptr<const cpu_kernel> build(const kernel_request& r, const kernel_builder&) {
    auto primitive = describe_convolution(r, dnnl::algorithm::convolution_direct);
    if (!primitive) return nullptr;  // no oneDNN implementation for these shapes: the reference kernel runs
    auto& [pd, plain_weights, descs, slots] = *primitive;
    const shape& w = r.input_shapes[1];
    const bool constant_weights = r.is_constant(1);
    std::vector<ds::kept_constant> kept;
    std::unordered_map<int, dnnl::memory> fixed;
    if (constant_weights) {
        kept.push_back(ds::constant_in_layout(r, 1, plain_weights, pd.weights_desc()));
        fixed.emplace(DNNL_ARG_WEIGHTS, kept.back().copy);
    } else {
        descs.emplace_back(DNNL_ARG_WEIGHTS, pd.weights_desc());
        slots.push_back(1);
    }
    auto kernel =
        std::make_shared<ds::primitive_kernel>(dnnl::convolution_forward(pd), std::move(descs), std::move(slots),
                                               std::move(fixed), pd.scratchpad_desc().get_size(), std::move(kept));
    if (constant_weights) return kernel;
    // Weights that arrive at run time: reordered into the primitive's layout in scratch.
    return ds::with_input_reordered(std::move(kernel), 1, plain_weights, pd.weights_desc(), w);
}

// A bfloat16 convolution (constant bfloat16 weights, float32 source) where
// the CPU has bfloat16 dot products (AVX-512 BF16, AMX): oneDNN's bfloat16
// kernel, the weights packed once in its layout, the source rounded to
// bfloat16 into scratch on every run (as quantize_bf16 asks of activations),
// sums, bias, post-ops and result in float32.
bool bf16_weights_and_dot_products(const kernel_request& r) {
    if (!bf16_dot_supported() || r.op.get_if<op::fused_convolution>() == nullptr || r.input_shapes.size() < 2)
        return false;
    const shape& x = r.input_shapes[0];
    const shape& w = r.input_shapes[1];
    if (x.type() != dtype::float_type || w.type() != dtype::bf16_type || !w.standard() || !r.is_constant(1))
        return false;
    const auto& conv = requested_convolution(r);
    if (ops::is_blocked(conv.output_layout) && conv.post.binary_count() > 0)
        for (std::size_t i = conv.first_post_operand(); i < r.input_shapes.size(); ++i)
            if (!blocked_operand_readable(r.input_shapes[i], r.output_shape)) return false;
    return true;
}

std::shared_ptr<const cpu_kernel> build_in_bf16(const kernel_request& r, const kernel_builder&) {
    constexpr auto bf16 = dnnl::memory::data_type::bf16;
    auto primitive = describe_convolution(r, dnnl::algorithm::convolution_direct, bf16);
    if (!primitive) return nullptr;  // no bfloat16 implementation: the widening algorithm runs it
    auto& [pd, plain_weights, descs, slots] = *primitive;
    std::vector<ds::kept_constant> kept{ds::constant_in_layout(r, 1, plain_weights, pd.weights_desc())};
    std::unordered_map<int, dnnl::memory> fixed{{DNNL_ARG_WEIGHTS, kept.back().copy}};
    auto kernel =
        std::make_shared<ds::primitive_kernel>(dnnl::convolution_forward(pd), std::move(descs), std::move(slots),
                                               std::move(fixed), pd.scratchpad_desc().get_size(), std::move(kept));
    const auto& conv = requested_convolution(r);
    const shape& x = r.input_shapes[0];
    const auto from =
        source_desc(x, conv.plain_input_shape(r.input_shapes), conv.input_layout, dnnl::memory::data_type::f32);
    return ds::with_input_reordered(std::move(kernel), 0, from, pd.src_desc(), shape(dtype::bf16_type, x.lens()));
}

}  // namespace

bool onednn_convolution_eligible(const kernel_request& r) {
    const auto& conv = requested_convolution(r);
    const shape& x = r.input_shapes[0];
    const shape& w = r.input_shapes[1];
    // Weights are packed (once when constant); the reorder reads them as standard.
    if (x.type() != dtype::float_type || w.type() != dtype::float_type || !w.standard()) return false;
    if (ops::is_blocked(conv.output_layout) && conv.post.binary_count() > 0)
        for (std::size_t i = conv.first_post_operand(); i < r.input_shapes.size(); ++i)
            if (!blocked_operand_readable(r.input_shapes[i], r.output_shape)) return false;
    return true;
}

std::optional<convolution_primitive> describe_convolution(const kernel_request& r, dnnl::algorithm algorithm,
                                                          dnnl::memory::data_type compute) {
    const auto& conv = requested_convolution(r);
    const shape& x = r.input_shapes[0];
    const shape& w = r.input_shapes[1];
    const shape plain_x = conv.plain_input_shape(r.input_shapes);
    const shape plain_y = conv.plain_output_shape(r.input_shapes);
    const std::size_t spatial = plain_x.ndim() - 2;
    std::vector<std::size_t> kernel(w.lens().begin() + 2, w.lens().end());
    ops::window win = ops::make_window(conv.name(), kernel, conv.conv.padding, conv.conv.stride, conv.conv.dilation);
    dims strides = to_dims(win.stride), pad_l = to_dims(win.pad_begin), pad_r = to_dims(win.pad_end), dil;
    for (auto d : win.dilation) dil.push_back(static_cast<dnnl::memory::dim>(d) - 1);
    // oneDNN wants the right padding that makes its floor formula give our output extent.
    for (std::size_t i = 0; i < spatial; ++i) {
        auto extent = static_cast<dnnl::memory::dim>(win.dilation[i] * (kernel[i] - 1) + 1);
        pad_r[i] = static_cast<dnnl::memory::dim>(plain_y.lens()[2 + i] - 1) * strides[i] + extent -
                   static_cast<dnnl::memory::dim>(plain_x.lens()[2 + i]) - pad_l[i];
    }

    const auto group = static_cast<std::size_t>(conv.conv.group);
    auto src = source_desc(x, plain_x, conv.input_layout, compute);
    auto dst = ops::is_blocked(conv.output_layout) ? ds::blocked_desc(plain_y, ops::channel_block(conv.output_layout))
                                                   : ds::plain_desc(r.output_shape);
    auto any_weights = weights_desc(w, group, dnnl::memory::format_tag::any, compute);
    dnnl::memory::desc bias;
    if (conv.has_bias)
        bias = dnnl::memory::desc({static_cast<dnnl::memory::dim>(plain_y.lens()[1])}, dnnl::memory::data_type::f32,
                                  dnnl::memory::format_tag::x);

    std::vector<dnnl::memory::desc> operands;
    for (std::size_t i = conv.first_post_operand(); i < r.input_shapes.size(); ++i)
        operands.push_back(operand_desc(r.input_shapes[i], r.output_shape, conv.output_layout, plain_y));
    auto post_ops = ds::make_post_ops(conv.post, operands);
    if (!post_ops) return std::nullopt;
    auto attr = ds::user_scratchpad_attr();
    attr.set_post_ops(*post_ops);

    try {
        auto desc = conv.has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algorithm, src,
                                                                    any_weights, bias, dst, strides, dil, pad_l, pad_r)
                                  : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algorithm, src,
                                                                    any_weights, dst, strides, dil, pad_l, pad_r);
        convolution_primitive out{dnnl::convolution_forward::primitive_desc(desc, attr, ds::cpu_engine()),
                                  weights_desc(w, group, plain_weights_tag(spatial, group > 1), compute),
                                  {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}},
                                  {0, ds::primitive_kernel::result_slot}};
        if (conv.has_bias) {
            out.descs.emplace_back(DNNL_ARG_BIAS, bias);
            out.slots.push_back(2);
        }
        for (std::size_t k = 0; k < operands.size(); ++k) {
            out.descs.emplace_back(
                DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(ds::post_op_index(conv.post, k))) | DNNL_ARG_SRC_1,
                operands[k]);
            out.slots.push_back(static_cast<int>(conv.first_post_operand() + k));
        }
        return out;
    } catch (const dnnl::error&) {
        return std::nullopt;
    }
}

// oneDNN's own choice of kernel for the shapes (its direct AVX2 kernel, or
// its 1 x 1 kernel): every float32 convolution.
const kernel_algorithm onednn_convolution{"onednn", onednn_convolution_eligible, build};
const kernel_algorithm onednn_bf16_convolution{"onednn_bf16", bf16_weights_and_dot_products, build_in_bf16};

}  // namespace kiln
