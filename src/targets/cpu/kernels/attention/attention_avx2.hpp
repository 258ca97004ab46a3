#pragma once
// The AVX2 side of the attention kernel (attention_avx2.cpp).
// Plain data and function pointers only: see cpu_features.hpp for why.
#include <cstddef>
#include <cstdint>

namespace kiln::avx2 {

// softmax(scale * q @ kt + mask) @ v for each batch entry, in tiles of
// `tile_rows` query rows: the tile's scores stay in a per-thread buffer from
// the first product to the second. Operands are addressed by element
// offsets per batch entry and (row, column) strides; kt and v are packed
// per thread, q and the mask gathered per tile when their columns are not
// contiguous; the result's rows lie at out_row_stride from each other (its
// columns contiguous). With `item_columns`,
// work item (batch entry, tile) computes only its first item_columns[item]
// key columns: the others are masked out for every row of the tile (a
// causal mask), so their probabilities are exactly zero. With
// `skip_masked_tails` (a mask given at run time) each work item finds those
// columns itself, from the mask's trailing entries at or below
// attention_masked_out: a decode step over a static cache of L_max keys
// reads, packs and exponentiates only the pos + 1 that its mask leaves.

// A mask entry at or below this removes its key column: added to any score
// below 1e29 in magnitude and exponentiated, it gives exactly zero.
// Exporters use -inf or float32's lowest value (-3.4e38); masks of -1e4 or
// -1e9 are left to the softmax.
constexpr float attention_masked_out = -1e30f;

struct attention_plan {
    std::size_t batches = 0;
    std::size_t sq = 0, sk = 0, d = 0, dv = 0;
    const std::size_t* q_offsets = nullptr;  // `batches` entries each
    const std::size_t* kt_offsets = nullptr;
    const std::size_t* v_offsets = nullptr;
    const std::size_t* mask_offsets = nullptr;
    const std::size_t* out_offsets = nullptr;
    std::size_t q_strides[2] = {};     // over (Sq, D)
    std::size_t kt_strides[2] = {};    // over (D, Sk)
    std::size_t v_strides[2] = {};     // over (Sk, Dv)
    std::size_t mask_strides[2] = {};  // over (Sq, Sk)
    std::size_t out_row_stride = 0;    // over Sq; the result's columns are contiguous
    bool has_mask = false;
    bool nan_to_zero = false;
    bool masked_rows_to_zero = false;
    float scale = 1;
    std::size_t tile_rows = 48;
    const std::size_t* item_columns = nullptr;  // batches * tiles entries, or null: all sk
    bool skip_masked_tails = false;             // (only without item_columns)
    int threads = 1;
    bool parallel = false;
};

std::size_t attention_scratch_bytes(const attention_plan& p);

// Shared with the AVX-512 kernel (attention_avx512.cpp), which packs its
// right-hand matrices the same way: b [k x n] (element strides over its
// rows and columns) as panels of 16 columns, each k x 16 floats in a row,
// zeros past column n, into 64-byte aligned dst.
void pack_attention_panels(const float* b, const std::size_t* strides, std::size_t k, std::size_t n, float* dst);
// The key columns that (batch entry b, rows [row0, row0 + rows)) of a
// run-time mask need (see skip_masked_tails).
std::size_t attention_unmasked_columns(const attention_plan& p, const float* mask, std::size_t b, std::size_t row0,
                                       std::size_t rows);
void run_attention(const attention_plan& p, const float* q, const float* kt, const float* v, const float* mask,
                   float* out, std::byte* scratch);

}  // namespace kiln::avx2
