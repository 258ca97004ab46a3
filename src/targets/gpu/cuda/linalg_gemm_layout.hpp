#pragma once
// How a numpy.matmul (`dot`) over strided operands maps onto column-major
// strided-batched GEMM calls: the matrix sizes, whether each operand is read
// transposed and with which leading dimension, and the batch split into one
// strided batch (one library call) inside plain loops over the remaining
// batch dimensions. Host-only planning: no CUDA types here.
#include <cstddef>
#include <optional>
#include <vector>

#include "kiln/shape.hpp"

namespace kiln {

// One row-major matrix operand as a BLAS library reads it.
struct gemm_operand_layout {
    // False: element (r, c) at r * ld + c (row-major). True: at r + c * ld
    // (the storage is column-major, i.e. a transposed view).
    bool column_major = false;
    std::size_t ld = 1;
};

// A batch dimension: its length and each operand's element stride along it
// (0 where a or b is broadcast).
struct gemm_batch_dim {
    std::size_t len = 1;
    std::size_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// Element offsets of a, b and c at one outer batch index.
struct gemm_offsets {
    std::size_t a = 0, b = 0, c = 0;
};

struct gemm_layout {
    std::size_t m = 0, n = 0, k = 0;
    gemm_operand_layout a, b;  // c is always standard: row-major, ld = n
    // The batch of one library call (len 1 when there is no batch).
    gemm_batch_dim inner;
    // Batch dimensions looped over on the host, outermost first.
    std::vector<gemm_batch_dim> outer;
    std::size_t outer_count() const;
    // The offsets at outer call `call` (< outer_count()), the innermost outer
    // dimension varying fastest.
    gemm_offsets outer_offsets(std::size_t call) const;
};

// The layout of dot(a, b) -> out, or nothing when an operand's matrix strides
// are neither row- nor column-major (the plan then packs it), when a size
// does not fit the library's int arguments, or when the batch needs too many
// separate calls.
std::optional<gemm_layout> plan_gemm_layout(const shape& a, const shape& b, const shape& out);

}  // namespace kiln
