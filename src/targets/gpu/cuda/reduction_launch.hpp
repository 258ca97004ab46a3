#pragma once
// Plain parameter blocks and launchers of the reduction family's device code
// (reductions, softmax, layer_norm, the attention softmax). The kernels in the
// .cu files take these by value; the gpu_kernel classes fill them in from the
// arguments' shapes on the host.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace kiln::cuda_reduce {

// The most dimensions a strided walk handles; kernels decline higher ranks.
constexpr int max_rank = 8;

// Element types the device code knows.
enum class element_type { f32, f16, bf16, f64, i8, i16, i32, i64, u8, u16, u32, u64 };

// A row-major walk over `lens` reading memory at `strides` (in elements):
// linear index i lands at the offset of its multi-index.
struct strided_dims {
    int rank = 0;
    std::size_t lens[max_rank] = {};
    std::size_t strides[max_rank] = {};
};

enum class reduce_kind { sum, mean, max, min, prod };

// Output o (standard, o < outputs) folds the `count` input elements at
// offset(kept, o) + offset(reduced, r) for r < count.
struct reduce_params {
    std::size_t outputs = 0;
    std::size_t count = 0;
    strided_dims kept;
    strided_dims reduced;
};

// argmax / argmin: output o (int64, standard) is the index k < length of the
// extreme of x[offset(kept, o) + k * step]; NaN counts as the extreme, ties
// (and NaNs) pick the first unless select_last.
struct arg_reduce_params {
    std::size_t outputs = 0;
    std::size_t length = 0;
    strided_dims kept;
    std::size_t step = 0;
    bool want_max = true;
    bool select_last = false;
};

// Row r of `rows` lies at offset(in_rows, r) + k * in_step in x for k < length
// and at offset(out_rows, r) + k * out_step in y.
struct softmax_params {
    std::size_t rows = 0;
    std::size_t length = 0;
    strided_dims in_rows;
    strided_dims out_rows;
    std::size_t in_step = 0;
    std::size_t out_step = 0;
    bool take_log = false;
};

// Row r of `rows` starts at offset(outer, r) in x; its element i < count lies
// at offset(inner_x, i) from there, at offset(inner_scale, i) in scale and
// offset(inner_bias, i) in bias; the result is standard: y[r * count + i].
struct layer_norm_params {
    std::size_t rows = 0;
    std::size_t count = 0;
    strided_dims outer;
    strided_dims inner_x;
    strided_dims inner_scale;
    strided_dims inner_bias;
    float epsilon = 1e-5f;
};

// batch_norm_inference: element i of x (walk `x`, standard result y[i]) is in
// channel (i / inner) % channels; parameter k (scale, bias, mean, variance)
// of channel c lies at params[k][c * param_strides[k]].
struct batch_norm_params {
    std::size_t elements = 0;
    std::size_t channels = 0;
    std::size_t inner = 1;
    strided_dims x;
    std::size_t param_strides[4] = {};
    float epsilon = 1e-5f;
};

// Softmax over the rows of contiguous float32 scores [rows, length], in
// float32: each score s becomes softmax(s * scale + mask) (16-bit masks
// widened), written to probabilities [rows, length] in the element type; row
// r is row first_row + r of all the scores, whose mask lies at
// offset(mask_rows, first_row + r) + k * mask_step. With nan_to_zero NaN results are 0.
struct attention_softmax_params {
    std::size_t rows = 0;
    std::size_t first_row = 0;
    std::size_t length = 0;
    std::size_t pitch = 0;  // elements from one row of scores (and of probabilities) to the next, >= length
    float scale = 1;
    bool apply_scale = false;
    strided_dims mask_rows;
    std::size_t mask_step = 0;
    bool nan_to_zero = false;
    bool masked_rows_to_zero = false;  // a row whose maximum is -inf gives 0
};

// Each enqueues on `stream` and launches nothing for empty tensors.
void launch_reduce(element_type type, reduce_kind kind, const void* x, void* y, const reduce_params& p,
                   cudaStream_t stream);
void launch_arg_reduce(element_type type, const void* x, std::int64_t* y, const arg_reduce_params& p,
                       cudaStream_t stream);
// f32, f16, bf16 only.
void launch_softmax(element_type type, const void* x, void* y, const softmax_params& p, cudaStream_t stream);
// scale and bias may be null.
void launch_layer_norm(element_type type, const void* x, const void* scale, const void* bias, void* y,
                       const layer_norm_params& p, cudaStream_t stream);
// f32, f16, bf16 only.
void launch_batch_norm(element_type type, const void* x, const void* const params[4], void* y,
                       const batch_norm_params& p, cudaStream_t stream);
// mask may be null. f32, f16, bf16 only.
// probabilities = softmax(scale * scores + mask) per row, in float32; the
// probabilities are written in `type` (may alias scores when type is f32).
void launch_attention_softmax(element_type type, const float* scores, const void* mask, void* probabilities,
                              const attention_softmax_params& p, cudaStream_t stream);
// y[offset(out, first + i)] = x[i] for i < elements (x contiguous); any type by its size in bytes (2, 4, 8).
void launch_scatter_copy(std::size_t element_bytes, const void* x, void* y, const strided_dims& out, std::size_t first,
                         std::size_t elements, cudaStream_t stream);

}  // namespace kiln::cuda_reduce
