// fused_dot whose bias, residual add and activation cuBLASLt computes inside the
// product: D = act(A B + C + bias) with C the residual (beta 1) or none,
// in float32 from the float32 accumulator and rounded once to the result's
// type, as the reference does. The cuBLAS path it replaces wrote a 16-bit
// product in float32 to the workspace and read it back in a separate
// epilogue pass, so at batch 32 each such product moved its result through
// memory three times. Operands whose run-time addresses are not 16-byte
// aligned (views into other buffers) take that path still.
#include "targets/gpu/cuda/cublaslt_fused_gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>

#include "ops/fused_dot.hpp"
#include "targets/gpu/cuda/cuda_check.hpp"
#include "targets/gpu/cuda/cuda_device.hpp"

namespace kiln {

namespace {

// The workspace NVIDIA's cuBLASLt documentation suggests for Hopper.
constexpr std::size_t lt_workspace_bytes = std::size_t(32) << 20;
// What the chosen algorithm may assume of every pointer (checked at each run).
constexpr std::size_t lt_alignment = 16;

bool aligned(const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % lt_alignment == 0;
}

// The activation cuBLASLt applies last.
enum class lt_activation { none, relu, gelu_tanh };

// The part of a fused_dot's chain cuBLASLt computes: the residual's input
// index (or none) and the activation after it.
struct lt_chain {
    std::optional<std::size_t> residual;
    lt_activation activation = lt_activation::none;
};

// KILN_GPU_CUBLASLT_GELU=1 lets cuBLASLt's GELU epilogue compute gelu_tanh:
// its documentation does not give the formula, so it stays off until the GPU
// suite's check of it against ref has passed on the GPU machine.
bool gelu_inside_cublaslt() {
    const char* value = std::getenv("KILN_GPU_CUBLASLT_GELU");
    return value != nullptr && std::string(value) == "1";
}

std::optional<lt_chain> chain_of(const op::fused_dot& d, const std::vector<shape>& inputs, const shape& out) {
    const auto& kinds = d.post.kinds;
    lt_chain c;
    std::size_t k = 0;
    if (k < kinds.size() && kinds[k] == op::post_op_kind::add) {
        const std::size_t index = d.first_post_operand();
        if (index >= inputs.size()) return std::nullopt;
        const shape& x = inputs[index];
        // C is read as the result's matrix: same type, same lens, standard.
        if (x.type() != out.type() || x.lens() != out.lens() || !x.standard()) return std::nullopt;
        c.residual = index;
        ++k;
    }
    if (k < kinds.size() && kinds[k] == op::post_op_kind::relu) {
        c.activation = lt_activation::relu;
        ++k;
    } else if (k < kinds.size() && kinds[k] == op::post_op_kind::gelu_tanh && gelu_inside_cublaslt()) {
        c.activation = lt_activation::gelu_tanh;
        ++k;
    }
    if (k != kinds.size() || inputs.size() != d.first_post_operand() + (c.residual ? 1 : 0)) return std::nullopt;
    if (d.has_bias) {
        const shape& bias = inputs[2];
        if (bias.type() != out.type() || bias.ndim() != 1 || !bias.standard() || out.ndim() == 0 ||
            bias.lens()[0] != out.lens().back())
            return std::nullopt;
    }
    return c;
}

cublasLtEpilogue_t epilogue_of(bool bias, lt_activation activation) {
    switch (activation) {
        case lt_activation::relu:
            return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
        case lt_activation::gelu_tanh:
            return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
        default:
            return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    }
}

bool ok(cublasStatus_t status) {
    return status == CUBLAS_STATUS_SUCCESS;
}

class cublaslt_fused_gemm_kernel final : public gpu_kernel {
public:
    cublaslt_fused_gemm_kernel(std::shared_ptr<const gpu_kernel> fallback, bool has_bias, lt_chain chain,
                               std::string name)
        : fallback_(std::move(fallback)), has_bias_(has_bias), chain_(chain), name_(std::move(name)) {}
    ~cublaslt_fused_gemm_kernel() override {
        if (preference_ != nullptr) cublasLtMatmulPreferenceDestroy(preference_);
        for (auto* layout : {a_, b_, c_})
            if (layout != nullptr) cublasLtMatrixLayoutDestroy(layout);
        if (desc_ != nullptr) cublasLtMatmulDescDestroy(desc_);
    }
    cublaslt_fused_gemm_kernel(const cublaslt_fused_gemm_kernel&) = delete;
    cublaslt_fused_gemm_kernel& operator=(const cublaslt_fused_gemm_kernel&) = delete;

    // Describes the product to cuBLASLt and asks its heuristic for an
    // algorithm; false when it has none. Row-major C = A B is column-major
    // C^T = B^T A^T: cuBLASLt's first operand is b, its second a.
    bool describe(cublasLtHandle_t handle, const gemm_layout& g, cudaDataType_t type) {
        if (!ok(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F))) return false;
        const cublasOperation_t op_b = g.b.column_major ? CUBLAS_OP_T : CUBLAS_OP_N;
        const cublasOperation_t op_a = g.a.column_major ? CUBLAS_OP_T : CUBLAS_OP_N;
        const cublasLtEpilogue_t epilogue = epilogue_of(has_bias_, chain_.activation);
        if (!ok(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b))) ||
            !ok(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a))) ||
            !ok(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue))))
            return false;
        if (has_bias_ &&
            !ok(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof(type))))
            return false;
        // The stored matrices, before the operations: n x k (or k x n) for b,
        // k x m (or m x k) for a, n x m for the result.
        const auto n = static_cast<std::uint64_t>(g.n), m = static_cast<std::uint64_t>(g.m),
                   k = static_cast<std::uint64_t>(g.k);
        if (!ok(cublasLtMatrixLayoutCreate(&b_, type, op_b == CUBLAS_OP_N ? n : k, op_b == CUBLAS_OP_N ? k : n,
                                           static_cast<std::int64_t>(g.b.ld))) ||
            !ok(cublasLtMatrixLayoutCreate(&a_, type, op_a == CUBLAS_OP_N ? k : m, op_a == CUBLAS_OP_N ? m : k,
                                           static_cast<std::int64_t>(g.a.ld))) ||
            !ok(cublasLtMatrixLayoutCreate(&c_, type, n, m, static_cast<std::int64_t>(n))))
            return false;
        if (!ok(cublasLtMatmulPreferenceCreate(&preference_))) return false;
        const std::uint64_t workspace = lt_workspace_bytes;
        const auto alignment = static_cast<std::uint32_t>(lt_alignment);
        if (!ok(cublasLtMatmulPreferenceSetAttribute(preference_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                     sizeof(workspace))))
            return false;
        for (auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                               CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
            if (!ok(cublasLtMatmulPreferenceSetAttribute(preference_, attribute, &alignment, sizeof(alignment))))
                return false;
        // A split-K sum only in the compute type (float32): the schemes that
        // keep partial sums in a 16-bit result would round more than once.
        const std::uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
        if (!ok(cublasLtMatmulPreferenceSetAttribute(preference_, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                     &reduction, sizeof(reduction))))
            return false;
        // The heuristic reads the bias address's alignment: one of exactly
        // lt_alignment bytes, what run() checks (null would look aligned to anything).
        const void* bias_alignment = reinterpret_cast<const void*>(lt_alignment);
        if (has_bias_ && !ok(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_alignment,
                                                            sizeof(bias_alignment))))
            return false;
        cublasLtMatmulHeuristicResult_t result{};
        int returned = 0;
        if (!ok(cublasLtMatmulAlgoGetHeuristic(handle, desc_, b_, a_, c_, c_, preference_, 1, &result, &returned)) ||
            returned == 0 || !ok(result.state))
            return false;
        algo_ = result.algo;
        return true;
    }

    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        const void* a = inputs[0].data();
        const void* b = inputs[1].data();
        const void* bias = has_bias_ ? inputs[2].data() : nullptr;
        void* d = result.data();
        const void* c = chain_.residual ? inputs[*chain_.residual].data() : d;
        if (!aligned(a) || !aligned(b) || !aligned(c) || !aligned(d) || (bias != nullptr && !aligned(bias))) {
            fallback_->run(launch, result, inputs);
            return;
        }
        const float one = 1, beta = chain_.residual ? 1.0f : 0.0f;
        cublasLtHandle_t handle = static_cast<cuda_device&>(launch.device).cublas_lt();
        cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
        {
            // The bias address is the descriptor's: set and used under one lock,
            // since plans of several contexts may run this kernel at once.
            std::lock_guard<std::mutex> lock(mutex_);
            if (has_bias_)
                KILN_CUBLAS(
                    cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
            status = cublasLtMatmul(handle, desc_, &one, b, b_, a, a_, &beta, c, c_, d, c_, &algo_, launch.workspace,
                                    lt_workspace_bytes, as_cuda(launch.stream));
        }
        if (status == CUBLAS_STATUS_SUCCESS) return;
        // cuBLASLt checks its arguments before it enqueues anything: where it
        // refuses a call the heuristic offered, the cuBLAS path computes the
        // op. Any other failure (a fault on the device) is an error.
        if (status != CUBLAS_STATUS_NOT_SUPPORTED && status != CUBLAS_STATUS_INVALID_VALUE &&
            status != CUBLAS_STATUS_ARCH_MISMATCH)
            KILN_CUBLAS(status);
        if (!refusal_reported_.exchange(true))
            std::cerr << "kiln gpu: cuBLASLt refused " << name_ << " (" << cublasGetStatusString(status)
                      << "); cuBLAS and the epilogue pass compute it\n";
        fallback_->run(launch, result, inputs);
    }

    std::size_t workspace_bytes() const override { return std::max(lt_workspace_bytes, fallback_->workspace_bytes()); }
    std::string algorithm() const override { return name_; }

private:
    std::shared_ptr<const gpu_kernel> fallback_;
    bool has_bias_;
    lt_chain chain_;
    std::string name_;
    cublasLtMatmulDesc_t desc_ = nullptr;
    cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
    cublasLtMatmulPreference_t preference_ = nullptr;
    cublasLtMatmulAlgo_t algo_{};
    mutable std::mutex mutex_;
    mutable std::atomic<bool> refusal_reported_{false};
};

std::optional<cudaDataType_t> lt_type(dtype t) {
    switch (t) {
        case dtype::float_type:
            return CUDA_R_32F;
        case dtype::half_type:
            return CUDA_R_16F;
        case dtype::bf16_type:
            return CUDA_R_16BF;
        default:
            return std::nullopt;
    }
}

}  // namespace

std::shared_ptr<const gpu_kernel> make_cublaslt_fused_gemm(const gpu_kernel_request& request, const gemm_layout& g,
                                                           std::shared_ptr<const gpu_kernel> fallback) {
    const auto* d = request.op.get_if<op::fused_dot>();
    const shape& out = request.output_shape;
    const auto type = lt_type(out.type());
    if (d == nullptr || !type || g.k == 0 || g.inner.len != 1 || g.outer_count() != 1) return nullptr;
    // cuBLASLt adds the bias along the result's columns (n): a product with a
    // vector (b [k], result [.., m]) has one column, and its bias runs along m.
    if (d->has_bias && (out.ndim() == 0 || g.n != out.lens().back())) return nullptr;
    if (!d->has_bias && d->post.empty()) return nullptr;  // a plain product: cuBLAS as it is
    const auto chain = chain_of(*d, request.input_shapes, out);
    if (!chain) return nullptr;
    std::string name = "cublaslt_gemm";
    if (d->has_bias) name += "_bias";
    if (chain->residual) name += "_residual";
    if (chain->activation == lt_activation::relu) name += "_relu";
    if (chain->activation == lt_activation::gelu_tanh) name += "_gelu_tanh";
    auto kernel = std::make_shared<cublaslt_fused_gemm_kernel>(std::move(fallback), d->has_bias, *chain, name);
    auto& device = static_cast<cuda_device&>(request.device);
    if (!kernel->describe(device.cublas_lt(), g, *type)) return nullptr;
    return kernel;
}

}  // namespace kiln
