// reduce_sum / mean / max / min / prod on the device: a group of threads per
// output element (a warp, or the block for long reductions), each thread
// folding a strided share of the reduced elements, then a tree in shared memory.
// Accumulation as the reference's: double for floating types, 64-bit for integers.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "targets/gpu/cuda/cuda_check.hpp"
#include "targets/gpu/cuda/reduction_device.cuh"

namespace kiln::cuda_reduce {

namespace {

template <class T>
constexpr bool is_floating = std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, __half> ||
                             std::is_same_v<T, __nv_bfloat16>;

template <class T>
using accumulator_t =
    std::conditional_t<is_floating<T>, double, std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>>;

template <class A, class T>
__device__ A load_accumulator(T v) {
    if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>)
        return static_cast<A>(to_float(v));
    else
        return static_cast<A>(v);
}

// Floating results go through float first, as the reference's do (double -> float -> half).
template <class T, class A>
__device__ T store_result(A v) {
    if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>)
        return from_float<T>(static_cast<float>(v));
    else
        return static_cast<T>(v);
}

template <reduce_kind K, class T, class A>
__device__ A initial_value() {
    if constexpr (K == reduce_kind::sum || K == reduce_kind::mean) return A(0);
    if constexpr (K == reduce_kind::prod) return A(1);
    if constexpr (K == reduce_kind::max) {
        if constexpr (is_floating<T>)
            return -static_cast<A>(INFINITY);
        else
            return static_cast<A>(std::numeric_limits<T>::lowest());
    }
    if constexpr (K == reduce_kind::min) {
        if constexpr (is_floating<T>)
            return static_cast<A>(INFINITY);
        else
            return static_cast<A>(std::numeric_limits<T>::max());
    }
    return A(0);
}

template <class A>
__device__ bool is_nan(A v) {
    if constexpr (std::is_floating_point_v<A>)
        return isnan(v);
    else
        return false;
}

// max and min propagate NaN, as the reference's do.
template <reduce_kind K, class A>
__device__ A combine(A acc, A x) {
    if constexpr (K == reduce_kind::sum || K == reduce_kind::mean) return acc + x;
    if constexpr (K == reduce_kind::prod) return acc * x;
    if constexpr (K == reduce_kind::max) return is_nan(acc) ? acc : (is_nan(x) || x > acc ? x : acc);
    if constexpr (K == reduce_kind::min) return is_nan(acc) ? acc : (is_nan(x) || x < acc ? x : acc);
    return acc;
}

template <reduce_kind K, class A>
__device__ A finish(A acc, std::size_t count) {
    if constexpr (K == reduce_kind::mean) {
        if constexpr (std::is_floating_point_v<A>)
            return acc / static_cast<A>(count);  // 0 / 0 is NaN, as the reference's
        else
            return count == 0 ? A(0) : acc / static_cast<A>(count);
    }
    return acc;
}

template <class T, reduce_kind K>
__global__ void reduce_kernel(const T* x, T* y, reduce_params p, int group) {
    using A = accumulator_t<T>;
    __shared__ A shared[block_threads];
    const std::size_t per_block = static_cast<std::size_t>(block_threads / group);
    const std::size_t lane = threadIdx.x % static_cast<unsigned>(group);
    // `first` is the same for every thread of the block, so all reach group_reduce.
    for (std::size_t first = blockIdx.x * per_block; first < p.outputs; first += gridDim.x * per_block) {
        const std::size_t o = first + threadIdx.x / static_cast<unsigned>(group);
        A acc = initial_value<K, T, A>();
        if (o < p.outputs) {
            const std::size_t base = offset_of(p.kept, o);
            for (std::size_t r = lane; r < p.count; r += static_cast<std::size_t>(group))
                acc = combine<K>(acc, load_accumulator<A>(x[base + offset_of(p.reduced, r)]));
        }
        acc = group_reduce(acc, shared, group, [](A a, A b) { return combine<K>(a, b); });
        if (o < p.outputs && lane == 0) y[o] = store_result<T>(finish<K>(acc, p.count));
    }
}

template <class T, reduce_kind K>
void launch_typed(const void* x, void* y, const reduce_params& p, cudaStream_t stream) {
    const int group = group_for(p.count);
    const unsigned grid = grid_for(p.outputs, static_cast<std::size_t>(block_threads / group));
    reduce_kernel<T, K><<<grid, block_threads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), p, group);
    KILN_CUDA(cudaGetLastError());
}

template <class T>
void launch_kind(reduce_kind kind, const void* x, void* y, const reduce_params& p, cudaStream_t stream) {
    switch (kind) {
        case reduce_kind::sum: return launch_typed<T, reduce_kind::sum>(x, y, p, stream);
        case reduce_kind::mean: return launch_typed<T, reduce_kind::mean>(x, y, p, stream);
        case reduce_kind::max: return launch_typed<T, reduce_kind::max>(x, y, p, stream);
        case reduce_kind::min: return launch_typed<T, reduce_kind::min>(x, y, p, stream);
        case reduce_kind::prod: return launch_typed<T, reduce_kind::prod>(x, y, p, stream);
    }
}

// The arithmetic type argmax / argmin compare in: float for the 16-bit floats, the type itself otherwise.
template <class T>
using compare_t = std::conditional_t<std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>, float, T>;

template <class C, class T>
__device__ C load_compare(T v) {
    if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>)
        return to_float(v);
    else
        return v;
}

// One thread per output: a plain scan along the axis, as the reference's.
template <class T>
__global__ void arg_reduce_kernel(const T* x, std::int64_t* y, arg_reduce_params p) {
    using C = compare_t<T>;
    for (std::size_t o = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; o < p.outputs;
         o += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const T* row = x + offset_of(p.kept, o);
        C best = load_compare<C>(row[0]);
        std::size_t best_k = 0;
        for (std::size_t k = 1; k < p.length; ++k) {
            const C v = load_compare<C>(row[k * p.step]);
            bool better;
            if (is_nan(v))
                better = !is_nan(best) || p.select_last;
            else if (is_nan(best))
                better = false;
            else if (v == best)
                better = p.select_last;
            else
                better = p.want_max ? best < v : v < best;
            if (better) {
                best = v;
                best_k = k;
            }
        }
        y[o] = static_cast<std::int64_t>(best_k);
    }
}

template <class T>
void launch_arg_typed(const void* x, std::int64_t* y, const arg_reduce_params& p, cudaStream_t stream) {
    const unsigned grid = grid_for(p.outputs, block_threads);
    arg_reduce_kernel<T><<<grid, block_threads, 0, stream>>>(static_cast<const T*>(x), y, p);
    KILN_CUDA(cudaGetLastError());
}

}  // namespace

void launch_arg_reduce(element_type type, const void* x, std::int64_t* y, const arg_reduce_params& p,
                       cudaStream_t stream) {
    if (p.outputs == 0 || p.length == 0) return;
    switch (type) {
        case element_type::f32: return launch_arg_typed<float>(x, y, p, stream);
        case element_type::f16: return launch_arg_typed<__half>(x, y, p, stream);
        case element_type::bf16: return launch_arg_typed<__nv_bfloat16>(x, y, p, stream);
        case element_type::f64: return launch_arg_typed<double>(x, y, p, stream);
        case element_type::i8: return launch_arg_typed<std::int8_t>(x, y, p, stream);
        case element_type::i16: return launch_arg_typed<std::int16_t>(x, y, p, stream);
        case element_type::i32: return launch_arg_typed<std::int32_t>(x, y, p, stream);
        case element_type::i64: return launch_arg_typed<std::int64_t>(x, y, p, stream);
        case element_type::u8: return launch_arg_typed<std::uint8_t>(x, y, p, stream);
        case element_type::u16: return launch_arg_typed<std::uint16_t>(x, y, p, stream);
        case element_type::u32: return launch_arg_typed<std::uint32_t>(x, y, p, stream);
        case element_type::u64: return launch_arg_typed<std::uint64_t>(x, y, p, stream);
    }
}

void launch_reduce(element_type type, reduce_kind kind, const void* x, void* y, const reduce_params& p,
                   cudaStream_t stream) {
    if (p.outputs == 0) return;
    switch (type) {
        case element_type::f32: return launch_kind<float>(kind, x, y, p, stream);
        case element_type::f16: return launch_kind<__half>(kind, x, y, p, stream);
        case element_type::bf16: return launch_kind<__nv_bfloat16>(kind, x, y, p, stream);
        case element_type::f64: return launch_kind<double>(kind, x, y, p, stream);
        case element_type::i8: return launch_kind<std::int8_t>(kind, x, y, p, stream);
        case element_type::i16: return launch_kind<std::int16_t>(kind, x, y, p, stream);
        case element_type::i32: return launch_kind<std::int32_t>(kind, x, y, p, stream);
        case element_type::i64: return launch_kind<std::int64_t>(kind, x, y, p, stream);
        case element_type::u8: return launch_kind<std::uint8_t>(kind, x, y, p, stream);
        case element_type::u16: return launch_kind<std::uint16_t>(kind, x, y, p, stream);
        case element_type::u32: return launch_kind<std::uint32_t>(kind, x, y, p, stream);
        case element_type::u64: return launch_kind<std::uint64_t>(kind, x, y, p, stream);
    }
}

}  // namespace kiln::cuda_reduce
