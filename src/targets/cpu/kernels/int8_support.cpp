#include "targets/cpu/kernels/int8_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "targets/cpu/kernels/dnnl_support.hpp"
#include "targets/cpu/kernels/epilogue_steps.hpp"
#include "targets/cpu/kernels/packed_layout.hpp"
#include "targets/cpu/kernels/scratch_alignment.hpp"

namespace kiln::int8_support {

namespace {

using dt = dnnl::memory::data_type;
using alg = dnnl::algorithm;

// The unary kinds oneDNN's int8 kernels apply (its eltwise post-ops).
bool append_unary(dnnl::post_ops& ops, const op::post_op_chain& chain) {
    using op::post_op_kind;
    for (std::size_t k = 0; k < chain.kinds.size(); ++k) {
        const auto a = static_cast<float>(chain.alpha[k]);
        const auto b = static_cast<float>(chain.beta[k]);
        switch (chain.kinds[k]) {
        case post_op_kind::relu: ops.append_eltwise(1.f, alg::eltwise_relu, 0.f, 0.f); break;
        case post_op_kind::clip: ops.append_eltwise(1.f, alg::eltwise_clip, a, b); break;
        case post_op_kind::sigmoid: ops.append_eltwise(1.f, alg::eltwise_logistic, 0.f, 0.f); break;
        case post_op_kind::tanh: ops.append_eltwise(1.f, alg::eltwise_tanh, 0.f, 0.f); break;
        case post_op_kind::gelu_erf: ops.append_eltwise(1.f, alg::eltwise_gelu_erf, 0.f, 0.f); break;
        case post_op_kind::gelu_tanh: ops.append_eltwise(1.f, alg::eltwise_gelu_tanh, 0.f, 0.f); break;
        default: return false;
        }
    }
    return true;
}


std::pair<float, float> code_range(dtype t) { return t == dtype::uint8_type ? std::pair{0.f, 255.f} : std::pair{-128.f, 127.f}; }



// Runs `inner` into a buffer of layout `inner_y` in scratch, then reorders
// it into the result's layout.
class result_in_layout_kernel final : public wrapping_kernel {
public:
    result_in_layout_kernel(std::shared_ptr<const cpu_kernel> inner, const shape& result, const shape& inner_y)
        : wrapping_kernel(std::move(inner)), inner_y_(inner_y), from_(typed_desc(inner_y)), to_(typed_desc(result)),
          bytes_(scratch_aligned(inner_y.bytes())) {
        const auto& engine = dnnl_support::cpu_engine();
        reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine, from_, engine, to_));
    }

    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        const argument staged(inner_y_, scratch);
        inner_->run(staged, inputs, scratch + bytes_);
        const auto& engine = dnnl_support::cpu_engine();
        thread_local dnnl::stream stream(engine);
        dnnl::memory from(from_, engine, scratch), to(to_, engine, result.data());
        reorder_.execute(stream, from, to);
        stream.wait();
    }
    std::size_t scratch_bytes() const override { return bytes_ + inner_->scratch_bytes(); }

private:
    shape inner_y_;
    dnnl::memory::desc from_, to_;
    dnnl::reorder reorder_;
    std::size_t bytes_;
};

// Puts the residual where the primitive's sum post-op reads it: codes as
// they are into an 8-bit result, real values into a float one.
class residual_first_kernel final : public wrapping_kernel {
public:
    residual_first_kernel(std::shared_ptr<const cpu_kernel> inner, const op::requantize_epilogue& e)
        : wrapping_kernel(std::move(inner)), e_(e) {}
    void run(const argument& result, const std::vector<argument>& inputs, std::byte* scratch) const override {
        const argument& r = inputs[e_.residual_input()];
        const std::size_t n = r.get_shape().elements();
        if (result.get_shape().type() != dtype::float_type || r.get_shape().type() == dtype::float_type) {
            // The plan may give the result the residual's own buffer.
            if (result.data() != r.data()) std::memmove(result.data(), r.data(), r.get_shape().bytes());
        } else if (r.get_shape().type() == dtype::uint8_type) {
            to_real(r.data_as<const std::uint8_t>(), result.data_as<float>(), n);
        } else {
            to_real(r.data_as<const std::int8_t>(), result.data_as<float>(), n);
        }
        inner_->run(result, inputs, scratch);
    }
    std::size_t scratch_bytes() const override { return inner_->scratch_bytes(); }
    // Codes into a result of the same bytes are copied first, then read by the sum post-op where they lie.
    int result_may_take_input() const override { return static_cast<int>(e_.residual_input()); }

private:
    template <class T>
    void to_real(const T* codes, float* out, std::size_t n) const {
        const auto scale = static_cast<float>(e_.residual_scale);
        const auto zero = static_cast<float>(e_.residual_zero_point);
#pragma omp parallel for schedule(static)
        for (std::ptrdiff_t i = 0; i < static_cast<std::ptrdiff_t>(n); ++i) out[i] = (static_cast<float>(codes[i]) - zero) * scale;
    }

    op::requantize_epilogue e_;
};

}  // namespace

std::vector<float> float_values(const argument& a) {
    const auto* p = a.data_as<const float>();
    return {p, p + a.get_shape().elements()};
}

std::int32_t zero_point_value(const argument& z) {
    return static_cast<std::int32_t>(z.value_at(0));
}

bool constant_operands_ready(const kernel_request& r, const op::requantize_epilogue& e) {
    for (std::size_t i = 1; i < (e.has_bias ? 5u : 4u); ++i)
        if (!r.is_constant(i)) return false;
    for (float s : float_values(r.constant_inputs[3]))
        if (!(s != 0)) return false;  // the bias is divided by it
    return true;
}

dnnl::memory::data_type dnnl_type(dtype t) {
    switch (t) {
    case dtype::int8_type: return dt::s8;
    case dtype::uint8_type: return dt::u8;
    case dtype::int32_type: return dt::s32;
    case dtype::float_type: return dt::f32;
    default: fail(error_kind::runtime, "no oneDNN int8-kernel type for " + to_string(t));
    }
}

dnnl::memory::desc typed_desc(const shape& s) {
    return dnnl_support::strided_desc(s.lens(), s.strides(), dnnl_type(s.type()));
}

dnnl::memory::desc channels_last_desc(const shape& plain, dtype t) {
    return typed_desc(shape{t, plain.lens(), op::channels_last_strides(plain.lens())});
}

namespace {

// Whether every step commutes with dividing by a positive unit (relu, and
// clip with its bounds divided too).
bool scales_through(const op::post_op_chain& chain) {
    for (const auto kind : chain.kinds)
        if (kind != op::post_op_kind::relu && kind != op::post_op_kind::clip) return false;
    return true;
}

}  // namespace

// The chain runs in a unit u (the value divided by u): the rounding scale,
// else the output scale, else 1. oneDNN's output scale then carries 1 / u,
// relu commutes with it and clip bounds are divided by it; the rounding of
// an intermediate quantize is round + clip to the codes minus the zero
// point; a quantized residual is a sum post-op over codes the kernel puts
// in the destination first. One eltwise_linear at most: oneDNN 2.6's jit
// post-op chains computed wrong values with two.
// A chain with a step that needs the real value (gelu, sigmoid, ...) runs
// in real units when nothing rounds inside it, or from right after the
// rounding (whose clip then scales codes back to real values); the output scale then comes
// last, in the one eltwise_linear.
double chain_unit(const op::requantize_epilogue& e) {
    if (e.round_type != dtype::float_type) return e.round_scale;
    if (e.output_type != dtype::float_type && scales_through(e.activation) && scales_through(e.after_residual))
        return e.output_scale;
    return 1;
}

namespace {

// The chain is gathered as eltwise steps (and the residual's one binary
// or sum step) before it goes to oneDNN: 2.6's jit kernels give every
// eltwise post-op of one algorithm the first one's parameters, so adjacent
// clips are merged (clipping twice clips to the intersection) and a chain
// that still repeats an algorithm with other parameters is declined.

bool append_scaled(std::vector<eltwise_step>& steps, const op::post_op_chain& chain, double unit) {
    for (std::size_t k = 0; k < chain.kinds.size(); ++k) {
        const auto a = static_cast<float>(chain.alpha[k] / unit), b = static_cast<float>(chain.beta[k] / unit);
        switch (chain.kinds[k]) {
        case op::post_op_kind::relu: steps.push_back({alg::eltwise_relu}); break;
        case op::post_op_kind::clip: steps.push_back({alg::eltwise_clip, a, b}); break;
        default:
            if (unit != 1) return false;  // not homogeneous: needs the real value
            dnnl::post_ops one;
            op::post_op_chain single;
            single.append(chain.kinds[k], chain.alpha[k], chain.beta[k]);
            if (!append_unary(one, single)) return false;
            alg kind{};
            float scale = 0, alpha = 0, beta = 0;
            one.get_params_eltwise(0, scale, kind, alpha, beta);
            steps.push_back({kind, alpha, beta});
        }
    }
    return true;
}

std::vector<eltwise_step> merged_clips(const std::vector<eltwise_step>& steps) {
    std::vector<eltwise_step> out;
    for (const auto& st : steps) {
        if (st.kind == alg::eltwise_clip && !out.empty() && out.back().kind == alg::eltwise_clip && st.scale == 1 &&
            out.back().scale == 1) {
            out.back().alpha = std::max(out.back().alpha, st.alpha);
            out.back().beta = std::min(out.back().beta, st.beta);
            continue;
        }
        out.push_back(st);
    }
    return out;
}

// Appends the steps; false when an algorithm would repeat with other parameters.
bool append_steps(dnnl::post_ops& ops, const std::vector<eltwise_step>& steps, std::vector<eltwise_step>& used) {
    for (const auto& st : merged_clips(steps)) {
        for (const auto& u : used)
            if (u.kind == st.kind && (u.alpha != st.alpha || u.beta != st.beta || u.scale != st.scale)) return false;
        used.push_back(st);
        ops.append_eltwise(st.scale, st.kind, st.alpha, st.beta);
    }
    return true;
}

}  // namespace

std::optional<dnnl::primitive_attr> epilogue_attr(const op::requantize_epilogue& e, const std::vector<float>& scales,
                                                  int channel_axis, std::int32_t src_zero_point,
                                                  const dnnl::memory::desc& residual) {
    const double unit = chain_unit(e);
    std::vector<float> output_scales(scales.size());
    for (std::size_t c = 0; c < scales.size(); ++c) output_scales[c] = static_cast<float>(scales[c] / unit);
    auto attr = dnnl_support::user_scratchpad_attr();
    attr.set_output_scales(1 << channel_axis, output_scales);
    if (src_zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {src_zero_point});
    dnnl::post_ops ops;
    std::vector<eltwise_step> before, after, used;
    if (!append_scaled(before, e.activation, unit)) return std::nullopt;
    if (e.round_type != dtype::float_type) {
        // quantize -> dequantize, in codes: round(v / s) + z saturated, minus z.
        const auto [lo, hi] = code_range(e.round_type);
        const auto z = static_cast<float>(e.round_zero_point);
        float low = lo - z, high = hi - z;
        // A clip just before the rounding (ReLU6 in codes) moves after it with rounded bounds, exactly (rounding
        // is monotone), and merges with the saturation: oneDNN takes one clip's parameters per chain.
        if (!before.empty() && before.back().kind == alg::eltwise_clip) {
            const float merged_low = std::max(low, std::nearbyint(before.back().alpha));
            const float merged_high = std::min(high, std::nearbyint(before.back().beta));
            if (merged_low <= merged_high) {
                before.pop_back();
                low = merged_low;
                high = merged_high;
            }
        }
        before.push_back({alg::eltwise_round});
        before.push_back({alg::eltwise_clip, low, high});
    }
    double after_unit = unit;
    if (!append_scaled(after, e.after_residual, unit)) {
        // A step that needs the real value (gelu) right after the rounding:
        // the rounding's clip scales its codes back to real values (its
        // eltwise scale), so that the one eltwise_linear stays the last.
        if (e.round_type == dtype::float_type || e.residual != op::residual_kind::none) return std::nullopt;
        after.clear();
        if (!append_scaled(after, e.after_residual, 1)) return std::nullopt;
        before.back().scale = static_cast<float>(unit);
        after_unit = 1;
    }
    // The conversion to an 8-bit destination rounds half to even and saturates.
    const double out_scale = e.output_type == dtype::float_type ? 1 : e.output_scale;
    if (after_unit != out_scale) after.push_back({alg::eltwise_linear, static_cast<float>(after_unit / out_scale)});
    // quantize_linear adds the zero point to the rounded quotient. Added in
    // float before the conversion's rounding (a linear step's beta), it
    // moved a quotient within a few ulps of a half across it, and by how
    // much depended on the zero point: z and z + 128 (the same levels as
    // uint8, unsigned_codes.hpp) gave codes 1 apart. So the chain rounds,
    // and oneDNN adds the destination zero point to that integer, exactly.
    if (e.output_type != dtype::float_type && e.output_zero_point != 0) {
        after.push_back({alg::eltwise_round});
        attr.set_zero_points(DNNL_ARG_DST, 0, {static_cast<std::int32_t>(e.output_zero_point)});
    }
    if (e.residual == op::residual_kind::none) {
        before.insert(before.end(), after.begin(), after.end());
        after.clear();
    }
    // The steps that end the chain: those after the residual, or all of them. A clip the 8-bit result's
    // saturation does anyway costs instructions on every output and changes no code.
    auto& last = e.residual == op::residual_kind::none ? before : after;
    last = merged_clips(last);
    drop_clips_the_saturation_covers(last, e.output_type, static_cast<std::int32_t>(e.output_zero_point));
    if (!append_steps(ops, before, used)) return std::nullopt;
    if (e.residual != op::residual_kind::none) {
        const bool float_result = e.output_type == dtype::float_type;
        if (!residual_in_result(e)) {
            ops.append_binary(alg::binary_add, residual);
        } else if (float_result) {
            ops.append_sum(static_cast<float>(1 / unit));  // the real residual, put in the result
        } else if (e.residual == op::residual_kind::quantized) {
            ops.append_sum(static_cast<float>(e.residual_scale / unit), static_cast<std::int32_t>(e.residual_zero_point),
                           residual.data_type());
        } else {
            return std::nullopt;  // real values do not fit an 8-bit result
        }
    }
    if (!append_steps(ops, after, used)) return std::nullopt;
    attr.set_post_ops(ops);
    return attr;
}

bool residual_in_result(const op::requantize_epilogue& e) {
    return e.residual == op::residual_kind::quantized || (e.residual == op::residual_kind::real && chain_unit(e) != 1);
}

int residual_arg(const op::requantize_epilogue& e) {
    // A real residual read as a binary operand has a chain unit of 1: no
    // rounding, so only the activations come before it.
    std::vector<eltwise_step> before;
    append_scaled(before, e.activation, 1);
    return DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(merged_clips(before).size())) | DNNL_ARG_SRC_1;
}

bool has_vnni() {
    using isa = dnnl::cpu_isa;
    const isa effective = dnnl::get_effective_cpu_isa();  // what ONEDNN_MAX_CPU_ISA leaves
    return effective == isa::avx512_core_vnni || effective == isa::avx512_core_bf16 ||
           effective == isa::avx512_core_amx || effective == isa::avx2_vnni;
}

bool is_reference(const dnnl::primitive_desc& pd) { return std::string(pd.impl_info_str()).rfind("ref", 0) == 0; }

bool pairs_fit_16_bits(const shape& x, const kernel_request& r) {
    if (x.type() != dtype::uint8_type) return false;
    const packed_constant* form = r.packed_input(1);
    const argument weights = form == nullptr ? r.constant_inputs[1]
                                             : dnnl_support::restore_packed(*form, r.input_shapes[1].as_standard());
    const auto* w = weights.data_as<const std::int8_t>();
    for (std::size_t i = 0; i < weights.get_shape().elements(); ++i)
        if (w[i] < -64 || w[i] > 64) return false;
    return true;
}

bool skip_to_exact(dnnl::primitive_desc& pd, const std::function<bool()>& pairs_fit) {
    auto inexact = [&] {
        const auto& extra = pd.weights_desc().data.extra;
        if ((extra.flags & dnnl_memory_extra_flag_scale_adjust) != 0 && extra.scale_adjust != 1.0f) return true;
        // The direct kernels (jit, brgemm) multiply u8 by s8 with vpmaddubsw.
        const std::string impl = pd.impl_info_str();
        return !has_vnni() && impl.rfind("ref", 0) != 0 && !pairs_fit();
    };
    while (inexact())
        if (!pd.next_impl()) return false;
    return true;
}

std::vector<float> bias_in_sum_units(const float* bias, const std::vector<float>& scales) {
    std::vector<float> out(scales.size());
    for (std::size_t c = 0; c < scales.size(); ++c) out[c] = bias[c] / scales[c];
    return out;
}

std::shared_ptr<const cpu_kernel> with_residual_in_result(std::shared_ptr<const cpu_kernel> inner,
                                                          const op::requantize_epilogue& e) {
    return std::make_shared<residual_first_kernel>(std::move(inner), e);
}

std::shared_ptr<const cpu_kernel> epilogue_kernel(const kernel_request& r, const op::requantize_epilogue& e,
                                                  dnnl::primitive p, const dnnl::primitive_desc& pd,
                                                  const dnnl::memory::desc& src, const dnnl::memory::desc& dst,
                                                  dnnl_support::kept_constant weights,
                                                  const dnnl::memory::desc& bias_desc, const std::vector<float>& scales,
                                                  const dnnl::memory::desc& residual) {
    namespace ds = dnnl_support;
    // The plan releases the weights' literal: they live in the reordered copy.
    ds::fixed_args fixed{{DNNL_ARG_WEIGHTS, weights.copy}};
    std::vector<ds::kept_constant> kept{std::move(weights)};
    if (e.has_bias) {
        dnnl::memory bias(bias_desc, ds::cpu_engine());
        const auto values = bias_in_sum_units(r.constant_inputs[4].data_as<const float>(), scales);
        std::copy(values.begin(), values.end(), static_cast<float*>(bias.get_data_handle()));
        fixed.emplace(DNNL_ARG_BIAS, bias);
    }
    ds::arg_descs descs{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
    std::vector<int> slots{0, ds::primitive_kernel::result_slot};
    if (e.residual != op::residual_kind::none && !residual_in_result(e)) {
        descs.emplace_back(residual_arg(e), residual);
        slots.push_back(static_cast<int>(e.residual_input()));
    }
    auto inner = std::make_shared<ds::primitive_kernel>(std::move(p), std::move(descs), std::move(slots),
                                                        std::move(fixed), pd.scratchpad_desc().get_size(),
                                                        std::move(kept));
    if (residual_in_result(e)) return with_residual_in_result(inner, e);
    return inner;
}

std::shared_ptr<const cpu_kernel> with_input_in_layout(std::shared_ptr<const cpu_kernel> inner, std::size_t index,
                                                       const shape& given, const shape& wanted) {
    if (given.strides() == wanted.strides()) return inner;
    return dnnl_support::with_input_reordered(std::move(inner), index, typed_desc(given), typed_desc(wanted), wanted);
}

std::shared_ptr<const cpu_kernel> staged(std::shared_ptr<const cpu_kernel> inner, const shape& x, const shape& inner_x,
                                         const shape& result, const shape& inner_y) {
    if (result.strides() != inner_y.strides())
        inner = std::make_shared<result_in_layout_kernel>(std::move(inner), result, inner_y);
    return with_input_in_layout(std::move(inner), 0, x, inner_x);
}

}  // namespace kiln::int8_support
