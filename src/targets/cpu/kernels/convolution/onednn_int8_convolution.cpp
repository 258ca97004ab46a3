// int8 convolution through oneDNN: the codes stay 8-bit end to end, the
// int32 sums are scaled per channel and the whole requantizing epilogue
// (bias, activations, intermediate rounding, residual, output quantization)
// runs as the primitive's output scales, source zero point and post-ops.
// oneDNN's int8 kernels want channels-last activations: the layout passes
// keep them so between int8 layers; other inputs and results are reordered
// on the way in and out.
#include <cstdlib>
#include <string>

#include "ops/fused_quantized_linalg.hpp"
#include "targets/cpu/kernels/convolution/convolution_algorithms.hpp"
#include "targets/cpu/kernels/dnnl_support.hpp"
#include "targets/cpu/kernels/fewer_threads_kernel.hpp"
#include "targets/cpu/kernels/int8_support.hpp"

namespace kiln {

namespace {

namespace ds = dnnl_support;
namespace is = int8_support;
using dims = dnnl::memory::dims;
using op::residual_kind;

dims to_dims(const std::vector<std::size_t>& v) { return dims(v.begin(), v.end()); }

const op::fused_quant_convolution* requested(const kernel_request& r) { return r.op.get_if<op::fused_quant_convolution>(); }

bool eligible(const kernel_request& r) {
    const auto* f = requested(r);
    if (f == nullptr || r.input_shapes[0].ndim() != 4 || !r.input_shapes[1].standard()) return false;
    return is::constant_operands_ready(r, f->epilogue);
}

// Weights [M, C/g, kh, kw] as oneDNN sees them: grouped ones get a leading group dimension.
dnnl::memory::desc weights_desc(const shape& w, std::size_t group, dnnl::memory::format_tag tag) {
    dims d = to_dims(w.lens());
    if (group > 1) {
        d[0] /= static_cast<dnnl::memory::dim>(group);
        d.insert(d.begin(), static_cast<dnnl::memory::dim>(group));
    }
    return dnnl::memory::desc(d, dnnl::memory::data_type::s8, tag);
}

// Which of oneDNN's implementations a variant takes: the first that is exact
// (its own choice), the first that is not oneDNN's reference, or the first
// that runs no AMX tiles either.
enum class implementations { exact, fast, fast_without_amx };

bool uses_amx(const dnnl::primitive_desc& pd) {
    return std::string(pd.impl_info_str()).find("amx") != std::string::npos;
}

// `accept(r, amx)`: whether the implementation oneDNN chose (AMX or not) suits the caller.
std::shared_ptr<const cpu_kernel> build(const kernel_request& r, implementations wanted,
                                        bool (*accept)(const kernel_request&, bool) = nullptr) {
    const auto& f = *requested(r);
    const auto& e = f.epilogue;
    const shape& x = r.input_shapes[0];
    const shape& w = r.input_shapes[1];
    const shape& y = r.output_shape;
    const shape inner_x{x.type(), x.lens(), op::channels_last_strides(x.lens())};
    const shape inner_y{y.type(), y.lens(), op::channels_last_strides(y.lens())};
    std::vector<std::size_t> kernel(w.lens().begin() + 2, w.lens().end());
    const ops::window win = ops::make_window(f.name(), kernel, f.conv.padding, f.conv.stride, f.conv.dilation);
    dims strides = to_dims(win.stride), pad_l = to_dims(win.pad_begin), pad_r = to_dims(win.pad_end), dil;
    for (auto d : win.dilation) dil.push_back(static_cast<dnnl::memory::dim>(d) - 1);
    // oneDNN wants the right padding that makes its floor formula give our output extent.
    for (std::size_t i = 0; i < 2; ++i) {
        auto extent = static_cast<dnnl::memory::dim>(win.dilation[i] * (kernel[i] - 1) + 1);
        pad_r[i] = static_cast<dnnl::memory::dim>(y.lens()[2 + i] - 1) * strides[i] + extent -
                   static_cast<dnnl::memory::dim>(x.lens()[2 + i]) - pad_l[i];
    }

    // A full-tensor post-op operand shares the destination's layout: the
    // residual is reordered into it first where its producer chose another.
    dnnl::memory::desc residual;
    shape given_residual, inner_residual;
    if (e.residual != residual_kind::none) {
        given_residual = r.input_shapes[e.residual_input()];
        inner_residual = shape{given_residual.type(), given_residual.lens(), inner_y.strides()};
        residual = is::typed_desc(inner_residual);
    }
    const std::vector<float> scales = is::float_values(r.constant_inputs[3]);
    auto attr = is::epilogue_attr(e, scales, 1, is::zero_point_value(r.constant_inputs[2]), residual);
    if (!attr) return nullptr;

    const auto group = static_cast<std::size_t>(f.conv.group);
    const auto src = is::typed_desc(inner_x);
    const auto dst = is::typed_desc(inner_y);
    const auto any_weights = weights_desc(w, group, dnnl::memory::format_tag::any);
    const auto channels = static_cast<dnnl::memory::dim>(y.lens()[1]);
    const dnnl::memory::desc bias_desc({channels}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::x);
    try {
        const auto prop = dnnl::prop_kind::forward_inference;
        const auto direct = dnnl::algorithm::convolution_direct;
        auto desc = e.has_bias ? dnnl::convolution_forward::desc(prop, direct, src, any_weights, bias_desc, dst, strides,
                                                                 dil, pad_l, pad_r)
                               : dnnl::convolution_forward::desc(prop, direct, src, any_weights, dst, strides, dil,
                                                                 pad_l, pad_r);
        dnnl::convolution_forward::primitive_desc pd(desc, *attr, ds::cpu_engine());
        if (!is::skip_to_exact(pd, [&] { return is::pairs_fit_16_bits(x, r); })) return nullptr;
        if (wanted == implementations::fast_without_amx)
            while (uses_amx(pd))
                if (!pd.next_impl() || !is::skip_to_exact(pd, [&] { return is::pairs_fit_16_bits(x, r); })) return nullptr;
        if (wanted != implementations::exact && is::is_reference(pd)) return nullptr;
        if (accept != nullptr && !accept(r, uses_amx(pd))) return nullptr;
        const auto plain_weights =
            weights_desc(w, group, group > 1 ? dnnl::memory::format_tag::goihw : dnnl::memory::format_tag::oihw);
        auto weights = ds::constant_in_layout(r, 1, plain_weights, pd.weights_desc());
        auto kernel = is::epilogue_kernel(r, e, dnnl::convolution_forward(pd), pd, src, dst, std::move(weights),
                                          bias_desc, scales, residual);
        if (e.residual != residual_kind::none)
            kernel = is::with_input_in_layout(kernel, e.residual_input(), given_residual, inner_residual);
        return is::staged(kernel, x, inner_x, y, inner_y);
    } catch (const dnnl::error&) {
        return nullptr;  // no oneDNN implementation for these shapes: the reference kernel runs
    }
}

// Layers that run on one thread (the program's others on all): measured on
// MobileNetV2 at batch 1 (a 2-core AMX machine, each layer's fastest of
// 30 interleaved profiles), oneDNN's AMX kernels split a result of under
// about 160K elements (28 x 28 and smaller, or few channels at 56 x 56) no
// faster over two threads than one (0.9x to 1.2x), its other kernels
// (depthwise) one of under about 50K (7 x 7); larger ones gained 1.3x to
// 1.6x. On one thread such a layer also skips the fork and join.
// Without AMX (oneDNN's VNNI kernels, brgconv and the depthwise jit) every
// layer runs on all threads: on this 2-core AVX-512 VNNI machine exhaustive
// tuning at 2 threads chose two threads for every int8 convolution of
// DenseNet-121, MobileNetV2 and ResNet-50 at batch 1, and whole QDQ programs
// with no one-thread layer ran 0.86x (DenseNet-121, 92 such layers) and
// 0.89x (MobileNetV2, 22) the time of the one-thread rule's (40 and 25
// interleaved rounds, load average 1.7); DenseNet-121 at batch 8 (21 such
// layers) was unchanged (1.00x).
constexpr std::size_t amx_one_thread_elements = 160 * 1024;

bool small_for_two_threads(const kernel_request& r, bool amx) {
    return amx && r.output_shape.elements() < amx_one_thread_elements;
}

bool amx_present(const kernel_request& r) { return eligible(r) && dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx; }

// Only where oneDNN may choose AMX kernels: elsewhere no layer is small enough.
bool may_run_on_one_thread(const kernel_request& r) {
    return r.threads > 1 && amx_present(r) && small_for_two_threads(r, true);
}

std::shared_ptr<const cpu_kernel> build_fast(const kernel_request& r, const kernel_builder&) {
    return build(r, implementations::fast);
}
std::shared_ptr<const cpu_kernel> build_exact(const kernel_request& r, const kernel_builder&) {
    return build(r, implementations::exact);
}
std::shared_ptr<const cpu_kernel> build_on_one_thread(const kernel_request& r, const kernel_builder&) {
    kernel_request one = r;
    one.threads = 1;
    return on_threads(1, [&] { return build(one, implementations::fast, small_for_two_threads); });
}
std::shared_ptr<const cpu_kernel> build_without_amx(const kernel_request& r, const kernel_builder&) {
    return build(r, implementations::fast_without_amx);
}

}  // namespace

const kernel_algorithm onednn_int8_convolution{"onednn_int8", eligible, build_fast};

// Small layers first go to one thread; oneDNN's own choice next; its
// non-AMX kernels for exhaustive tuning to weigh against AMX; its reference
// int8 convolution last: exact where its fast kernels are not (no VNNI, s8
// sources or full-range weights), and slow.
std::span<const kernel_algorithm> quant_convolution_algorithms() {
    static const kernel_algorithm algorithms[] = {{"onednn_int8_one_thread", may_run_on_one_thread, build_on_one_thread},
                                                  onednn_int8_convolution,
                                                  {"onednn_int8_no_amx", amx_present, build_without_amx},
                                                  {"onednn_int8_reference", eligible, build_exact}};
    return algorithms;
}

}  // namespace kiln
