#include "targets/gpu/cuda/linalg_gemm_layout.hpp"

#include <algorithm>
#include <climits>

#include "ops/linalg.hpp"

namespace kiln {

namespace {

// Most host-side loop iterations (separate library calls) one dot may take.
constexpr std::size_t max_outer_calls = 4096;

bool fits_int(std::size_t v) { return v <= static_cast<std::size_t>(INT_MAX); }

// Row-major when columns are adjacent, column-major when rows are; the stride
// of a dimension of length 1 is never read, so either reading works for it.
std::optional<gemm_operand_layout> operand_layout(const ops::matrices& m) {
    const std::size_t rows = m.rows, cols = m.cols;
    if ((cols <= 1 || m.col_stride == 1) && (rows <= 1 || m.row_stride >= std::max<std::size_t>(cols, 1))) {
        const std::size_t ld = rows <= 1 ? std::max<std::size_t>(cols, 1) : m.row_stride;
        if (fits_int(ld)) return gemm_operand_layout{false, ld};
    }
    if ((rows <= 1 || m.row_stride == 1) && (cols <= 1 || m.col_stride >= std::max<std::size_t>(rows, 1))) {
        const std::size_t ld = cols <= 1 ? std::max<std::size_t>(rows, 1) : m.col_stride;
        if (fits_int(ld)) return gemm_operand_layout{true, ld};
    }
    return std::nullopt;
}

// The operand's stride along each output batch dimension (0 where it broadcasts).
std::vector<std::size_t> batch_strides(const shape& s, const std::vector<std::size_t>& batch_lens) {
    std::vector<std::size_t> strides(batch_lens.size(), 0);
    const std::size_t own = s.ndim() >= 2 ? s.ndim() - 2 : 0;
    const std::size_t pad = batch_lens.size() - own;
    for (std::size_t i = 0; i < own; ++i)
        if (s.lens()[i] != 1) strides[pad + i] = s.strides()[i];
    return strides;
}

}  // namespace

std::size_t gemm_layout::outer_count() const {
    std::size_t count = 1;
    for (const auto& d : outer) count *= d.len;
    return count;
}

gemm_offsets gemm_layout::outer_offsets(std::size_t call) const {
    gemm_offsets at;
    for (std::size_t d = outer.size(); d-- > 0;) {
        const std::size_t index = call % outer[d].len;
        call /= outer[d].len;
        at.a += index * outer[d].stride_a;
        at.b += index * outer[d].stride_b;
        at.c += index * outer[d].stride_c;
    }
    return at;
}

std::optional<gemm_layout> plan_gemm_layout(const shape& a, const shape& b, const shape& out) {
    if (a.ndim() == 0 || b.ndim() == 0 || !out.standard()) return std::nullopt;
    const ops::matrices ma = ops::as_matrices(a, true);
    const ops::matrices mb = ops::as_matrices(b, false);
    if (ma.cols != mb.rows) return std::nullopt;

    gemm_layout g;
    g.m = ma.rows;
    g.n = mb.cols;
    g.k = ma.cols;
    if (!fits_int(g.m) || !fits_int(g.n) || !fits_int(g.k)) return std::nullopt;
    // With k = 0 the product is all zeros and no operand is read.
    if (g.k != 0) {
        auto la = operand_layout(ma);
        auto lb = operand_layout(mb);
        if (!la || !lb) return std::nullopt;
        g.a = *la;
        g.b = *lb;
    }

    // Output batch dimensions: the output's lens without its matrix dims.
    const std::size_t matrix_dims = (a.ndim() > 1 ? 1 : 0) + (b.ndim() > 1 ? 1 : 0);
    if (out.ndim() < matrix_dims) return std::nullopt;
    const std::vector<std::size_t> batch_lens(out.lens().begin(),
                                              out.lens().end() - static_cast<std::ptrdiff_t>(matrix_dims));
    const auto sa = batch_strides(a, batch_lens);
    const auto sb = batch_strides(b, batch_lens);
    // The output is standard: its batch stride is the product of what follows.
    std::vector<std::size_t> sc(batch_lens.size(), 0);
    std::size_t step = g.m * g.n;
    for (std::size_t i = batch_lens.size(); i-- > 0;) {
        sc[i] = step;
        step *= batch_lens[i];
    }

    // Drop length-1 dims, then merge each dim into the one inside it where
    // all three operands step evenly across the pair.
    std::vector<gemm_batch_dim> dims;
    for (std::size_t i = 0; i < batch_lens.size(); ++i) {
        if (batch_lens[i] == 1) continue;
        gemm_batch_dim d{batch_lens[i], sa[i], sb[i], sc[i]};
        if (!dims.empty()) {
            gemm_batch_dim& prev = dims.back();  // the outer neighbour
            if (prev.stride_a == d.stride_a * d.len && prev.stride_b == d.stride_b * d.len &&
                prev.stride_c == d.stride_c * d.len) {
                prev.len *= d.len;
                prev.stride_a = d.stride_a;
                prev.stride_b = d.stride_b;
                prev.stride_c = d.stride_c;
                continue;
            }
        }
        dims.push_back(d);
    }
    if (!dims.empty()) {
        g.inner = dims.back();
        dims.pop_back();
    }
    g.outer = std::move(dims);
    // Shared weights under a row-major batch whose matrices follow one another
    // ([B, M, K] x [K, N]): the batch is just more rows, one larger product.
    if (g.inner.len > 1 && g.inner.stride_b == 0 && !g.a.column_major && g.inner.stride_a == g.m * g.a.ld &&
        g.inner.stride_c == g.m * g.n && fits_int(g.m * g.inner.len)) {
        g.m *= g.inner.len;
        g.inner = gemm_batch_dim{};
    }
    if (!fits_int(g.inner.len) || g.outer_count() > max_outer_calls) return std::nullopt;
    return g;
}

}  // namespace kiln
