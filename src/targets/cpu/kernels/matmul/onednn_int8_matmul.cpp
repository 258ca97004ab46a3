// int8 matrix product through oneDNN's matmul: 8-bit activations [..., M, K]
// times constant int8 weights [K, N] (reordered once into the primitive's
// layout), the int32 sums scaled per column and requantized by the same
// epilogue as the int8 convolution (int8_support.hpp).
#include "ops/fused_quantized_linalg.hpp"
#include "targets/cpu/kernels/dnnl_support.hpp"
#include "targets/cpu/kernels/int8_support.hpp"
#include "targets/cpu/kernels/matmul/matmul_algorithms.hpp"
#include "targets/cpu/kernels/quantize/code_map_kernel.hpp"

namespace kiln {

namespace {

namespace ds = dnnl_support;
namespace is = int8_support;
using dims = dnnl::memory::dims;
using op::residual_kind;

const op::fused_quant_dot* requested(const kernel_request& r) { return r.op.get_if<op::fused_quant_dot>(); }

bool eligible(const kernel_request& r) {
    const auto* f = requested(r);
    if (f == nullptr || f->b_zero_point != 0) return false;
    const shape& a = r.input_shapes[0];
    const shape& b = r.input_shapes[1];
    if (a.ndim() < 2 || a.ndim() > 4 || b.ndim() != 2) return false;
    return is::constant_operands_ready(r, f->epilogue);
}

// `s` seen with `rank` dims: leading unit dims added (stride 0 is fine for extent 1).
dnnl::memory::desc ranked_desc(const shape& s, std::size_t rank) {
    std::vector<std::size_t> lens(rank - s.ndim(), 1), strides(rank - s.ndim(), 0);
    lens.insert(lens.end(), s.lens().begin(), s.lens().end());
    strides.insert(strides.end(), s.strides().begin(), s.strides().end());
    for (std::size_t i = 0; i + s.ndim() < rank; ++i) strides[i] = s.elements();
    return is::typed_desc(shape{s.type(), lens, strides});
}

// `s` [..., rows, columns] as one [all rows, columns] matrix (s is standard).
shape as_rows(const shape& s) {
    const std::size_t columns = s.lens().back();
    return shape{s.type(), {s.elements() / columns, columns}};
}

std::shared_ptr<const cpu_kernel> build(const kernel_request& r, bool reference_allowed) {
    const auto& e = requested(r)->epilogue;
    const shape& a = r.input_shapes[0];
    const shape& b = r.input_shapes[1];
    const shape& y = r.output_shape;
    // oneDNN 2.x's brgemm matmul keeps rank-3 weights [1, K, N] in their plain layout and packs them again on
    // every run; the rows of a standard [..., M, K] input times 2-D weights are one [rows, K] x [K, N] product,
    // whose weights it stores packed once (1.2-1.5x faster on BERT-base's layers).
    const bool fold_rows = b.ndim() == 2 && y.ndim() > 2 && y.standard();
    const std::size_t rank = fold_rows ? 2 : y.ndim();
    dnnl::memory::desc residual;
    if (e.residual != residual_kind::none) {
        const shape& res = r.input_shapes[e.residual_input()];
        // A full-tensor operand, or the codes copied into the result, share its layout.
        if (res.strides() != y.strides()) return nullptr;
        residual = is::typed_desc(fold_rows ? as_rows(res) : res);
    }
    const std::vector<float> scales = is::float_values(r.constant_inputs[3]);
    auto attr = is::epilogue_attr(e, scales, static_cast<int>(rank) - 1, is::zero_point_value(r.constant_inputs[2]), residual);
    if (!attr) return nullptr;

    // A channels-last int8 convolution result is copied to standard strides first.
    const shape standard_a{a.type(), a.lens()};
    const auto src = is::typed_desc(fold_rows ? as_rows(standard_a) : standard_a);
    const auto dst = is::typed_desc(fold_rows ? as_rows(y) : y);
    dims weight_dims(rank, 1);
    weight_dims[rank - 2] = static_cast<dnnl::memory::dim>(b.lens()[0]);
    weight_dims[rank - 1] = static_cast<dnnl::memory::dim>(b.lens()[1]);
    const dnnl::memory::desc any_weights(weight_dims, dnnl::memory::data_type::s8, dnnl::memory::format_tag::any);
    dims bias_dims(rank, 1);
    bias_dims.back() = static_cast<dnnl::memory::dim>(y.lens().back());
    dims bias_strides(rank, bias_dims.back());
    bias_strides.back() = 1;
    const dnnl::memory::desc bias_desc(bias_dims, dnnl::memory::data_type::f32, bias_strides);
    try {
        auto desc = e.has_bias ? dnnl::matmul::desc(src, any_weights, bias_desc, dst) : dnnl::matmul::desc(src, any_weights, dst);
        dnnl::matmul::primitive_desc pd(desc, *attr, ds::cpu_engine());
        if (!is::skip_to_exact(pd, [&] { return is::pairs_fit_16_bits(a, r); })) return nullptr;
        if (!reference_allowed && is::is_reference(pd)) return nullptr;
        const auto plain_weights = ranked_desc(b, rank);
        auto weights = ds::constant_in_layout(r, 1, plain_weights, pd.weights_desc());
        auto kernel = is::epilogue_kernel(r, e, dnnl::matmul(pd), pd, src, dst, std::move(weights), bias_desc, scales,
                                          residual);
        return is::staged(kernel, a, standard_a, y, y);
    } catch (const dnnl::error&) {
        return nullptr;
    }
}

std::shared_ptr<const cpu_kernel> build_fast(const kernel_request& r, const kernel_builder&) { return build(r, false); }
std::shared_ptr<const cpu_kernel> build_exact(const kernel_request& r, const kernel_builder&) { return build(r, true); }

bool eligible_with_code_map(const kernel_request& r) {
    return eligible(r) && code_map_pays(requested(r)->epilogue) && r.output_shape.standard();
}

// The product up to its rounding, by the algorithm the list picks for that, then the map over its codes.
std::shared_ptr<const cpu_kernel> build_with_code_map(const kernel_request& r, const kernel_builder& inner) {
    op::fused_quant_dot up_to_rounding = *requested(r);
    std::vector<std::uint8_t> map = up_to_rounding.epilogue.code_map();
    up_to_rounding.epilogue = epilogue_up_to_rounding(up_to_rounding.epilogue);
    const operation rounding_op(up_to_rounding);
    const shape codes{up_to_rounding.epilogue.output_type, r.output_shape.lens()};
    const kernel_request rounding{rounding_op, r.input_shapes, codes, r.constant_inputs, r.threads, r.packed};
    auto kernel = inner(rounding);
    if (kernel == nullptr) return nullptr;
    return with_code_map(std::move(kernel), std::move(map));
}

}  // namespace

// The first entry stops at an intermediate rounding and maps the codes the
// rest of the way (code_map_kernel.hpp). The reference entry is oneDNN's
// exact, slow int8 matmul, for where the fast ones saturate
// (int8_support.hpp, skip_to_exact).
std::span<const kernel_algorithm> quant_matmul_algorithms() {
    static const kernel_algorithm algorithms[] = {{"onednn_int8_code_map", eligible_with_code_map, build_with_code_map},
                                                  {"onednn_int8", eligible, build_fast},
                                                  {"onednn_int8_reference", eligible, build_exact},
                                                  onednn_int8_activation_matmul};
    return algorithms;
}

}  // namespace kiln
