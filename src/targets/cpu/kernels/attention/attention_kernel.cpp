// The cpu kernel for fused_attention (attention_avx2.cpp, or
// attention_avx512.cpp where avx512::enabled()), float32: batch entries and
// the strides of every operand are worked out here, once. A causal op's
// mask is written into the scratch at each run, at the run's lengths, with
// the key columns each tile of query rows needs: the loops then take it as
// a constant mask's.
#include <algorithm>
#include <limits>

#include "ops/fused_attention.hpp"
#include "ops/op_helpers.hpp"
#include "targets/cpu/kernels/attention/attention_avx2.hpp"
#include "targets/cpu/kernels/attention/attention_avx512.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/cpu_kernels.hpp"
#include "targets/cpu/kernels/follows_run_time_extents.hpp"

namespace kiln {

namespace {

// Two products of (Sq x D x Sk) and (Sq x Sk x Dv) multiply-adds below
// which threads do not pay.
constexpr std::size_t parallel_flops = std::size_t{1} << 20;

// Tiles of query rows when a constant mask removes trailing key columns:
// small tiles skip more of a causal mask's upper triangle.
constexpr std::size_t causal_tile_rows = 16;

std::size_t cache_lines_for(std::size_t bytes) {
    constexpr std::size_t line = 64;
    return (bytes + line - 1) / line * line;
}

// The loops of one ISA over the plan.
struct attention_loops {
    std::size_t (*scratch_bytes)(const avx2::attention_plan&);
    void (*run)(const avx2::attention_plan&, const float*, const float*, const float*, const float*, float*,
                std::byte*);
};
constexpr attention_loops avx2_loops{avx2::attention_scratch_bytes, avx2::run_attention};
constexpr attention_loops avx512_loops{avx512::attention_scratch_bytes, avx512::run_attention};

class attention_kernel final : public cpu_kernel, public follows_run_time_extents {
public:
    attention_kernel(const op::fused_attention& a, const kernel_request& r, attention_loops loops) : loops_(loops) {
        const auto& in = r.input_shapes;
        const shape& out = r.output_shape;
        const std::size_t rank = out.ndim();
        outer_batch_ = rank > 2 ? out.lens()[0] : 0;
        rank_ = rank;
        mask_rank_ = a.has_mask ? in[3].ndim() : 0;
        const std::vector<std::size_t> batch_lens(out.lens().begin(), out.lens().end() - 2);
        std::vector<std::size_t> scores_lens = batch_lens;
        plan_.sq = out.lens()[rank - 2];
        plan_.dv = out.lens()[rank - 1];
        plan_.d = in[0].lens().back();
        plan_.sk = in[1].lens().back();
        scores_lens.push_back(plan_.sq);
        scores_lens.push_back(plan_.sk);
        plan_.batches = 1;
        for (auto l : batch_lens) plan_.batches *= l;

        // Each operand over [batch..., rows, cols] with broadcast batch strides.
        auto strides_over = [&](const shape& s, std::size_t rows, std::size_t cols) {
            std::vector<std::size_t> lens = batch_lens;
            lens.push_back(rows);
            lens.push_back(cols);
            return ops::broadcast_strides(s, lens);
        };
        const auto qs = strides_over(in[0], plan_.sq, plan_.d);
        const auto ks = strides_over(in[1], plan_.d, plan_.sk);
        const auto vs = strides_over(in[2], plan_.sk, plan_.dv);
        const auto ms = a.has_mask ? ops::broadcast_strides(in[3], scores_lens) : std::vector<std::size_t>(rank, 0);
        const auto& os = out.strides();
        for (std::size_t b = 0; b < plan_.batches; ++b) {
            std::size_t rest = b, q = 0, k = 0, v = 0, m = 0, o = 0;
            for (std::size_t d = batch_lens.size(); d-- > 0;) {
                const std::size_t i = rest % batch_lens[d];
                rest /= batch_lens[d];
                q += i * qs[d];
                k += i * ks[d];
                v += i * vs[d];
                m += i * ms[d];
                o += i * os[d];
            }
            q_offsets_.push_back(q);
            kt_offsets_.push_back(k);
            v_offsets_.push_back(v);
            mask_offsets_.push_back(m);
            out_offsets_.push_back(o);
        }
        plan_.q_offsets = q_offsets_.data();
        plan_.kt_offsets = kt_offsets_.data();
        plan_.v_offsets = v_offsets_.data();
        plan_.mask_offsets = mask_offsets_.data();
        plan_.out_offsets = out_offsets_.data();
        plan_.out_row_stride = os[rank - 2];
        auto last_two = [&](const std::vector<std::size_t>& s, std::size_t* dst) {
            dst[0] = s[s.size() - 2];
            dst[1] = s[s.size() - 1];
        };
        last_two(qs, plan_.q_strides);
        last_two(ks, plan_.kt_strides);
        last_two(vs, plan_.v_strides);
        last_two(ms, plan_.mask_strides);
        causal_ = a.causal;
        if (a.has_mask && r.constant_inputs.size() > 3 && !r.constant_inputs[3].empty())
            plan_columns(r.constant_inputs[3].data_as<const float>());
        else
            plan_.skip_masked_tails = a.has_mask;  // known only when it runs
        if (causal_) {
            plan_.tile_rows = causal_tile_rows;
            plan_.mask_strides[0] = plan_.sk;  // row-major in the scratch
            plan_.mask_strides[1] = 1;
        }
        plan_.has_mask = a.has_mask || causal_;
        plan_.nan_to_zero = a.nan_to_zero;
        plan_.masked_rows_to_zero = a.masked_rows_to_zero;
        plan_.scale = static_cast<float>(a.scale);
        plan_.threads = r.threads;
        plan_.parallel = plan_.batches * plan_.sq * plan_.sk * (plan_.d + plan_.dv) >= parallel_flops;
    }
    attention_kernel(const attention_kernel&) = delete;
    attention_kernel& operator=(const attention_kernel&) = delete;

    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        const float* mask = plan_.has_mask && !causal_ ? inputs[3].data_as<const float>() : nullptr;
        const auto& out_lens = result.get_shape().lens();
        const std::size_t outer = outer_batch_ > 0 ? out_lens[0] : 0;
        const std::size_t sq = out_lens[out_lens.size() - 2];
        const std::size_t sk = inputs[1].get_shape().lens().back();
        avx2::attention_plan at = plan_;
        if (outer != outer_batch_ || sq != plan_.sq || sk != plan_.sk) {
            // A shorter outermost batch dimension, or fewer query rows or keys
            // (run-time extents): the batch entries come first, at the offsets
            // worked out for the full one; rows and keys at the strides built.
            if (outer_batch_ > 0) at.batches = plan_.batches / outer_batch_ * outer;
            at.sq = sq;
            at.sk = sk;
            at.parallel = at.batches * sq * sk * (plan_.d + plan_.dv) >= parallel_flops;
        }
        if (causal_) {
            mask = write_causal_mask(at, scratch);
            scratch += causal_scratch_bytes();
        }
        loops_.run(at, inputs[0].data_as<const float>(), inputs[1].data_as<const float>(),
                   inputs[2].data_as<const float>(), mask, result.data_as<float>(), scratch);
    }
    std::size_t scratch_bytes() const override { return causal_scratch_bytes() + loops_.scratch_bytes(plan_); }
    bool follows_extent_of(std::size_t dim) const override { return dim == 0 && outer_batch_ > 0; }
    // A sequence: the query rows of q, the result and the mask, the keys of
    // kt, v and the mask, either or both (their batch entries as built).
    // Not with a constant mask, whose columns were planned at full length.
    bool follows_extents_in(const std::optional<std::size_t>& out,
                            const std::vector<std::optional<std::size_t>>& ins) const override {
        if (!item_columns_.empty() || ins.size() < 3) return false;
        auto is = [](const std::optional<std::size_t>& v, std::size_t dim) { return !v || *v == dim; };
        const bool rows = out.has_value();
        if (!is(out, rank_ - 2) || ins[0].has_value() != rows || !is(ins[0], rank_ - 2)) return false;
        const bool keys = ins[1].has_value();
        if (!is(ins[1], rank_ - 1) || ins[2].has_value() != keys || !is(ins[2], rank_ - 2)) return false;
        if (ins.size() > 3 && ins[3]) {
            if (*ins[3] + 1 == mask_rank_) return keys;
            if (*ins[3] + 2 == mask_rank_) return rows;
            return false;
        }
        return true;
    }

private:
    // The causal mask [sq, sk] (row-major, every batch entry reads it) and
    // the key columns of each work item, for the largest plan.
    std::size_t causal_scratch_bytes() const {
        if (!causal_) return 0;
        const std::size_t tiles = (plan_.sq + causal_tile_rows - 1) / causal_tile_rows;
        return cache_lines_for(plan_.sq * plan_.sk * sizeof(float)) +
               cache_lines_for(plan_.batches * tiles * sizeof(std::size_t));
    }
    // Writes the causal mask of `at`'s lengths at `scratch` and points `at`
    // at it: row i keeps the columns up to i + sk - sq (sk >= sq, as the op
    // requires), and a tile of rows the columns its last row keeps.
    const float* write_causal_mask(avx2::attention_plan& at, std::byte* scratch) const {
        const std::size_t sq = at.sq, sk = at.sk;
        auto* mask = reinterpret_cast<float*>(scratch);
        for (std::size_t i = 0; i < sq; ++i) {
            const std::size_t seen = i + sk - sq + 1;
            std::fill(mask + i * sk, mask + i * sk + seen, 0.0f);
            std::fill(mask + i * sk + seen, mask + (i + 1) * sk, -std::numeric_limits<float>::infinity());
        }
        auto* columns = reinterpret_cast<std::size_t*>(scratch + cache_lines_for(plan_.sq * plan_.sk * sizeof(float)));
        const std::size_t tiles = (sq + causal_tile_rows - 1) / causal_tile_rows;
        for (std::size_t t = 0; t < tiles; ++t) columns[t] = std::min(sk, (t + 1) * causal_tile_rows + sk - sq);
        for (std::size_t b = 1; b < at.batches; ++b) std::copy(columns, columns + tiles, columns + b * tiles);
        at.mask_strides[0] = sk;
        at.mask_strides[1] = 1;
        at.item_columns = columns;
        at.skip_masked_tails = false;
        return mask;
    }

    // With a constant mask, the key columns each (batch entry, tile) needs:
    // up to the last column some row of the tile does not mask out. A tile
    // with a row masked out entirely keeps all columns, so that row's
    // softmax (uniform, or NaN before the guard) is what it was.
    void plan_columns(const float* mask) {
        const std::size_t tiles = (plan_.sq + causal_tile_rows - 1) / causal_tile_rows;
        std::vector<std::size_t> columns(plan_.batches * tiles);
        bool skips = false;
        for (std::size_t b = 0; b < plan_.batches; ++b) {
            for (std::size_t t = 0; t < tiles; ++t) {
                std::size_t needed = 0;
                for (std::size_t row = t * causal_tile_rows; row < std::min(plan_.sq, (t + 1) * causal_tile_rows); ++row) {
                    const float* m = mask + mask_offsets_[b] + row * plan_.mask_strides[0];
                    std::size_t end = plan_.sk;
                    while (end > 0 && m[(end - 1) * plan_.mask_strides[1]] <= avx2::attention_masked_out) --end;
                    needed = std::max(needed, end == 0 ? plan_.sk : end);
                }
                columns[b * tiles + t] = needed;
                skips = skips || needed < plan_.sk;
            }
        }
        if (!skips) return;
        item_columns_ = std::move(columns);
        plan_.tile_rows = causal_tile_rows;
        plan_.item_columns = item_columns_.data();
    }

    attention_loops loops_;
    avx2::attention_plan plan_;
    std::size_t outer_batch_ = 0;  // the result's dimension 0 as built, when it is a batch dimension (else 0)
    std::size_t rank_ = 0;         // of the result
    std::size_t mask_rank_ = 0;    // of the mask, when there is one
    bool causal_ = false;          // the mask is written at each run (write_causal_mask)
    std::vector<std::size_t> q_offsets_, kt_offsets_, v_offsets_, mask_offsets_, out_offsets_, item_columns_;
};

std::shared_ptr<const cpu_kernel> attention_kernel_with(const kernel_request& r, attention_loops loops) {
    const auto* a = r.op.get_if<op::fused_attention>();
    if (a == nullptr || !avx2::supported() || r.output_shape.elements() == 0) return nullptr;
    if (a->causal && a->has_mask) return nullptr;  // one mask is read or written, not both
    for (const auto& s : r.input_shapes)
        if (s.type() != dtype::float_type || s.elements() == 0) return nullptr;
    // q, kt and v take part in the batch broadcast with at least their two matrix dimensions.
    for (std::size_t i = 0; i < 3; ++i)
        if (r.input_shapes[i].ndim() < 2 || r.input_shapes[i].ndim() > r.output_shape.ndim()) return nullptr;
    // The result's rows are written whole (output_order keeps its last dim innermost).
    if (r.output_shape.ndim() < 2 || r.output_shape.strides().back() != 1) return nullptr;
    return std::make_shared<attention_kernel>(*a, r, loops);
}

}  // namespace

std::shared_ptr<const cpu_kernel> make_attention_kernel(const kernel_request& r) {
    return attention_kernel_with(r, avx2_loops);
}
std::shared_ptr<const cpu_kernel> make_attention_avx512_kernel(const kernel_request& r) {
    return avx512::enabled() ? attention_kernel_with(r, avx512_loops) : nullptr;
}

}  // namespace kiln
