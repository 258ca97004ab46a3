// fused_attention as two cuBLAS strided-batched GEMMs around a softmax:
// scores = q @ kt into a float32 workspace (16-bit inputs, float32 output and
// accumulation, as the reference widens them: a half q.k beyond 65504 stays
// finite), softmax(scale * scores + mask) in float32, the probabilities
// written in the element type (in place for float32, into a second workspace
// region for 16-bit types, since cuBLAS multiplies operands of one type),
// then probabilities @ v into the result (or into the workspace and
// scattered into the layout output_order asks for). Batches that do not fit
// the scores budget run in chunks.
#include <algorithm>
#include <climits>
#include <optional>
#include <string>
#include <vector>

#include "ops/fused_attention.hpp"
#include "ops/op_helpers.hpp"
#include "targets/gpu/cuda/cuda_check.hpp"
#include "targets/gpu/cuda/cuda_device.hpp"
#include "targets/gpu/cuda/reduction_factories.hpp"
#include "targets/gpu/cuda/reduction_shapes.hpp"

namespace kiln {

namespace {

using cuda_reduce::element_type;

// At most this many bytes of scores at a time (more batches run in chunks).
constexpr std::size_t scores_budget = std::size_t(256) << 20;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// One GEMM operand (a logical row-major [rows, cols] matrix per batch) as
// cuBLAS sees it after the row-major <-> column-major swap: the stored
// column-major matrix must read as the operand's transpose after `op`.
struct gemm_operand {
    cublasOperation_t op = CUBLAS_OP_N;
    long long ld = 1;
    long long batch_stride = 0;
};

// Row-major storage (cols contiguous) is the transpose already (op N);
// column-major storage (rows contiguous) needs op T. Null for other strides.
std::optional<gemm_operand> describe_matrix(std::size_t rows, std::size_t cols, std::size_t row_stride,
                                            std::size_t col_stride) {
    const std::size_t min_cols = std::max<std::size_t>(cols, 1), min_rows = std::max<std::size_t>(rows, 1);
    if (cols == 1 || col_stride == 1) {
        const std::size_t ld = rows == 1 ? min_cols : row_stride;
        if (ld >= min_cols && ld <= INT_MAX) return gemm_operand{CUBLAS_OP_N, static_cast<long long>(ld), 0};
    }
    if (rows == 1 || row_stride == 1) {
        const std::size_t ld = cols == 1 ? min_rows : col_stride;
        if (ld >= min_rows && ld <= INT_MAX) return gemm_operand{CUBLAS_OP_T, static_cast<long long>(ld), 0};
    }
    return std::nullopt;
}

// The one stride between consecutive matrices of `s` over the batch lens
// `batch` (0 when s has no batch of its own, as broadcasting reads it), or
// null when s's batch dims differ from `batch` or do not collapse into one stride.
std::optional<long long> batch_stride(const shape& s, const std::vector<std::size_t>& batch) {
    const std::size_t own = s.ndim() - 2;
    if (own > batch.size()) return std::nullopt;
    bool all_one = true;
    for (std::size_t j = 0; j < own; ++j) all_one = all_one && s.lens()[j] == 1;
    if (all_one) return 0;
    const std::size_t pad = batch.size() - own;
    for (std::size_t j = 0; j < pad; ++j)
        if (batch[j] != 1) return std::nullopt;
    std::optional<std::size_t> stride;
    std::size_t next = 0;  // the stride the next outer non-trivial dim must have
    for (std::size_t j = own; j-- > 0;) {
        const std::size_t len = s.lens()[j];
        if (len != batch[pad + j]) return std::nullopt;
        if (len == 1) continue;
        if (!stride) {
            stride = s.strides()[j];
            next = *stride * len;
        } else {
            if (s.strides()[j] != next) return std::nullopt;
            next *= len;
        }
    }
    return static_cast<long long>(stride.value_or(0));
}

std::optional<gemm_operand> describe_operand(const shape& s, const std::vector<std::size_t>& batch) {
    const std::size_t n = s.ndim();
    auto operand = describe_matrix(s.lens()[n - 2], s.lens()[n - 1], s.strides()[n - 2], s.strides()[n - 1]);
    const auto stride = batch_stride(s, batch);
    if (!operand || !stride) return std::nullopt;
    operand->batch_stride = *stride;
    return operand;
}

cudaDataType_t cuda_type(element_type t) {
    switch (t) {
        case element_type::f16: return CUDA_R_16F;
        case element_type::bf16: return CUDA_R_16BF;
        default: return CUDA_R_32F;
    }
}

// float32 in full precision whatever math mode the shared handle has (no TF32);
// half / bfloat16 inputs accumulate in float.
cublasComputeType_t compute_type(element_type t) {
    return t == element_type::f32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
}

std::size_t element_bytes(element_type t) { return t == element_type::f32 ? 4 : 2; }

// Everything run() needs, fixed when the kernel is built.
struct attention_plan {
    element_type type{};
    std::size_t batch = 1, sq = 0, d = 0, sk = 0, dv = 0;
    // The row pitch of the scores and probabilities: sk rounded up to 8
    // elements, so that every row starts 16-byte aligned as cuBLAS's tensor-core
    // kernels need (ViT's 197 keys made the second product fall back to slow ones).
    std::size_t pitch = 0;
    gemm_operand q, kt, v;
    std::size_t chunk = 1;    // batch entries per pass through the workspace
    bool has_mask = false;
    cuda_reduce::strided_dims mask_rows;  // over the scores' dims but the last
    std::size_t mask_step = 0;
    float scale = 1;
    bool apply_scale = false;
    bool nan_to_zero = false;
    bool masked_rows_to_zero = false;
    bool staged = false;  // the result's layout is not standard: written through the workspace
    cuda_reduce::strided_dims result_dims;
    std::size_t scores_bytes = 0;         // workspace bytes of one chunk's float32 scores (rounded up)
    std::size_t probabilities_bytes = 0;  // 16-bit types: one chunk's probabilities (rounded up); 0 for float32
    std::size_t staging_bytes = 0;
};

class cuda_attention_kernel final : public gpu_kernel {
public:
    explicit cuda_attention_kernel(attention_plan plan) : plan_(std::move(plan)) {}

    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        const attention_plan& p = plan_;
        if (p.batch == 0 || p.sq == 0 || p.dv == 0) return;
        const cudaStream_t stream = as_cuda(launch.stream);
        cublasHandle_t handle = static_cast<cuda_device&>(launch.device).cublas(launch.stream);
        const cudaDataType_t type = cuda_type(p.type);
        const cublasComputeType_t compute = compute_type(p.type);
        const std::size_t bytes = element_bytes(p.type);
        const float one = 1, zero = 0;
        std::byte* scores = launch.workspace;
        // float32 probabilities overwrite their scores; 16-bit ones get their own region.
        std::byte* probabilities = p.probabilities_bytes == 0 ? scores : launch.workspace + p.scores_bytes;
        std::byte* staging = launch.workspace + p.scores_bytes + p.probabilities_bytes;
        const auto* q = inputs[0].data();
        const auto* kt = inputs[1].data();
        const auto* v = inputs[2].data();
        const void* mask = p.has_mask ? inputs[3].data() : nullptr;
        const long long scores_stride = static_cast<long long>(p.sq * p.pitch);
        const long long out_stride = static_cast<long long>(p.sq * p.dv);
        for (std::size_t first = 0; first < p.batch; first += p.chunk) {
            const std::size_t count = std::min(p.chunk, p.batch - first);
            auto at = [&](const std::byte* base, const gemm_operand& o) {
                return base + static_cast<std::size_t>(o.batch_stride) * first * bytes;
            };
            // scores [count, Sq, Sk] = q @ kt, row-major: as cuBLAS sees it, scores^T = kt^T q^T.
            KILN_CUBLAS(cublasGemmStridedBatchedEx(
                handle, p.kt.op, p.q.op, static_cast<int>(p.sk), static_cast<int>(p.sq), static_cast<int>(p.d), &one,
                at(kt, p.kt), type, static_cast<int>(p.kt.ld), p.kt.batch_stride, at(q, p.q), type,
                static_cast<int>(p.q.ld), p.q.batch_stride, &zero, scores, CUDA_R_32F, static_cast<int>(p.pitch),
                scores_stride, static_cast<int>(count), compute, CUBLAS_GEMM_DEFAULT));
            cuda_reduce::attention_softmax_params s;
            s.rows = count * p.sq;
            s.first_row = first * p.sq;
            s.length = p.sk;
            s.pitch = p.pitch;
            s.scale = p.scale;
            s.apply_scale = p.apply_scale;
            s.mask_rows = p.mask_rows;
            s.mask_step = p.mask_step;
            s.nan_to_zero = p.nan_to_zero;
            s.masked_rows_to_zero = p.masked_rows_to_zero;
            cuda_reduce::launch_attention_softmax(p.type, reinterpret_cast<const float*>(scores), mask, probabilities,
                                                  s, stream);
            // out [count, Sq, Dv] = probabilities @ v: out^T = v^T probabilities^T.
            std::byte* out = p.staged ? staging : result.data() + first * static_cast<std::size_t>(out_stride) * bytes;
            KILN_CUBLAS(cublasGemmStridedBatchedEx(
                handle, p.v.op, CUBLAS_OP_N, static_cast<int>(p.dv), static_cast<int>(p.sq), static_cast<int>(p.sk),
                &one, at(v, p.v), type, static_cast<int>(p.v.ld), p.v.batch_stride, probabilities, type,
                static_cast<int>(p.pitch), scores_stride, &zero, out, type, static_cast<int>(p.dv), out_stride,
                static_cast<int>(count), compute, CUBLAS_GEMM_DEFAULT));
            if (p.staged)
                cuda_reduce::launch_scatter_copy(bytes, staging, result.data(), p.result_dims,
                                                 first * static_cast<std::size_t>(out_stride),
                                                 count * static_cast<std::size_t>(out_stride), stream);
        }
    }
    std::size_t workspace_bytes() const override {
        return plan_.scores_bytes + plan_.probabilities_bytes + plan_.staging_bytes;
    }
    std::string algorithm() const override { return "cublas_attention"; }

private:
    attention_plan plan_;
};

}  // namespace

std::shared_ptr<const gpu_kernel> make_cuda_attention_kernel(const gpu_kernel_request& request) {
    const auto* fa = request.op.get_if<op::fused_attention>();
    const auto& in = request.input_shapes;
    // (A causal op masks by position: these kernels read masks only.)
    if (!fa || fa->causal || in.size() != (fa->has_mask ? 4u : 3u)) return nullptr;
    const shape& out = request.output_shape;
    if (!cuda_reduce::fits_walks(in) || !cuda_reduce::fits_walks({out})) return nullptr;
    const auto type = cuda_reduce::element_type_of(in[0].type());
    if (!type || (*type != element_type::f32 && *type != element_type::f16 && *type != element_type::bf16))
        return nullptr;
    for (const auto& s : in)
        if (s.type() != in[0].type()) return nullptr;
    if (out.type() != in[0].type()) return nullptr;
    for (std::size_t k = 0; k < 3; ++k)
        if (in[k].ndim() < 2) return nullptr;
    const shape scores = fa->scores_shape(in);  // [..., Sq, Sk]
    const std::size_t rank = out.ndim();
    if (scores.ndim() != rank || rank < 2) return nullptr;
    // The result's batch must be the scores' (v does not widen it).
    const std::vector<std::size_t> batch(out.lens().begin(), out.lens().end() - 2);
    if (!std::equal(batch.begin(), batch.end(), scores.lens().begin())) return nullptr;

    attention_plan p;
    p.type = *type;
    for (auto l : batch) p.batch *= l;
    p.sq = in[0].lens()[in[0].ndim() - 2];
    p.d = in[0].lens()[in[0].ndim() - 1];
    p.sk = in[1].lens()[in[1].ndim() - 1];
    p.dv = in[2].lens()[in[2].ndim() - 1];
    if (in[1].lens()[in[1].ndim() - 2] != p.d || in[2].lens()[in[2].ndim() - 2] != p.sk) return nullptr;
    if (out.lens()[rank - 2] != p.sq || out.lens()[rank - 1] != p.dv) return nullptr;
    // cuBLAS with k = 0 and softmax over nothing: rare, left to the host.
    if (p.d == 0 || p.sk == 0) return nullptr;
    const std::size_t int_max = INT_MAX;
    if (p.sq > int_max || p.d > int_max || p.sk > int_max || p.dv > int_max) return nullptr;
    auto q = describe_operand(in[0], batch);
    auto kt = describe_operand(in[1], batch);
    auto v = describe_operand(in[2], batch);
    if (!q || !kt || !v) return nullptr;
    p.q = *q;
    p.kt = *kt;
    p.v = *v;

    if (fa->has_mask) {
        p.has_mask = true;
        const auto mask_strides = ops::broadcast_strides(in[3], scores.lens());
        p.mask_rows = cuda_reduce::make_dims(cuda_reduce::without(scores.lens(), rank - 1),
                                             cuda_reduce::without(mask_strides, rank - 1));
        p.mask_step = mask_strides[rank - 1];
    }
    p.scale = static_cast<float>(fa->scale);
    p.apply_scale = fa->scale != 1;
    p.nan_to_zero = fa->nan_to_zero;
    p.masked_rows_to_zero = fa->masked_rows_to_zero;

    const std::size_t bytes = element_bytes(p.type);
    const bool separate_probabilities = p.type != element_type::f32;
    p.pitch = round_up(p.sk, 8);
    if (p.pitch > int_max) return nullptr;
    const std::size_t per_batch_scores = p.sq * p.pitch * sizeof(float);
    const std::size_t per_batch_probabilities = separate_probabilities ? p.sq * p.pitch * bytes : 0;
    const std::size_t per_batch = per_batch_scores + per_batch_probabilities;
    // Batch entries per pass: as many as the budget holds, at least one, at most cuBLAS's int batch count.
    const std::size_t fits = per_batch == 0 ? p.batch : scores_budget / per_batch;
    p.chunk = std::min<std::size_t>(std::max<std::size_t>(1, std::min(p.batch, fits)), int_max);
    p.scores_bytes = round_up(p.chunk * per_batch_scores, 256);
    p.probabilities_bytes = separate_probabilities ? round_up(p.chunk * per_batch_probabilities, 256) : 0;
    p.staged = !out.standard();
    if (p.staged) {
        p.result_dims = cuda_reduce::make_dims(out.lens(), out.strides());
        p.staging_bytes = round_up(p.chunk * p.sq * p.dv * bytes, 256);
    }
    return std::make_shared<cuda_attention_kernel>(std::move(p));
}

}  // namespace kiln
