// Matrix products through oneDNN's matmul: numpy.matmul semantics (1-D
// operands, broadcast batch dimensions, any strides), constant weights
// reordered once, bias and post-ops applied by the same primitive. A product
// with 2-D constant weights runs as one large [rows, K] x [K, N] product.
// The same code computes in bfloat16 for constant bfloat16 weights.
#include <numeric>
#include <string>

#include "ops/fused_dot.hpp"
#include "ops/linalg.hpp"
#include "ops/op_helpers.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/dnnl_support.hpp"
#include "targets/cpu/kernels/gelu_arrays.hpp"
#include "targets/cpu/kernels/matmul/matmul_algorithms.hpp"
#include "targets/cpu/kernels/narrow_weights/narrow_weights_algorithms.hpp"
#include "targets/cpu/kernels/pointwise/pointwise_avx2.hpp"

namespace kiln {

namespace {

namespace ds = dnnl_support;
using dims = dnnl::memory::dims;

// An operand as oneDNN matmul sees it: lens and strides of rank `rank`.
struct strided {
    std::vector<std::size_t> lens;
    std::vector<std::size_t> strides;
};

// 1-D operands become matrices, then leading unit dimensions equalize ranks.
strided promote(const shape& s, bool left, std::size_t rank) {
    strided out{s.lens(), s.strides()};
    if (s.ndim() == 1) {
        auto pos = left ? out.lens.begin() : out.lens.end();
        auto spos = left ? out.strides.begin() : out.strides.end();
        out.lens.insert(pos, 1);
        out.strides.insert(spos, 0);
    }
    while (out.lens.size() < rank) {
        out.lens.insert(out.lens.begin(), 1);
        out.strides.insert(out.strides.begin(), 0);
    }
    return out;
}

std::vector<std::size_t> standard_strides(const std::vector<std::size_t>& lens) {
    std::vector<std::size_t> s(lens.size(), 1);
    for (std::size_t i = lens.size(); i-- > 1;) s[i - 1] = s[i] * lens[i];
    return s;
}

// Leading dimensions [0, rank-1) of a tensor folded into one row dimension,
// when its strides allow it.
std::optional<strided> fold_rows(const strided& t) {
    const std::size_t r = t.lens.size();
    std::size_t rows = 1;
    for (std::size_t i = 0; i + 1 < r; ++i) rows *= t.lens[i];
    std::size_t row_stride = 0;
    bool all_zero = true;
    for (std::size_t i = 0; i + 1 < r; ++i) all_zero = all_zero && (t.strides[i] == 0 || t.lens[i] == 1);
    if (!all_zero) {
        // The innermost leading dimension longer than one gives the stride
        // (one of length one, as a slice of each sequence's last position
        // leaves, has none that matters); the outer ones must continue it.
        std::optional<std::size_t> expected;
        for (std::size_t i = r - 1; i-- > 0;) {
            if (t.lens[i] == 1) continue;
            if (!expected) {
                row_stride = t.strides[i];
                expected = row_stride;
            }
            if (t.strides[i] != *expected) return std::nullopt;
            *expected *= t.lens[i];
        }
    }
    return strided{{rows, t.lens[r - 1]}, {row_stride, t.strides[r - 1]}};
}

dnnl::memory::desc desc_of(const strided& t, dnnl::memory::data_type type = dnnl::memory::data_type::f32) {
    return ds::strided_desc(t.lens, t.strides, type);
}

// Row strides of constant [K, N] weights for the plain gemm, which packs
// panels of K rows from them on every run: rows a multiple of 512 bytes
// apart map the panel onto a few cache sets (BERT's 768 x 3072 layer ran at
// 80 GFLOP/s, 150 with rows 64 bytes longer at two threads; 3072 x 768: 160
// -> 180). Such weights are copied with their rows padded by one cache line.
std::optional<std::vector<std::size_t>> padded_rows(const strided& b) {
    constexpr std::size_t conflict_bytes = 512, pad_floats = 16;
    if (b.lens.size() != 2 || b.lens[0] < 2 || b.strides[1] != 1 || b.strides[0] != b.lens[1]) return std::nullopt;
    if ((b.lens[1] * sizeof(float)) % conflict_bytes != 0) return std::nullopt;
    return std::vector<std::size_t>{b.lens[1] + pad_floats, 1};
}

// A GELU ending the post-op chain runs after the product as Kiln's loop over
// the result (gelu_arrays.hpp: AVX-512 where enabled, else AVX2).
// Tanh form: oneDNN's gemm applies eltwise_gelu_tanh at about 1 ms per
// 128 x 3072 result at two threads (GPT-2), a third of the product's time.
// Erf form: see onednn_gelu_erf_epilogue below for where it runs.
class gelu_epilogue_kernel final : public cpu_kernel {
public:
    gelu_epilogue_kernel(std::shared_ptr<const cpu_kernel> product, float_array_function gelu, int threads)
        : product_(std::move(product)), gelu_(gelu), threads_(threads) {}

    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        product_->run(result, inputs, scratch);
        auto* y = reinterpret_cast<float*>(result.data());
        const std::size_t n = result.get_shape().elements();
        constexpr std::size_t chunk = 4096;  // floats; a multiple of the vector width
        const auto chunks = static_cast<std::int64_t>((n + chunk - 1) / chunk);
        const int threads = chunks > 1 ? threads_ : 1;
#pragma omp parallel for schedule(static) num_threads(threads)
        for (std::int64_t c = 0; c < chunks; ++c) {
            const std::size_t begin = static_cast<std::size_t>(c) * chunk;
            const std::size_t count = std::min(chunk, n - begin);
            gelu_(y + begin, y + begin, count);
        }
    }
    std::size_t scratch_bytes() const override { return product_->scratch_bytes(); }
    bool keeps_own_copy(std::size_t index) const override { return product_->keeps_own_copy(index); }
    void restore_constant(std::size_t index, const argument& into) const override {
        product_->restore_constant(index, into);
    }
    std::size_t own_copy_bytes() const override { return product_->own_copy_bytes(); }
    std::shared_ptr<const packed_constant> packed_copy(std::size_t index) const override {
        return product_->packed_copy(index);
    }
    std::size_t adopted_bytes() const override { return product_->adopted_bytes(); }

private:
    std::shared_ptr<const cpu_kernel> product_;
    float_array_function gelu_;
    int threads_;
};

// `compute`: f32, or bf16 for constant bfloat16 weights, the float32 source
// then rounded to bfloat16 in scratch before the product.
std::shared_ptr<const cpu_kernel> build(const op::fused_dot& fused, const kernel_request& r,
                                        dnnl::memory::data_type compute = dnnl::memory::data_type::f32) {
    const shape& sa = r.input_shapes[0];
    const shape& sb = r.input_shapes[1];
    if (sa.type() != dtype::float_type || r.output_shape.elements() == 0) return nullptr;
    const bool in_bf16 = compute == dnnl::memory::data_type::bf16;
    if (in_bf16 && (sb.type() != dtype::bf16_type || !r.is_constant(1))) return nullptr;
    // An empty inner dimension (a sum of nothing: zeros) makes oneDNN (2.6.3,
    // Debian's) divide by zero while it picks an implementation: SIGFPE.
    if (sa.elements() == 0 || sb.elements() == 0) return nullptr;
    // A matrix-vector product's bias runs along the rows oneDNN sees as [M, 1].
    if (fused.has_bias && sb.ndim() == 1) return nullptr;
    const std::size_t rank = std::max<std::size_t>({sa.ndim(), sb.ndim(), 2});
    strided a = promote(sa, true, rank);
    strided b = promote(sb, false, rank);
    for (std::size_t i = 0; i + 2 < rank; ++i)
        if (a.lens[i] == 1 && b.lens[i] != 1) return nullptr;  // oneDNN broadcasts weights' batch, not the source's
    std::vector<std::size_t> out_lens(a.lens.begin(), a.lens.end() - 1);
    out_lens.push_back(b.lens.back());
    strided dst{out_lens, standard_strides(out_lens)};

    std::vector<strided> operands;
    for (std::size_t i = fused.first_post_operand(); i < r.input_shapes.size(); ++i) {
        if (r.output_shape.ndim() != out_lens.size()) return nullptr;  // a 1-D product with post-op operands
        operands.push_back({out_lens, ops::broadcast_strides(r.input_shapes[i], out_lens)});
    }
    strided bias{std::vector<std::size_t>(rank, 1), std::vector<std::size_t>(rank, 0)};
    bias.lens.back() = out_lens.back();
    bias.strides.back() = 1;

    // Constant 2-D weights, or weights broadcast over the batch (a batched
    // product of one matrix, constant or widened per run): fold the source's
    // batch into rows, one big product.
    const bool constant_weights = r.is_constant(1);
    bool broadcast_batch = sb.ndim() > 2;
    for (std::size_t i = 0; i + 2 < sb.ndim(); ++i)
        if (sb.lens()[i] > 1 && sb.strides()[i] != 0) broadcast_batch = false;
    if (rank > 2 && ((constant_weights && sb.ndim() <= 2) || broadcast_batch)) {
        auto fa = fold_rows(a), fd = fold_rows(dst);
        std::vector<std::optional<strided>> fo;
        bool ok = fa && fd;
        for (const auto& o : operands) {
            fo.push_back(fold_rows(o));
            ok = ok && fo.back();
        }
        if (ok) {
            a = *fa;
            dst = *fd;
            b = {{b.lens[rank - 2], b.lens[rank - 1]}, {b.strides[rank - 2], b.strides[rank - 1]}};
            for (std::size_t i = 0; i < operands.size(); ++i) operands[i] = *fo[i];
            bias = {{1, bias.lens.back()}, {0, 1}};
        }
    }

    std::vector<dnnl::memory::desc> operand_descs;
    for (const auto& o : operands) operand_descs.push_back(desc_of(o));
    auto post_ops = ds::make_post_ops(fused.post, operand_descs);
    if (!post_ops) return nullptr;
    auto attr = ds::user_scratchpad_attr();
    attr.set_post_ops(*post_ops);

    try {
        // In bfloat16 the primitive reads the source staged row-major.
        auto src_desc = in_bf16 ? desc_of({a.lens, standard_strides(a.lens)}, compute) : desc_of(a);
        auto dst_desc = desc_of(dst);
        auto b_desc = desc_of(b, compute);
        auto weights_desc = b_desc;
        if (constant_weights) {
            dims wd;
            for (auto l : b.lens) wd.push_back(static_cast<dnnl::memory::dim>(l));
            weights_desc = dnnl::memory::desc(wd, compute, dnnl::memory::format_tag::any);
        }
        auto bias_desc = desc_of(bias);
        auto make_pd = [&](const dnnl::memory::desc& weights) {
            auto desc = fused.has_bias ? dnnl::matmul::desc(src_desc, weights, bias_desc, dst_desc)
                                       : dnnl::matmul::desc(src_desc, weights, dst_desc);
            return dnnl::matmul::primitive_desc(desc, attr, ds::cpu_engine());
        };
        dnnl::matmul::primitive_desc pd = make_pd(weights_desc);
        // Constant weights that the chosen implementation reads as they are
        // (a plain gemm, which packs panels itself) are used in place: a copy
        // in "its" layout would only duplicate them.
        bool in_place = false;
        if (constant_weights && !in_bf16) {
            try {
                auto as_given = make_pd(b_desc);
                in_place = std::string(as_given.impl_info_str()) == pd.impl_info_str();
                if (in_place) pd = as_given;
                if (auto padded = padded_rows(b); in_place && padded) {
                    // A copy with a padded row stride beats reading them in place.
                    pd = make_pd(ds::strided_desc(b.lens, *padded));
                    in_place = false;
                }
            } catch (const dnnl::error&) {
                // no implementation reads them as given: they are copied
            }
        }
        std::unordered_map<int, dnnl::memory> fixed;
        std::vector<std::pair<int, dnnl::memory::desc>> descs{{DNNL_ARG_SRC, src_desc}, {DNNL_ARG_DST, dst_desc}};
        std::vector<int> slots{0, ds::primitive_kernel::result_slot};
        std::vector<ds::kept_constant> kept;
        std::vector<argument> read_in_place;
        // (Weights loaded packed have no plain bytes to read in place: they are restored into a copy.)
        if (in_place && r.packed_input(1) == nullptr) {
            fixed.emplace(DNNL_ARG_WEIGHTS, dnnl::memory(b_desc, ds::cpu_engine(), r.constant_inputs[1].data()));
            read_in_place.push_back(r.constant_inputs[1]);
        } else if (constant_weights) {
            ds::kept_constant weights = ds::constant_in_layout(r, 1, b_desc, pd.weights_desc());
            fixed.emplace(DNNL_ARG_WEIGHTS, weights.copy);
            kept.push_back(std::move(weights));
        } else {
            descs.emplace_back(DNNL_ARG_WEIGHTS, b_desc);
            slots.push_back(1);
        }
        if (fused.has_bias) {
            descs.emplace_back(DNNL_ARG_BIAS, bias_desc);
            slots.push_back(2);
        }
        for (std::size_t k = 0; k < operand_descs.size(); ++k) {
            descs.emplace_back(DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(ds::post_op_index(fused.post, k))) |
                                   DNNL_ARG_SRC_1,
                               operand_descs[k]);
            slots.push_back(static_cast<int>(fused.first_post_operand() + k));
        }
        auto product = std::make_shared<ds::primitive_kernel>(dnnl::matmul(pd), std::move(descs), std::move(slots),
                                                              std::move(fixed), pd.scratchpad_desc().get_size(),
                                                              std::move(kept), std::move(read_in_place));
        if (!in_bf16) return product;
        return ds::with_input_reordered(std::move(product), 0, desc_of(a), src_desc,
                                        shape(dtype::bf16_type, a.lens));
    } catch (const dnnl::error&) {
        return nullptr;
    }
}

// A residual add ending the chain of a one-row product (a decoder's
// projection at one token per step) runs after the product as a loop over
// the result: oneDNN (2.x) has no optimized matmul for one row with a binary
// post-op and falls back to its reference implementation, which ran GPT-2's
// 1 x 3072 by 3072 x 768 projection in ~150 ms instead of well under 1 ms.
class add_epilogue_kernel final : public cpu_kernel {
public:
    add_epilogue_kernel(std::shared_ptr<const cpu_kernel> product, std::size_t operand)
        : product_(std::move(product)), operand_(operand) {}

    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        product_->run(result, inputs, scratch);
        // The planner never places a result over an input of its own step
        // (buffers alive at the same step never share a byte).
        auto* y = reinterpret_cast<float*>(result.data());
        const auto* addend = reinterpret_cast<const float*>(inputs.at(operand_).data());
        const std::size_t n = result.get_shape().elements();
        for (std::size_t i = 0; i < n; ++i) y[i] += addend[i];
    }
    std::size_t scratch_bytes() const override { return product_->scratch_bytes(); }
    // The product was built without the addend, which it never keeps.
    bool keeps_own_copy(std::size_t index) const override {
        return index != operand_ && product_->keeps_own_copy(index);
    }
    void restore_constant(std::size_t index, const argument& into) const override {
        product_->restore_constant(index, into);
    }
    std::size_t own_copy_bytes() const override { return product_->own_copy_bytes(); }
    std::shared_ptr<const packed_constant> packed_copy(std::size_t index) const override {
        return index == operand_ ? nullptr : product_->packed_copy(index);
    }
    std::size_t adopted_bytes() const override { return product_->adopted_bytes(); }

private:
    std::shared_ptr<const cpu_kernel> product_;
    std::size_t operand_;
};

const op::fused_dot& requested_product(const kernel_request& r) {
    const auto* fused = r.op.get_if<op::fused_dot>();
    if (fused == nullptr) fail(error_kind::runtime, "a matmul algorithm was asked to run " + r.op.name());
    return *fused;
}

// The product with its chain's last post-op left out (run after it instead).
op::fused_dot without_last_post_op(op::fused_dot product) {
    product.post.kinds.pop_back();
    product.post.alpha.pop_back();
    product.post.beta.pop_back();
    return product;
}

op::post_op_kind last_post_op(const kernel_request& r) {
    const auto& kinds = requested_product(r).post.kinds;
    return kinds.empty() ? op::post_op_kind::add : kinds.back();  // add: no GELU
}

bool gelu_last(const kernel_request& r, op::post_op_kind form) {
    return last_post_op(r) == form && gelu_array(form) != nullptr && r.output_shape.standard();
}

bool gelu_tanh_last(const kernel_request& r) {
    return gelu_last(r, op::post_op_kind::gelu_tanh);
}

bool gelu_erf_last(const kernel_request& r) {
    return gelu_last(r, op::post_op_kind::gelu_erf);
}

// The product and the rest of its chain through oneDNN, then the gelu.
std::shared_ptr<const cpu_kernel> build_with_gelu_epilogue(const kernel_request& r, const kernel_builder&) {
    auto k = build(without_last_post_op(requested_product(r)), r);
    return k ? std::make_shared<gelu_epilogue_kernel>(std::move(k), gelu_array(last_post_op(r)), r.threads) : nullptr;
}

bool one_row_then_add(const kernel_request& r) {
    const auto& kinds = requested_product(r).post.kinds;
    if (kinds.empty() || kinds.back() != op::post_op_kind::add) return false;
    const shape& out = r.output_shape;
    const shape& addend = r.input_shapes.back();
    return out.ndim() >= 1 && out.elements() == out.lens().back() && out.standard() && addend.standard() &&
           addend.lens() == out.lens() && addend.type() == dtype::float_type;
}

// The product and the rest of its chain through oneDNN, then the add.
std::shared_ptr<const cpu_kernel> build_with_add_epilogue(const kernel_request& r, const kernel_builder&) {
    const op::fused_dot product = without_last_post_op(requested_product(r));
    // The product without the addend, its last input (still passed at run time, and unused).
    std::vector<shape> shapes(r.input_shapes.begin(), r.input_shapes.end() - 1);
    std::vector<argument> constants(r.constant_inputs.begin(), r.constant_inputs.end() - 1);
    const kernel_request without_addend{r.op, shapes, r.output_shape, constants, r.threads, r.packed};
    auto k = build(product, without_addend);
    return k ? std::make_shared<add_epilogue_kernel>(std::move(k), r.input_shapes.size() - 1) : nullptr;
}

bool any_product(const kernel_request&) { return true; }

std::shared_ptr<const cpu_kernel> build_onednn(const kernel_request& r, const kernel_builder&) {
    return build(requested_product(r), r);
}

// Fewer rows stream the weights (bandwidth-bound: the widening kernels do
// that at 2 bytes a value already); 16 rows fill an AMX tile.
constexpr std::size_t bf16_min_rows = 16;

bool bf16_weights_many_rows(const kernel_request& r) {
    if (!bf16_dot_supported() || r.op.get_if<op::fused_dot>() == nullptr || r.input_shapes.size() < 2) return false;
    const shape& a = r.input_shapes[0];
    const shape& b = r.input_shapes[1];
    // Constant weights, as values or as a loaded file's packed form (read in place then).
    if (a.type() != dtype::float_type || b.type() != dtype::bf16_type || !r.is_constant(1)) return false;
    if (b.ndim() != 2 || a.ndim() < 2 || b.lens()[0] == 0) return false;
    return a.elements() / b.lens()[0] >= bf16_min_rows;
}

std::shared_ptr<const cpu_kernel> build_in_bf16(const kernel_request& r, const kernel_builder&) {
    constexpr auto bf16 = dnnl::memory::data_type::bf16;
    if (!gelu_tanh_last(r)) return build(requested_product(r), r, bf16);
    auto k = build(without_last_post_op(requested_product(r)), r, bf16);
    return k ? std::make_shared<gelu_epilogue_kernel>(std::move(k), gelu_array(op::post_op_kind::gelu_tanh), r.threads)
             : nullptr;
}

}  // namespace

const kernel_algorithm onednn_bf16_matmul{"onednn_bf16", bf16_weights_many_rows, build_in_bf16};

std::span<const kernel_algorithm> matmul_algorithms() {
    static const kernel_algorithm algorithms[] = {
        few_rows_float32_columns_avx512_matmul,
        few_rows_float32_columns_matmul,
        few_rows_float32_avx512_matmul,
        few_rows_float32_avx2_matmul,
        {"onednn_gelu_tanh_epilogue", gelu_tanh_last, build_with_gelu_epilogue},
        {"onednn_add_epilogue", one_row_then_add, build_with_add_epilogue},
        {"onednn", any_product, build_onednn},
        // Reached by exhaustive tuning only: the erf form stays a oneDNN post-op by default. On
        // AMD Zen 4 at one thread this loop (AVX-512) and oneDNN's post-op took the same time
        // (BERT-base, CPU time, 20 rounds interleaved: 0.997x); on an Intel host at two threads
        // the AVX2 loop made BERT's 768 x 3072 layers ~3% slower.
        {"onednn_gelu_erf_epilogue", gelu_erf_last, build_with_gelu_epilogue},
    };
    return algorithms;
}

}  // namespace kiln
