// few_rows_16bit_avx2: up to four rows times constant row-major 16-bit
// weights [K, N] (a batch-1 product, one generated token), or int8 codes
// whose scales come as a mul post-op (quantize_int8_weights), with an optional
// bias and post-op chain (a decoder's residual add). Each thread takes blocks
// of columns; for each block it streams the weight rows' segments once,
// contiguously, widening and multiplying in registers, while the result
// block stays in L1, where the bias and post-ops are applied too. No
// float32 copy of the weights is ever written, so the product runs at the
// speed of reading 2 bytes a weight (1 for int8). Weights stored transposed ([N, K], a
// tied embedding as the output layer) are read a column at a time instead,
// each output a dot product over one contiguous column; float32 weights
// stored so run that loop too (few_rows_columns_avx2, in the float32 list),
// or its AVX-512 form (few_rows_columns_avx512: Llama's nn.Linear weights).
#include <omp.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "ops/fused_dot.hpp"
#include "targets/cpu/kernels/copy/widen_16bit_avx2.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/matmul/few_rows_epilogue.hpp"
#include "targets/cpu/kernels/matmul/weight_row_split.hpp"
#include "targets/cpu/kernels/narrow_weights/narrow_weights_algorithms.hpp"
#include "targets/cpu/kernels/narrow_weights/rows_times_16bit_avx2.hpp"
#include "targets/cpu/kernels/narrow_weights/rows_times_16bit_avx512.hpp"

namespace kiln {

namespace {

// Columns per block: the rows' result block (16 KiB) stays in L1, and each
// weight row's segment is as long as that allows (8 KiB for one row), so
// that the prefetchers stream it; at least two blocks per thread.
std::size_t block_columns(std::size_t rows, std::size_t cols, int threads) {
    const std::size_t l1_fit = 4096 / rows / 64 * 64;
    const std::size_t spread =
        (cols + 2 * static_cast<std::size_t>(threads) - 1) / (2 * static_cast<std::size_t>(threads));
    return std::max<std::size_t>(64, std::min(l1_fit, (spread + 63) / 64 * 64));
}

// Columns per block of transposed weights: a block reads its columns whole,
// so only the balance between threads matters (GPT-2's 50257 columns).
std::size_t transposed_block_columns(std::size_t cols, int threads) {
    const std::size_t blocks = 8 * static_cast<std::size_t>(threads);  // several per thread
    const std::size_t spread = (cols + blocks - 1) / blocks;
    return std::clamp<std::size_t>(spread, 16, 1024);
}

// The distance in elements between the rows of a (its last dimension
// contiguous, the others collapsing to one stride, as a slice of each
// sequence's last position is), or nullopt.
std::optional<std::size_t> row_stride(const shape& a) {
    const auto& lens = a.lens();
    const auto& strides = a.strides();
    if (lens.empty()) return std::nullopt;
    if (a.standard()) return lens.back();
    if (lens.back() > 1 && strides.back() != 1) return std::nullopt;
    std::optional<std::size_t> stride;  // of the innermost leading dimension longer than one
    std::size_t rows = 1;               // that the leading dimensions seen so far span
    for (std::size_t d = lens.size() - 1; d-- > 0;) {
        if (lens[d] == 1) continue;
        if (!stride) {
            stride = strides[d];
        } else if (strides[d] != *stride * rows) {
            return std::nullopt;
        }
        rows *= lens[d];
    }
    return stride.value_or(lens.back());
}

// The weights as one [K, N] matrix: 2-D, or broadcast over leading
// dimensions (a batched product's weights); else nullopt.
std::optional<shape> weight_matrix(const shape& b) {
    if (b.ndim() < 2) return std::nullopt;
    const std::size_t lead = b.ndim() - 2;
    for (std::size_t d = 0; d < lead; ++d)
        if (b.lens()[d] > 1 && b.strides()[d] != 0) return std::nullopt;
    return shape(b.type(), {b.lens()[lead], b.lens()[lead + 1]}, {b.strides()[lead], b.strides()[lead + 1]});
}

// Whether 2-D weights [K, N] are stored transposed: [N, K] row-major.
bool transposed_weights(const shape& b) {
    return !b.standard() && b.strides()[0] == 1 && b.strides()[1] == b.lens()[0];
}

using multiply_function = void (*)(const avx2::rows_times_16bit_args&);

multiply_function multiply_for(dtype stored, bool transposed) {
    if (stored == dtype::float_type) return avx2::rows_times_float_columns;  // transposed only (eligible_float32)
    if (stored == dtype::int8_type) return transposed ? avx2::rows_times_int8_columns : avx2::rows_times_int8;
    if (stored == dtype::half_type) return transposed ? avx2::rows_times_half_columns : avx2::rows_times_half;
    return transposed ? avx2::rows_times_bfloat16_columns : avx2::rows_times_bfloat16;
}

multiply_function avx512_multiply_for(dtype stored, bool transposed) {
    if (stored == dtype::int8_type) return transposed ? avx512::rows_times_int8_columns : avx512::rows_times_int8;
    if (stored == dtype::half_type) return transposed ? avx512::rows_times_half_columns : avx512::rows_times_half;
    return transposed ? avx512::rows_times_bfloat16_columns : avx512::rows_times_bfloat16;
}

class few_rows_kernel final : public cpu_kernel {
public:
    few_rows_kernel(std::size_t rows, std::size_t a_row_stride, std::size_t inner, std::size_t cols,
                    few_rows_epilogue epilogue, dtype stored, bool transposed, multiply_function multiply, int threads)
        : rows_(rows),
          a_row_stride_(a_row_stride),
          inner_(inner),
          cols_(cols),
          epilogue_(std::move(epilogue)),
          transposed_(transposed),
          block_(transposed ? transposed_block_columns(cols, threads) : block_columns(rows, cols, threads)),
          element_size_(shape{stored}.element_size()),
          multiply_(multiply),
          threads_(threads),
          split_inner_(!transposed && threads > 1 &&
                       inner >= min_weight_rows_per_thread * static_cast<std::size_t>(threads)) {}

    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        if (split_inner_) return run_split_inner(result, inputs, reinterpret_cast<float*>(scratch));
        const std::size_t blocks = (cols_ + block_ - 1) / block_;
        const int threads = blocks > 1 ? threads_ : 1;
        const auto* a = inputs[0].data_as<float>();
        const std::byte* b = inputs[1].data();
        float* y = result.data_as<float>();
#pragma omp parallel for schedule(static) num_threads(threads)
        for (std::int64_t j = 0; j < static_cast<std::int64_t>(blocks); ++j) {
            const std::size_t first = static_cast<std::size_t>(j) * block_;
            const std::size_t width = std::min(block_, cols_ - first);
            if (transposed_)
                multiply_({a, a_row_stride_, rows_, inner_, b + first * inner_ * element_size_, inner_, width,
                           y + first, cols_});
            else
                multiply_({a, a_row_stride_, rows_, inner_, b + first * element_size_, cols_, width, y + first, cols_});
            epilogue_.apply(inputs, y, rows_, cols_, first, width);
        }
    }
    // The other threads' partial results.
    std::size_t scratch_bytes() const override {
        return split_inner_ ? static_cast<std::size_t>(threads_ - 1) * rows_ * cols_ * sizeof(float) : 0;
    }

private:
    // Row-major weights with enough rows: each thread streams a contiguous
    // slice of the weight rows (whole rows, one run of memory) into a partial
    // result of its own, an L1 block of columns at a time; after one barrier
    // the threads sum the partials, in thread order (the same result on every
    // run), over their share of the columns and apply the epilogue there.
    // Split by columns instead, a 768-column product's threads read 384-byte
    // pieces of every row (GPT-2's fp16 MLP output: 18 GB/s, against 31-33 this way).
    void run_split_inner(const argument& result, const std::vector<argument>& inputs, float* partials) const {
        const auto* a = inputs[0].data_as<float>();
        const std::byte* b = inputs[1].data();
        float* y = result.data_as<float>();
        const std::size_t partial_floats = rows_ * cols_;
        const std::size_t l1_block = std::max<std::size_t>(64, 4096 / rows_);
#pragma omp parallel num_threads(threads_)
        {
            const auto parts = static_cast<std::size_t>(omp_get_num_threads());
            const auto part = static_cast<std::size_t>(omp_get_thread_num());
            float* own = part == 0 ? y : partials + (part - 1) * partial_floats;
            const auto [k0, k1] = share(inner_, parts, part, 4);
            for (std::size_t c = 0; c < cols_; c += l1_block) {
                const std::size_t width = std::min(l1_block, cols_ - c);
                if (k1 > k0)
                    multiply_({a + k0, a_row_stride_, rows_, k1 - k0, b + (k0 * cols_ + c) * element_size_, cols_,
                               width, own + c, cols_});
                else
                    for (std::size_t m = 0; m < rows_; ++m) std::fill_n(own + m * cols_ + c, width, 0.0f);
            }
#pragma omp barrier
            const auto [first, last] = share(cols_, parts, part, 16);
            add_partials(y, partials, parts, rows_, cols_, first, last);
            if (last > first) epilogue_.apply(inputs, y, rows_, cols_, first, last - first);
        }
    }

    std::size_t rows_, a_row_stride_, inner_, cols_;
    few_rows_epilogue epilogue_;
    bool transposed_;
    std::size_t block_;
    std::size_t element_size_;  // of the weights
    multiply_function multiply_;
    int threads_;
    bool split_inner_;
};

// The shapes this kernel runs: up to four float32 rows times 2-D weights
// (row-major or transposed), bias and post-op operands it can read.
bool fits(const kernel_request& r) {
    const auto* fused = r.op.get_if<op::fused_dot>();
    if (fused == nullptr || !avx2::supported()) return false;
    const shape& a = r.input_shapes[0];
    const auto matrix = weight_matrix(r.input_shapes[1]);
    if (!matrix) return false;
    const shape& b = *matrix;
    if (a.type() != dtype::float_type || !row_stride(a) || !r.output_shape.standard() ||
        !(b.standard() || transposed_weights(b)) || b.lens()[0] == 0 || a.lens().back() != b.lens()[0])
        return false;
    if (fused->has_bias && r.input_shapes[2].type() != dtype::float_type) return false;
    const std::size_t rows = a.elements() / b.lens()[0];
    return rows >= 1 && rows <= avx2::rows_times_16bit_max_rows && r.output_shape.elements() == rows * b.lens()[1] &&
           few_rows_operand_strides(*fused, r, b.lens()[1]).has_value();
}

bool eligible(const kernel_request& r) {
    if (!has_narrow_weights(r)) return false;
    if (r.input_shapes[1].type() == dtype::half_type && !avx2::f16c_supported()) return false;
    return fits(r);
}

// The same where AVX-512 loops are enabled (vcvtph2ps on 16 lanes is AVX-512 F).
bool eligible_avx512(const kernel_request& r) {
    return avx512::enabled() && has_narrow_weights(r) && fits(r);
}

// float32 weights stored transposed (a tied output layer), constant.
bool eligible_float32_columns(const kernel_request& r) {
    return r.input_shapes.size() > 1 && r.input_shapes[1].type() == dtype::float_type &&
           !r.constant_inputs[1].empty() && fits(r) && transposed_weights(*weight_matrix(r.input_shapes[1]));
}

// The same where AVX-512 loops are enabled (the CPU has them, KILN_CPU_ISA allows them).
bool eligible_float32_columns_avx512(const kernel_request& r) {
    return avx512::enabled() && eligible_float32_columns(r);
}

std::shared_ptr<const cpu_kernel> build_with(const kernel_request& r, multiply_function multiply) {
    const shape b = *weight_matrix(r.input_shapes[1]);
    const std::size_t rows = r.input_shapes[0].elements() / b.lens()[0];
    const auto& fused = *r.op.get_if<op::fused_dot>();
    few_rows_epilogue epilogue(fused, *few_rows_operand_strides(fused, r, b.lens()[1]));
    return std::make_shared<few_rows_kernel>(rows, *row_stride(r.input_shapes[0]), b.lens()[0], b.lens()[1],
                                             std::move(epilogue), b.type(), transposed_weights(b), multiply, r.threads);
}

std::shared_ptr<const cpu_kernel> build(const kernel_request& r, const kernel_builder&) {
    const shape b = *weight_matrix(r.input_shapes[1]);
    return build_with(r, multiply_for(b.type(), transposed_weights(b)));
}

std::shared_ptr<const cpu_kernel> build_avx512_columns(const kernel_request& r, const kernel_builder&) {
    return build_with(r, avx512::rows_times_float_columns);
}

std::shared_ptr<const cpu_kernel> build_avx512(const kernel_request& r, const kernel_builder&) {
    const shape b = *weight_matrix(r.input_shapes[1]);
    return build_with(r, avx512_multiply_for(b.type(), transposed_weights(b)));
}

}  // namespace

const kernel_algorithm few_rows_16bit_avx512_matmul{"few_rows_16bit_avx512", eligible_avx512, build_avx512};
const kernel_algorithm few_rows_16bit_matmul{"few_rows_16bit_avx2", eligible, build};
const kernel_algorithm few_rows_float32_columns_matmul{"few_rows_columns_avx2", eligible_float32_columns, build};
const kernel_algorithm few_rows_float32_columns_avx512_matmul{"few_rows_columns_avx512",
                                                              eligible_float32_columns_avx512, build_avx512_columns};

}  // namespace kiln
