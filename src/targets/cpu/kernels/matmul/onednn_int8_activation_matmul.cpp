// int8 product of two activations through oneDNN's matmul: attention's
// q @ kt and p @ v, whose b is computed at run time (fused_quant_dot with a
// b that is not a constant). oneDNN takes both zero points (a's as the
// source's, b's as the weights'), scales the int32 sums by the one combined
// scale and applies the epilogue's activations and output quantization; a
// bias or a residual is left to the reference compute (attention has none).
#include "ops/fused_quantized_linalg.hpp"
#include "targets/cpu/kernels/dnnl_support.hpp"
#include "targets/cpu/kernels/int8_support.hpp"
#include "targets/cpu/kernels/matmul/matmul_algorithms.hpp"

namespace kiln {

namespace {

namespace ds = dnnl_support;
namespace is = int8_support;

const op::fused_quant_dot* requested(const kernel_request& r) { return r.op.get_if<op::fused_quant_dot>(); }

bool eligible(const kernel_request& r) {
    const auto* f = requested(r);
    if (f == nullptr || r.input_shapes.size() != 4 || r.is_constant(1)) return false;
    if (f->epilogue.has_bias || f->epilogue.residual != op::residual_kind::none) return false;
    const shape& a = r.input_shapes[0];
    const shape& b = r.input_shapes[1];
    const std::size_t rank = r.output_shape.ndim();
    if (rank < 2 || rank > 4 || a.ndim() < 2 || b.ndim() < 2 || b.type() != dtype::int8_type) return false;
    if (!r.is_constant(2) || !r.is_constant(3)) return false;
    for (float s : is::float_values(r.constant_inputs[3]))
        if (!(s != 0)) return false;
    return true;
}

// `s` seen with `rank` dims: leading unit dims added, zero (broadcast)
// strides of unit dims made plain.
shape ranked(const shape& s, std::size_t rank) {
    std::vector<std::size_t> lens(rank - s.ndim(), 1);
    lens.insert(lens.end(), s.lens().begin(), s.lens().end());
    std::vector<std::size_t> strides(rank - s.ndim(), s.elements());
    strides.insert(strides.end(), s.strides().begin(), s.strides().end());
    for (std::size_t d = 0; d < rank; ++d)
        if (lens[d] == 1) strides[d] = d + 1 < rank ? lens[d + 1] * strides[d + 1] : 1;
    return {s.type(), lens, strides};
}

// The matmul on operands in layouts `a` and `b` (the instruction's or
// standard copies); nothing when oneDNN has no implementation, or only its
// reference one and `reference_allowed` is false.
std::optional<dnnl::matmul::primitive_desc> describe(const shape& a, const shape& b, const shape& y,
                                                     const dnnl::primitive_attr& attr, bool reference_allowed) {
    try {
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(is::typed_desc(a), is::typed_desc(b), is::typed_desc(y)),
                                        attr, ds::cpu_engine());
        // Without VNNI the fast kernels' 16-bit pair sums may saturate: the exact one.
        if (!is::skip_to_exact(pd, [] { return false; })) return std::nullopt;
        if (!reference_allowed && is::is_reference(pd)) return std::nullopt;
        return pd;
    } catch (const dnnl::error&) {
        return std::nullopt;
    }
}

std::shared_ptr<const cpu_kernel> build(const kernel_request& r, const kernel_builder&) {
    const auto* f = requested(r);
    const shape& y = r.output_shape;
    const std::size_t rank = y.ndim();
    const std::vector<float> scales = is::float_values(r.constant_inputs[3]);
    auto attr = is::epilogue_attr(f->epilogue, scales, static_cast<int>(rank) - 1,
                                  is::zero_point_value(r.constant_inputs[2]), {});
    if (!attr) return nullptr;
    if (f->b_zero_point != 0) attr->set_zero_points(DNNL_ARG_WEIGHTS, 0, {static_cast<std::int32_t>(f->b_zero_point)});
    const shape a = ranked(r.input_shapes[0], rank);
    const shape b = ranked(r.input_shapes[1], rank);
    // The operands as they lie (a transposed kt, say) when oneDNN has a fast
    // kernel for those strides; else standard copies in scratch.
    const shape a_standard{a.type(), a.lens()}, b_standard{b.type(), b.lens()};
    bool copy = false;
    auto pd = describe(a, b, y, *attr, false);
    if (!pd) {
        copy = true;
        pd = describe(a_standard, b_standard, y, *attr, true);
    }
    if (!pd) return nullptr;
    const shape& a_used = copy ? a_standard : a;
    const shape& b_used = copy ? b_standard : b;
    ds::arg_descs descs{{DNNL_ARG_SRC, is::typed_desc(a_used)},
                        {DNNL_ARG_WEIGHTS, is::typed_desc(b_used)},
                        {DNNL_ARG_DST, is::typed_desc(y)}};
    std::shared_ptr<const cpu_kernel> kernel = std::make_shared<ds::primitive_kernel>(
        dnnl::matmul(*pd), std::move(descs), std::vector<int>{0, 1, ds::primitive_kernel::result_slot},
        ds::fixed_args{}, pd->scratchpad_desc().get_size());
    if (!copy) return kernel;
    if (b.strides() != b_standard.strides())
        kernel = ds::with_input_reordered(std::move(kernel), 1, is::typed_desc(b), is::typed_desc(b_standard), b_standard);
    if (a.strides() != a_standard.strides())
        kernel = ds::with_input_reordered(std::move(kernel), 0, is::typed_desc(a), is::typed_desc(a_standard), a_standard);
    return kernel;
}

}  // namespace

const kernel_algorithm onednn_int8_activation_matmul{"onednn_int8_activations", eligible, build};

}  // namespace kiln
