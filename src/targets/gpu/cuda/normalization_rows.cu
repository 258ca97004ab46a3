// softmax / log_softmax and layer_norm over contiguous rows: a group of
// threads (a warp, or the whole block for long rows) reads its row once into
// registers, 16 bytes at a time where the caller allows, reduces with warp
// shuffles (and shared memory across the block's warps), and writes the row.
// Arithmetic in float, as the strided kernels do.
#include <cmath>

#include "targets/gpu/cuda/cuda_check.hpp"
#include "targets/gpu/cuda/normalization_rows_launch.hpp"
#include "targets/gpu/cuda/reduction_device.cuh"

namespace kiln::cuda_reduce {

namespace {

constexpr int values_per_thread = static_cast<int>(row_values_per_thread);

// V consecutive elements moved as one load or store (16 bytes when V > 1).
template <class T, int V>
struct alignas(sizeof(T) * V) packed {
    T v[V];
};

// Threads of one row: `Group` consecutive threads of the block (32 or the block).
template <int Group>
__device__ inline unsigned lane_in_row() {
    return threadIdx.x % static_cast<unsigned>(Group);
}

// Combines v over the row's threads; every thread gets the result. For a
// block-wide group every thread of the block must call it.
template <int Group, class F>
__device__ float row_reduce(float v, float* shared, F combine) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v = combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
    if constexpr (Group == 32) {
        return v;
    } else {
        static_assert(Group == block_threads, "a row takes a warp or the whole block");
        const unsigned warp = threadIdx.x / 32;
        if (threadIdx.x % 32 == 0) shared[warp] = v;
        __syncthreads();
        float total = shared[0];
        for (int w = 1; w < Group / 32; ++w) total = combine(total, shared[w]);
        __syncthreads();  // the next reduction reuses `shared`
        return total;
    }
}

struct add {
    __device__ float operator()(float a, float b) const { return a + b; }
};
// fmaxf skips NaN as the reference's fmax does; a NaN still makes the sum NaN.
struct maximum {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Vector j of a row (j < vectors) is held by thread j % Group in slot j / Group.
template <int V, int Group>
__device__ inline std::size_t vector_index(unsigned lane, int slot) {
    return lane + static_cast<std::size_t>(Group) * static_cast<std::size_t>(slot);
}

// The row's values this thread holds (the others are left unset).
template <class T, int V, int Group>
__device__ void load_row(const T* row, std::size_t vectors, unsigned lane, float (&values)[values_per_thread]) {
#pragma unroll
    for (int slot = 0; slot < values_per_thread / V; ++slot) {
        const std::size_t j = vector_index<V, Group>(lane, slot);
        if (j < vectors) {
            const packed<T, V> p = reinterpret_cast<const packed<T, V>*>(row)[j];
#pragma unroll
            for (int e = 0; e < V; ++e) values[slot * V + e] = to_float(p.v[e]);
        }
    }
}

// f(value) over the values this thread holds, folded with `combine` from `init`.
template <int V, int Group, class F, class C>
__device__ float fold_row(const float (&values)[values_per_thread], std::size_t vectors, unsigned lane, float init, F f,
                          C combine) {
    float acc = init;
#pragma unroll
    for (int slot = 0; slot < values_per_thread / V; ++slot)
        if (vector_index<V, Group>(lane, slot) < vectors)
#pragma unroll
            for (int e = 0; e < V; ++e) acc = combine(acc, f(values[slot * V + e]));
    return acc;
}

// Rows this block takes per step: one per group.
template <int Group>
constexpr std::size_t rows_per_block() {
    return static_cast<std::size_t>(block_threads / Group);
}

template <class T, int V, int Group>
__global__ void softmax_rows_kernel(const T* x, T* y, contiguous_rows p, bool take_log) {
    __shared__ float shared[block_threads / 32];
    const unsigned lane = lane_in_row<Group>();
    const std::size_t vectors = p.length / V;
    // Every thread of a group has the same row, so the loop (and the block-wide reductions) stay uniform.
    for (std::size_t row = blockIdx.x * rows_per_block<Group>() + threadIdx.x / Group; row < p.rows;
         row += gridDim.x * rows_per_block<Group>()) {
        float values[values_per_thread];
        load_row<T, V, Group>(x + offset_of(p.x_rows, row), vectors, lane, values);
        const float max = row_reduce<Group>(fold_row<V, Group>(
                                                values, vectors, lane, -INFINITY, [](float v) { return v; }, maximum{}),
                                            shared, maximum{});
        const float sum =
            row_reduce<Group>(fold_row<V, Group>(
                                  values, vectors, lane, 0.0f, [max](float v) { return expf(v - max); }, add{}),
                              shared, add{});
        const float log_sum = logf(sum);
        T* yr = y + offset_of(p.y_rows, row);
#pragma unroll
        for (int slot = 0; slot < values_per_thread / V; ++slot) {
            const std::size_t j = vector_index<V, Group>(lane, slot);
            if (j < vectors) {
                packed<T, V> out;
#pragma unroll
                for (int e = 0; e < V; ++e) {
                    const float shifted = values[slot * V + e] - max;
                    out.v[e] = from_float<T>(take_log ? shifted - log_sum : expf(shifted) / sum);
                }
                reinterpret_cast<packed<T, V>*>(yr)[j] = out;
            }
        }
    }
}

template <class T, int V, int Group>
__global__ void layer_norm_rows_kernel(const T* x, const T* scale, const T* bias, T* y, contiguous_rows p,
                                       float epsilon) {
    __shared__ float shared[block_threads / 32];
    const unsigned lane = lane_in_row<Group>();
    const std::size_t vectors = p.length / V;
    const float count = static_cast<float>(p.length);
    for (std::size_t row = blockIdx.x * rows_per_block<Group>() + threadIdx.x / Group; row < p.rows;
         row += gridDim.x * rows_per_block<Group>()) {
        float values[values_per_thread];
        load_row<T, V, Group>(x + offset_of(p.x_rows, row), vectors, lane, values);
        const float mean = row_reduce<Group>(fold_row<V, Group>(
                                                 values, vectors, lane, 0.0f, [](float v) { return v; }, add{}),
                                             shared, add{}) /
                           count;
        // Variance from the deviations (two passes over the registers, as the reference), biased.
        const float squares = row_reduce<Group>(
            fold_row<V, Group>(
                values, vectors, lane, 0.0f, [mean](float v) { return (v - mean) * (v - mean); }, add{}),
            shared, add{});
        const float inv_std = 1.0f / sqrtf(squares / count + epsilon);
        T* yr = y + offset_of(p.y_rows, row);
#pragma unroll
        for (int slot = 0; slot < values_per_thread / V; ++slot) {
            const std::size_t j = vector_index<V, Group>(lane, slot);
            if (j < vectors) {
                packed<T, V> s, b, out;
                if (scale) s = reinterpret_cast<const packed<T, V>*>(scale)[j];
                if (bias) b = reinterpret_cast<const packed<T, V>*>(bias)[j];
#pragma unroll
                for (int e = 0; e < V; ++e) {
                    float v = (values[slot * V + e] - mean) * inv_std;
                    if (scale) v *= to_float(s.v[e]);
                    if (bias) v += to_float(b.v[e]);
                    out.v[e] = from_float<T>(v);
                }
                reinterpret_cast<packed<T, V>*>(yr)[j] = out;
            }
        }
    }
}

template <int Group>
unsigned grid_for_rows(std::size_t rows) {
    return grid_for(rows, rows_per_block<Group>());
}

template <class T, int V>
void launch_softmax_vectors(const void* x, void* y, const contiguous_rows& p, bool take_log, cudaStream_t stream) {
    const T* in = static_cast<const T*>(x);
    T* out = static_cast<T*>(y);
    if (p.length <= warp_row_limit)
        softmax_rows_kernel<T, V, 32><<<grid_for_rows<32>(p.rows), block_threads, 0, stream>>>(in, out, p, take_log);
    else
        softmax_rows_kernel<T, V, block_threads>
            <<<grid_for_rows<block_threads>(p.rows), block_threads, 0, stream>>>(in, out, p, take_log);
    KILN_CUDA(cudaGetLastError());
}

template <class T, int V>
void launch_layer_norm_vectors(const void* x, const void* scale, const void* bias, void* y, const contiguous_rows& p,
                               float epsilon, cudaStream_t stream) {
    const T* in = static_cast<const T*>(x);
    const T* s = static_cast<const T*>(scale);
    const T* b = static_cast<const T*>(bias);
    T* out = static_cast<T*>(y);
    if (p.length <= warp_row_limit)
        layer_norm_rows_kernel<T, V, 32>
            <<<grid_for_rows<32>(p.rows), block_threads, 0, stream>>>(in, s, b, out, p, epsilon);
    else
        layer_norm_rows_kernel<T, V, block_threads>
            <<<grid_for_rows<block_threads>(p.rows), block_threads, 0, stream>>>(in, s, b, out, p, epsilon);
    KILN_CUDA(cudaGetLastError());
}

template <class T>
void launch_softmax_typed(const void* x, void* y, const contiguous_rows& p, bool take_log, cudaStream_t stream) {
    if (p.vectorized)
        launch_softmax_vectors<T, 16 / sizeof(T)>(x, y, p, take_log, stream);
    else
        launch_softmax_vectors<T, 1>(x, y, p, take_log, stream);
}

template <class T>
void launch_layer_norm_typed(const void* x, const void* scale, const void* bias, void* y, const contiguous_rows& p,
                             float epsilon, cudaStream_t stream) {
    if (p.vectorized)
        launch_layer_norm_vectors<T, 16 / sizeof(T)>(x, scale, bias, y, p, epsilon, stream);
    else
        launch_layer_norm_vectors<T, 1>(x, scale, bias, y, p, epsilon, stream);
}

}  // namespace

void launch_softmax_rows(element_type type, const void* x, void* y, const contiguous_rows& rows, bool take_log,
                         cudaStream_t stream) {
    if (rows.rows == 0 || rows.length == 0 || rows.length > block_row_limit) return;
    switch (type) {
        case element_type::f32:
            return launch_softmax_typed<float>(x, y, rows, take_log, stream);
        case element_type::f16:
            return launch_softmax_typed<__half>(x, y, rows, take_log, stream);
        case element_type::bf16:
            return launch_softmax_typed<__nv_bfloat16>(x, y, rows, take_log, stream);
        default:
            return;
    }
}

void launch_layer_norm_rows(element_type type, const void* x, const void* scale, const void* bias, void* y,
                            const contiguous_rows& rows, float epsilon, cudaStream_t stream) {
    if (rows.rows == 0 || rows.length == 0 || rows.length > block_row_limit) return;
    switch (type) {
        case element_type::f32:
            return launch_layer_norm_typed<float>(x, scale, bias, y, rows, epsilon, stream);
        case element_type::f16:
            return launch_layer_norm_typed<__half>(x, scale, bias, y, rows, epsilon, stream);
        case element_type::bf16:
            return launch_layer_norm_typed<__nv_bfloat16>(x, scale, bias, y, rows, epsilon, stream);
        default:
            return;
    }
}

}  // namespace kiln::cuda_reduce
