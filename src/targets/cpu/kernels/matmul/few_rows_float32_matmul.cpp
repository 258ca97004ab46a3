// few_rows_float32_avx512 / _avx2: up to eight (AVX2: four) float32 rows times constant
// row-major float32 weights [K, N] (a decoder's projections at one token
// per step, or a batch of them), with an optional bias and post-op chain. Such a product is
// bound by reading the weights; oneDNN (2.x) runs it as a gemm of one row,
// below the memory's speed, and a binary post-op sends it to its reference
// implementation. Here each thread streams a contiguous slice of the weight
// rows once (rows_times_float.hpp) into a partial result of its own; after
// one barrier the threads sum the partials over their share of the columns
// and apply the bias and chain there. A product with too few weight rows to
// split splits its columns instead.
#include <omp.h>

#include <algorithm>

#include "ops/fused_dot.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/follows_run_time_extents.hpp"
#include "targets/cpu/kernels/matmul/few_rows_epilogue.hpp"
#include "targets/cpu/kernels/matmul/matmul_algorithms.hpp"
#include "targets/cpu/kernels/matmul/rows_times_float.hpp"
#include "targets/cpu/kernels/matmul/weight_row_split.hpp"

namespace kiln {

namespace {

using multiply_function = void (*)(const rows_times_float_args&);

// Result columns a block: the rows' block (16 KiB) stays in L1 while the
// weight rows stream past it.
std::size_t l1_block_columns(std::size_t rows) {
    return 4096 / rows;
}

class few_rows_float32_kernel final : public cpu_kernel, public follows_run_time_extents {
public:
    few_rows_float32_kernel(std::size_t rows, std::size_t inner, std::size_t cols, few_rows_epilogue epilogue,
                            multiply_function multiply, int threads, std::size_t result_rank)
        : result_rank_(result_rank),
          rows_(rows),
          inner_(inner),
          cols_(cols),
          epilogue_(std::move(epilogue)),
          multiply_(multiply),
          threads_(threads),
          split_inner_(threads > 1 && inner >= min_weight_rows_per_thread * static_cast<std::size_t>(threads)) {}

    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        const auto* a = inputs[0].data_as<float>();
        const auto* b = inputs[1].data_as<float>();
        float* y = result.data_as<float>();
        // The rows of this run: fewer than built for at a smaller run-time extent.
        const std::size_t rows = inputs[0].get_shape().elements() / inner_;
        if (split_inner_)
            run_split_inner(inputs, a, b, y, reinterpret_cast<float*>(scratch), rows);
        else
            run_split_columns(inputs, a, b, y, rows);
    }
    // Every dimension of the result but the last counts rows.
    bool follows_extent_of(std::size_t dim) const override { return dim + 1 < result_rank_; }

    // The other threads' partial results.
    std::size_t scratch_bytes() const override {
        return split_inner_ ? static_cast<std::size_t>(threads_ - 1) * rows_ * cols_ * sizeof(float) : 0;
    }

private:
    // y[:, first:first+width] += a[:, k0:k1] . b[k0:k1, first:first+width], an L1 block at a time.
    void multiply_slab(const float* a, const float* b, std::size_t k0, std::size_t k1, float* y, std::size_t first,
                       std::size_t width, std::size_t rows) const {
        const std::size_t block = l1_block_columns(rows);
        for (std::size_t c = first; c < first + width; c += block)
            multiply_({a + k0, inner_, rows, k1 - k0, b + k0 * cols_ + c, cols_, std::min(block, first + width - c),
                       y + c, cols_});
    }

    void zero(float* y, std::size_t first, std::size_t width, std::size_t rows) const {
        for (std::size_t m = 0; m < rows; ++m) std::fill_n(y + m * cols_ + first, width, 0.0f);
    }

    void run_split_columns(const std::vector<argument>& inputs, const float* a, const float* b, float* y,
                           std::size_t rows) const {
        const std::size_t block = l1_block_columns(rows);
        const auto blocks = static_cast<std::int64_t>((cols_ + block - 1) / block);
        const int threads = blocks > 1 ? threads_ : 1;
#pragma omp parallel for schedule(dynamic) num_threads(threads)
        for (std::int64_t j = 0; j < blocks; ++j) {
            const std::size_t first = static_cast<std::size_t>(j) * block;
            const std::size_t width = std::min(block, cols_ - first);
            zero(y, first, width, rows);
            multiply_slab(a, b, 0, inner_, y, first, width, rows);
            epilogue_.apply(inputs, y, rows, cols_, first, width);
        }
    }

    // Each thread's slice of the weight rows is fixed by its number, and the
    // partials are summed in thread order: the result is the same on every
    // run (slices taken on demand would sum in a varying order).
    void run_split_inner(const std::vector<argument>& inputs, const float* a, const float* b, float* y,
                         float* partials, std::size_t rows) const {
        const std::size_t partial_floats = rows * cols_;
#pragma omp parallel num_threads(threads_)
        {
            const auto parts = static_cast<std::size_t>(omp_get_num_threads());
            const auto part = static_cast<std::size_t>(omp_get_thread_num());
            float* own = part == 0 ? y : partials + (part - 1) * partial_floats;
            zero(own, 0, cols_, rows);
            const auto [k0, k1] = share(inner_, parts, part, 4);
            multiply_slab(a, b, k0, k1, own, 0, cols_, rows);
#pragma omp barrier
            const auto [first, last] = share(cols_, parts, part, 16);
            add_partials(y, partials, parts, rows, cols_, first, last);
            if (!epilogue_.empty() && last > first) epilogue_.apply(inputs, y, rows, cols_, first, last - first);
        }
    }

    std::size_t result_rank_;
    std::size_t rows_, inner_, cols_;
    few_rows_epilogue epilogue_;
    multiply_function multiply_;
    int threads_;
    bool split_inner_;
};

// Up to `max_rows` standard float32 rows times constant standard [K, N] float32
// weights, a bias and post-op operands the epilogue reads.
bool fits(const kernel_request& r, std::size_t max_rows) {
    const auto* fused = r.op.get_if<op::fused_dot>();
    if (fused == nullptr || r.input_shapes.size() < 2) return false;
    const shape& a = r.input_shapes[0];
    const shape& b = r.input_shapes[1];
    if (a.type() != dtype::float_type || b.type() != dtype::float_type || !a.standard() || a.ndim() == 0 ||
        !r.output_shape.standard() || b.ndim() != 2 || !b.standard() || b.lens()[0] == 0 || b.lens()[1] == 0 ||
        a.lens().back() != b.lens()[0] || r.constant_inputs[1].empty())
        return false;
    if (fused->has_bias && (r.input_shapes[2].type() != dtype::float_type || !r.input_shapes[2].standard()))
        return false;
    const std::size_t rows = a.elements() / b.lens()[0];
    return rows >= 1 && rows <= max_rows && r.output_shape.elements() == rows * b.lens()[1] &&
           few_rows_operand_strides(*fused, r, b.lens()[1]).has_value();
}

std::shared_ptr<const cpu_kernel> build(const kernel_request& r, multiply_function multiply) {
    const shape& b = r.input_shapes[1];
    const std::size_t rows = r.input_shapes[0].elements() / b.lens()[0];
    const auto& fused = *r.op.get_if<op::fused_dot>();
    few_rows_epilogue epilogue(fused, *few_rows_operand_strides(fused, r, b.lens()[1]));
    return std::make_shared<few_rows_float32_kernel>(rows, b.lens()[0], b.lens()[1], std::move(epilogue), multiply,
                                                     r.threads, r.output_shape.ndim());
}

bool eligible_avx512(const kernel_request& r) {
    return avx512::enabled() && fits(r, avx512::rows_times_float_max_rows);
}
bool eligible_avx2(const kernel_request& r) {
    return avx2::supported() && fits(r, avx2::rows_times_float_max_rows);
}

std::shared_ptr<const cpu_kernel> build_avx512(const kernel_request& r, const kernel_builder&) {
    return build(r, avx512::rows_times_float);
}
std::shared_ptr<const cpu_kernel> build_avx2(const kernel_request& r, const kernel_builder&) {
    return build(r, avx2::rows_times_float);
}

}  // namespace

const kernel_algorithm few_rows_float32_avx512_matmul{"few_rows_float32_avx512", eligible_avx512, build_avx512};
const kernel_algorithm few_rows_float32_avx2_matmul{"few_rows_float32_avx2", eligible_avx2, build_avx2};

}  // namespace kiln
