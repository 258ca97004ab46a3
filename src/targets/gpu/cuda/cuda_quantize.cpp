// quantize_linear / dequantize_linear on the device (quantize_kernels.cu):
// per-tensor and per-axis scales, int8 / uint8 / int32 codes, float32 /
// float16 / bfloat16 reals, standard tensors. Blocked scales and the other
// code types (4-bit, float8, 16-bit) are declined and run on the host.
#include <optional>
#include <string>

#include "ops/op_helpers.hpp"
#include "ops/quant.hpp"
#include "targets/gpu/cuda/cuda_device.hpp"
#include "targets/gpu/cuda/cuda_kernels.hpp"
#include "targets/gpu/cuda/quantize_kernel.hpp"

namespace kiln {

namespace {

std::optional<quant_real> real_of(dtype t) {
    switch (t) {
    case dtype::float_type: return quant_real::f32;
    case dtype::half_type: return quant_real::f16;
    case dtype::bf16_type: return quant_real::bf16;
    default: return std::nullopt;
    }
}

std::optional<quant_code> code_of(dtype t) {
    switch (t) {
    case dtype::int8_type: return quant_code::i8;
    case dtype::uint8_type: return quant_code::u8;
    case dtype::int32_type: return quant_code::i32;
    default: return std::nullopt;
    }
}

class cuda_quantize_kernel final : public gpu_kernel {
public:
    cuda_quantize_kernel(quantize_params p, bool quantize) : params_(p), quantize_(quantize) {}

    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        const void* zero_point = params_.has_zero_point ? inputs[2].data() : nullptr;
        if (quantize_)
            launch_quantize(params_, inputs[0].data(), inputs[1].data(), zero_point, result.data(),
                            as_cuda(launch.stream));
        else
            launch_dequantize(params_, inputs[0].data(), inputs[1].data(), zero_point, result.data(),
                              as_cuda(launch.stream));
    }
    std::string algorithm() const override { return quantize_ ? "cuda_quantize" : "cuda_dequantize"; }

private:
    quantize_params params_;
    bool quantize_;
};

// The scale's layout over x (as op::quantize_linear's check_scale reads it),
// or nothing for a blocked or otherwise unexpected scale.
std::optional<quantize_params> scale_layout(const shape& x, const std::vector<shape>& inputs, std::int64_t axis,
                                            std::int64_t block_size) {
    if (block_size != 0) return std::nullopt;
    const shape& scale = inputs[1];
    auto single = [](const shape& s) { return s.elements() == 1 && s.ndim() <= 1; };
    if (inputs.size() == 3 && inputs[2].lens() != scale.lens() && !(single(inputs[2]) && single(scale)))
        return std::nullopt;
    quantize_params p;
    p.elements = x.elements();
    p.has_zero_point = inputs.size() == 3;
    if (single(scale)) return p;
    if (scale.ndim() != 1 || axis < -static_cast<std::int64_t>(x.ndim()) || axis >= static_cast<std::int64_t>(x.ndim()))
        return std::nullopt;
    const std::size_t a = static_cast<std::size_t>(axis < 0 ? axis + static_cast<std::int64_t>(x.ndim()) : axis);
    if (scale.lens()[0] != x.lens()[a]) return std::nullopt;
    p.extent = x.lens()[a];
    for (std::size_t d = a + 1; d < x.ndim(); ++d) p.inner *= x.lens()[d];
    return p;
}

}  // namespace

std::shared_ptr<const gpu_kernel> make_cuda_quantize_kernel(const gpu_kernel_request& request) {
    const std::string name = request.op.name();
    if (name != "quantize_linear" && name != "dequantize_linear") return nullptr;
    const auto& inputs = request.input_shapes;
    const shape& out = request.output_shape;
    if (inputs.size() < 2 || inputs.size() > 3 || !out.standard() || out.dynamic()) return nullptr;
    for (const auto& s : inputs)
        if (!s.standard() || s.dynamic() || s.is_tuple()) return nullptr;
    const shape& x = inputs[0];
    if (x.lens() != out.lens()) return nullptr;

    const bool quantize = name == "quantize_linear";
    std::optional<quantize_params> p;
    if (quantize) {
        const auto* q = request.op.get_if<op::quantize_linear>();
        if (q == nullptr) return nullptr;
        p = scale_layout(x, inputs, q->axis, q->block_size);
    } else {
        const auto* d = request.op.get_if<op::dequantize_linear>();
        if (d == nullptr) return nullptr;
        p = scale_layout(x, inputs, d->axis, d->block_size);
    }
    if (!p) return nullptr;
    // quantize: real x and scale, coded zero point and result; dequantize the other way round.
    const shape& real_shape = quantize ? x : out;
    const shape& code_shape = quantize ? out : x;
    const auto real = real_of(real_shape.type());
    const auto code = code_of(code_shape.type());
    if (!real || !code || inputs[1].type() != real_shape.type()) return nullptr;
    if (p->has_zero_point && inputs[2].type() != code_shape.type()) return nullptr;
    p->real = *real;
    p->code = *code;
    return std::make_shared<cuda_quantize_kernel>(*p, quantize);
}

}  // namespace kiln
