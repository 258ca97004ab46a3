// quant_dot on the device (quantized_dot_kernels.cu): int8 or uint8 a with
// an optional zero point, int8 b, int32 result, batch dimensions broadcast as
// in dot, operands in any layout the gemm planner reads (row- or
// column-major matrices, strided batches).
#include <optional>
#include <string>

#include "targets/gpu/cuda/cuda_device.hpp"
#include "targets/gpu/cuda/cuda_kernels.hpp"
#include "targets/gpu/cuda/linalg_gemm_layout.hpp"
#include "targets/gpu/cuda/quantized_dot_kernel.hpp"

namespace kiln {

namespace {

int8_gemm_params call_params(const gemm_layout& g, bool a_unsigned) {
    int8_gemm_params p;
    p.m = g.m;
    p.n = g.n;
    p.k = g.k;
    p.a_row = g.a.column_major ? 1 : g.a.ld;
    p.a_col = g.a.column_major ? g.a.ld : 1;
    p.b_row = g.b.column_major ? 1 : g.b.ld;
    p.b_col = g.b.column_major ? g.b.ld : 1;
    p.batch = g.inner.len;
    p.a_batch = g.inner.stride_a;
    p.b_batch = g.inner.stride_b;
    p.c_batch = g.inner.stride_c;
    p.a_unsigned = a_unsigned;
    return p;
}

class cuda_quantized_dot_kernel final : public gpu_kernel {
public:
    cuda_quantized_dot_kernel(gemm_layout layout, bool a_unsigned, bool has_zero_point)
        : layout_(std::move(layout)), params_(call_params(layout_, a_unsigned)), has_zero_point_(has_zero_point) {}

    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        const auto stream = as_cuda(launch.stream);
        const std::byte* a = inputs[0].data();
        const std::byte* b = inputs[1].data();
        const std::byte* zero_point = has_zero_point_ ? inputs[2].data() : nullptr;
        auto* c = reinterpret_cast<std::int32_t*>(result.data());
        const gemm_layout& g = layout_;
        for (std::size_t call = 0; call < g.outer_count(); ++call) {
            const gemm_offsets at = g.outer_offsets(call);
            // 8-bit operands: element offsets are byte offsets.
            launch_int8_gemm(params_, a + at.a, b + at.b, zero_point, c + at.c, stream);
        }
    }
    std::string algorithm() const override { return "cuda_int8_gemm"; }

private:
    gemm_layout layout_;
    int8_gemm_params params_;
    bool has_zero_point_;
};

bool plain(const shape& s) { return !s.dynamic() && !s.is_tuple(); }

}  // namespace

std::shared_ptr<const gpu_kernel> make_cuda_quantized_dot_kernel(const gpu_kernel_request& request) {
    if (request.op.name() != "quant_dot") return nullptr;
    const auto& inputs = request.input_shapes;
    const shape& out = request.output_shape;
    if (inputs.size() < 2 || inputs.size() > 3 || !plain(out) || !out.standard() || out.type() != dtype::int32_type)
        return nullptr;
    for (const auto& s : inputs)
        if (!plain(s)) return nullptr;
    const dtype a_type = inputs[0].type();
    if ((a_type != dtype::int8_type && a_type != dtype::uint8_type) || inputs[1].type() != dtype::int8_type)
        return nullptr;
    const bool has_zero_point = inputs.size() == 3;
    if (has_zero_point && (inputs[2].type() != a_type || inputs[2].elements() != 1)) return nullptr;
    auto layout = plan_gemm_layout(inputs[0], inputs[1], out);
    // The grid's rows: at most 65535 blocks of 16.
    if (!layout || layout->m > std::size_t{65535} * 16) return nullptr;
    return std::make_shared<cuda_quantized_dot_kernel>(std::move(*layout), a_type == dtype::uint8_type,
                                                       has_zero_point);
}

}  // namespace kiln
