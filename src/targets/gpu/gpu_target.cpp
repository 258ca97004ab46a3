#include "targets/gpu/gpu_target.hpp"

#include "kiln/passes.hpp"
#include "targets/gpu/kernels/host_fallback_kernel.hpp"
#include "targets/gpu/lowering/gpu_plan_builder.hpp"

namespace kiln {

// The target-independent pipeline the cpu target also runs, without its
// host-only passes (16-bit arithmetic in float32, blocked layouts): the
// device computes half types natively. Composite ops are recognised before
// post-op fusion can split them; pointwise fusion comes last, after CSE.
pass_list gpu_target::get_passes(const compile_options&) const {
    // The gpu kernels compute float16 / bfloat16 natively, so quantize_fp16
    // graphs fuse as float32 ones do (the cpu target widens them first).
    // Attention too: its kernel keeps the scores and the softmax in float32,
    // as the fused op's reference does.
    auto attention = std::make_shared<fuse_attention>();
    attention->fuse_16bit_floats = true;
    // layer_norm too: its kernel accumulates 16-bit rows in float, so the
    // converts quantize_fp16 puts around a float32 layer_norm go.
    auto layer_norm = std::make_shared<fuse_layer_norm>();
    layer_norm->fuse_16bit_floats = true;
    auto post_ops = std::make_shared<fuse_post_ops>();
    post_ops->fuse_16bit_floats = true;
    auto pointwise = std::make_shared<fuse_pointwise>();
    pointwise->fuse_16bit_floats = true;
    // int8: the first constant propagation keeps dequantized int8 weights for
    // fuse_quantized_ops, which turns QDQ matrix products into quant_dot (the
    // device has an int8 product, not an int8 convolution: convolutions stay
    // float, their weights folded by the next constant propagation).
    auto keep_dequantize = std::make_shared<constant_propagation>();
    keep_dequantize->fold_dequantize = false;
    auto quantized_dots = std::make_shared<fuse_quantized_ops>();
    quantized_dots->convolutions = false;
    // fuse_gelu runs before simplify_algebra too: that would fold the 0.5 of
    // an exported GELU, x * (1 + erf(x / sqrt 2)) * 0.5, into the weights of
    // the matmul after it, leaving a form fuse_gelu does not recognize.
    return {std::make_shared<dead_code_elimination>(),   keep_dequantize,
            quantized_dots,                              std::make_shared<constant_propagation>(),
            std::make_shared<simplify_reshapes>(),       std::make_shared<fuse_gelu>(),
            std::make_shared<simplify_algebra>(),
            std::make_shared<constant_propagation>(),    std::make_shared<fuse_gelu>(),
            layer_norm,                                  attention,
            post_ops,                                    std::make_shared<constant_propagation>(),
            std::make_shared<common_subexpression_elimination>(), pointwise,
            std::make_shared<dead_code_elimination>()};
}

std::shared_ptr<executable> gpu_target::lower(const module& m, const compile_options& options) const {
    return build_gpu_plan(m, options, device_);
}

argument gpu_target::allocate(const shape& s) const {
    auto memory = device_->allocate_shared(s.bytes());
    device_->fill_zero(memory.get(), s.bytes(), nullptr);
    device_->synchronize(nullptr);
    return argument(s, memory, memory.get()).at(memory_location::device);
}

argument gpu_target::copy_to(const argument& host) const {
    const shape s = host.get_shape().as_standard();
    auto memory = device_->allocate_shared(s.bytes());
    const argument device_value = argument(s, memory, memory.get()).at(memory_location::device);
    upload_view(*device_, nullptr, host, device_value);
    device_->synchronize(nullptr);
    return device_value;
}

argument gpu_target::copy_from(const argument& device_value) const {
    argument host = download_view(*device_, nullptr, device_value);
    return host.get_shape().standard() ? host : host.contiguous();
}

}  // namespace kiln
