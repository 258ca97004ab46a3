#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "ops/fused_dot.hpp"
#include "targets/gpu/cuda/cublaslt_fused_gemm.hpp"
#include "targets/gpu/cuda/cuda_check.hpp"
#include "targets/gpu/cuda/cuda_device.hpp"
#include "targets/gpu/cuda/cuda_kernels.hpp"
#include "targets/gpu/cuda/linalg_epilogue.hpp"
#include "targets/gpu/cuda/linalg_gemm_layout.hpp"
#include "targets/gpu/cuda/repeat_period.hpp"

namespace kiln {

namespace {

// The cuBLAS types of one dtype: storage, compute, and whether alpha / beta are doubles.
struct gemm_types {
    cudaDataType_t data;
    cublasComputeType_t compute;
    bool double_scalars;
};

// float32 computes in float32 (never TF32: results are checked against ref
// at 1e-4); the 16-bit types accumulate in float32 and round once.
std::optional<gemm_types> types_of(dtype t) {
    switch (t) {
    case dtype::float_type: return gemm_types{CUDA_R_32F, CUBLAS_COMPUTE_32F, false};
    case dtype::half_type: return gemm_types{CUDA_R_16F, CUBLAS_COMPUTE_32F, false};
    case dtype::bf16_type: return gemm_types{CUDA_R_16BF, CUBLAS_COMPUTE_32F, false};
    case dtype::double_type: return gemm_types{CUDA_R_64F, CUBLAS_COMPUTE_64F, true};
    default: return std::nullopt;
    }
}

// What fused_dot adds after the product, prepared at build time; pointers
// are filled in per run.
struct epilogue_plan {
    linalg_epilogue_params params;  // pointers left null here
    linalg_element element = linalg_element::f32;
    bool has_bias = false;
    std::size_t first_operand = 0;  // input index of the first binary operand
    int operand_count = 0;
};

// dot / fused_dot as cublasGemmStridedBatchedEx calls (one per outer batch
// index), then, for fused_dot, one elementwise pass for bias and post-ops.
class cuda_gemm_kernel final : public gpu_kernel {
public:
    cuda_gemm_kernel(gemm_layout layout, gemm_types types, std::size_t element_size, std::size_t out_elements,
                     std::size_t out_bytes, std::optional<epilogue_plan> epilogue)
        : layout_(std::move(layout)),
          types_(types),
          element_size_(element_size),
          out_elements_(out_elements),
          out_bytes_(out_bytes),
          epilogue_(std::move(epilogue)) {}

    // A 16-bit result with an epilogue: the product goes to the workspace in
    // float32 and the epilogue rounds once, as the reference does.
    std::size_t workspace_bytes() const override { return float_product() ? out_elements_ * sizeof(float) : 0; }

    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        if (out_elements_ == 0) return;
        const auto stream = as_cuda(launch.stream);
        std::byte* product = float_product() ? launch.workspace : result.data();
        if (layout_.k == 0) {
            // An empty sum: every product is zero (cuBLAS is not asked about k = 0).
            KILN_CUDA(cudaMemsetAsync(product, 0, float_product() ? out_elements_ * sizeof(float) : out_bytes_, stream));
        } else {
            enqueue_products(launch, product, inputs);
        }
        if (epilogue_)
            enqueue_epilogue(result, float_product() ? reinterpret_cast<const float*>(product) : nullptr, inputs,
                             stream);
    }

    std::string algorithm() const override { return epilogue_ ? "cublas_gemm_epilogue" : "cublas_gemm"; }

private:
    // Row-major C = A * B is column-major C^T = B^T * A^T: cuBLAS's first
    // operand is b, its second a, and C^T is n x m with leading dimension n.
    bool float_product() const { return epilogue_ && types_.data != CUDA_R_32F && types_.data != CUDA_R_64F; }

    void enqueue_products(const gpu_launch& launch, std::byte* c, const std::vector<argument>& inputs) const {
        cublasHandle_t handle = static_cast<cuda_device&>(launch.device).cublas(launch.stream);
        const gemm_layout& g = layout_;
        const cublasOperation_t op_b = g.b.column_major ? CUBLAS_OP_T : CUBLAS_OP_N;
        const cublasOperation_t op_a = g.a.column_major ? CUBLAS_OP_T : CUBLAS_OP_N;
        const float one_f = 1.0f, zero_f = 0.0f;
        const double one_d = 1.0, zero_d = 0.0;
        const void* alpha = types_.double_scalars ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
        const void* beta = types_.double_scalars ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f);
        const std::byte* a = inputs[0].data();
        const std::byte* b = inputs[1].data();
        const cudaDataType_t c_type = float_product() ? CUDA_R_32F : types_.data;
        const std::size_t c_size = float_product() ? sizeof(float) : element_size_;
        const std::size_t calls = g.outer_count();
        for (std::size_t call = 0; call < calls; ++call) {
            const gemm_offsets at = g.outer_offsets(call);
            KILN_CUBLAS(cublasGemmStridedBatchedEx(
                handle, op_b, op_a, static_cast<int>(g.n), static_cast<int>(g.m), static_cast<int>(g.k), alpha,
                b + at.b * element_size_, types_.data, static_cast<int>(g.b.ld),
                static_cast<long long>(g.inner.stride_b), a + at.a * element_size_, types_.data,
                static_cast<int>(g.a.ld), static_cast<long long>(g.inner.stride_a), beta, c + at.c * c_size, c_type,
                static_cast<int>(g.n), static_cast<long long>(g.inner.stride_c),
                static_cast<int>(g.inner.len), types_.compute, CUBLAS_GEMM_DEFAULT));
        }
    }

    void enqueue_epilogue(const argument& result, const float* product, const std::vector<argument>& inputs,
                          cudaStream_t stream) const {
        linalg_epilogue_params p = epilogue_->params;
        p.product = product;
        if (epilogue_->has_bias) p.bias = inputs[2].data();
        for (int j = 0; j < epilogue_->operand_count; ++j)
            p.operands[j] = inputs[epilogue_->first_operand + static_cast<std::size_t>(j)].data();
        launch_linalg_epilogue(p, epilogue_->element, result.data(), stream);
    }

    gemm_layout layout_;
    gemm_types types_;
    std::size_t element_size_;
    std::size_t out_elements_;
    std::size_t out_bytes_;
    std::optional<epilogue_plan> epilogue_;
};

// The epilogue's element type for a fused_dot result of type `t`.
std::optional<linalg_element> epilogue_element(dtype t) {
    switch (t) {
    case dtype::float_type: return linalg_element::f32;
    case dtype::half_type: return linalg_element::f16;
    case dtype::bf16_type: return linalg_element::bf16;
    default: return std::nullopt;
    }
}

// fused_dot's bias and post-op chain as epilogue parameters, or nothing when
// the pass cannot apply them exactly (too many ops or operands, a rank above
// the pass's limit, a bias or operand not of the result's type, an operand
// that does not broadcast).
std::optional<epilogue_plan> plan_epilogue(const op::fused_dot& d, const std::vector<shape>& inputs, const shape& out) {
    const auto& chain = d.post;
    const std::size_t first = d.first_post_operand();
    if (chain.alpha.size() != chain.kinds.size() || chain.beta.size() != chain.kinds.size()) return std::nullopt;
    if (chain.kinds.size() > static_cast<std::size_t>(epilogue_max_ops)) return std::nullopt;
    if (chain.binary_count() > static_cast<std::size_t>(epilogue_max_operands)) return std::nullopt;
    if (inputs.size() != first + chain.binary_count()) return std::nullopt;
    const auto element = epilogue_element(out.type());
    if (out.ndim() > static_cast<std::size_t>(epilogue_max_rank) || !element) return std::nullopt;

    epilogue_plan e;
    e.element = *element;
    linalg_epilogue_params& p = e.params;
    p.elements = out.elements();
    p.rank = static_cast<int>(out.ndim());
    for (std::size_t i = 0; i < out.ndim(); ++i) p.lens[i] = out.lens()[i];
    p.cols = out.ndim() == 0 ? 1 : out.lens().back();
    if (p.cols == 0) p.cols = 1;  // no elements then; keeps i % cols defined

    if (d.has_bias) {
        const shape& bias = inputs[2];
        if (bias.type() != out.type() || bias.ndim() != 1 || out.ndim() == 0 ||
            bias.lens()[0] != out.lens().back())
            return std::nullopt;
        e.has_bias = true;
        p.bias_stride = bias.strides()[0];
    }

    p.op_count = static_cast<int>(chain.kinds.size());
    for (std::size_t k = 0; k < chain.kinds.size(); ++k) {
        p.kinds[k] = static_cast<int>(chain.kinds[k]);
        p.alpha[k] = chain.alpha[k];
        p.beta[k] = chain.beta[k];
    }

    e.first_operand = first;
    e.operand_count = static_cast<int>(chain.binary_count());
    for (int j = 0; j < e.operand_count; ++j) {
        const shape& s = inputs[first + static_cast<std::size_t>(j)];
        if (s.type() != out.type() || s.ndim() > out.ndim() || s.dynamic() || s.is_tuple()) return std::nullopt;
        // Align the operand's dims to the result's trailing dims (numpy broadcasting).
        const std::size_t pad = out.ndim() - s.ndim();
        for (std::size_t i = 0; i < s.ndim(); ++i) {
            const std::size_t len = s.lens()[i];
            const std::size_t out_len = out.lens()[pad + i];
            if (len == out_len)
                p.operand_strides[j][pad + i] = len == 1 ? 0 : s.strides()[i];
            else if (len == 1)
                p.operand_strides[j][pad + i] = 0;
            else
                return std::nullopt;
        }
        p.operand_periods[j] = repeat_period(p.lens, p.operand_strides[j], p.rank);
    }
    return e;
}

bool plain(const shape& s) { return !s.dynamic() && !s.is_tuple(); }

// KILN_GPU_CUBLASLT=0 keeps fused_dot on cuBLAS and the epilogue pass, to
// compare the two on the GPU machine.
bool cublaslt_disabled() {
    const char* value = std::getenv("KILN_GPU_CUBLASLT");
    return value != nullptr && std::string(value) == "0";
}

}  // namespace

// dot: float32, float16, bfloat16, float64 (same type in and out), any
// row- or column-major matrices with broadcast batch dims. fused_dot: float32,
// float16 or bfloat16, with weights, bias and binary operands of that type
// (16-bit: cuBLAS accumulates in float32 and writes the product in float32 to
// the workspace; the epilogue applies bias and post-ops in float and rounds
// once, as the reference does).
std::shared_ptr<const gpu_kernel> make_cuda_linalg_kernel(const gpu_kernel_request& request) {
    const std::string name = request.op.name();
    if (name != "dot" && name != "fused_dot") return nullptr;
    const auto& inputs = request.input_shapes;
    const shape& out = request.output_shape;
    if (inputs.size() < 2 || !plain(out) || !out.standard()) return nullptr;
    for (const auto& s : inputs)
        if (!plain(s)) return nullptr;
    const dtype t = inputs[0].type();
    if (inputs[1].type() != t || out.type() != t) return nullptr;  // mixed-type weights: decline
    auto types = types_of(t);
    if (!types) return nullptr;

    std::optional<epilogue_plan> epilogue;
    if (name == "fused_dot") {
        const auto* d = request.op.get_if<op::fused_dot>();
        if (d == nullptr || !epilogue_element(t)) return nullptr;
        epilogue = plan_epilogue(*d, inputs, out);
        if (!epilogue) return nullptr;
        if (!d->has_bias && d->post.empty()) epilogue.reset();  // nothing to apply after the product
    } else if (inputs.size() != 2) {
        return nullptr;
    }

    auto layout = plan_gemm_layout(inputs[0], inputs[1], out);
    if (!layout) return nullptr;
    const gemm_layout g = *layout;
    auto cublas = std::make_shared<cuda_gemm_kernel>(std::move(*layout), *types, out.element_size(), out.elements(),
                                                     out.bytes(), std::move(epilogue));
    if (name == "fused_dot" && !cublaslt_disabled())
        if (auto fused = make_cublaslt_fused_gemm(request, g, cublas)) return fused;
    return cublas;
}

}  // namespace kiln
