#pragma once
// What the oneDNN int8 kernels (convolution, matmul) share: typed memory
// descriptors, the requantizing epilogue in oneDNN's terms (output scales,
// source zero point, post-ops), and running a kernel on operands reordered
// into the layout the primitive wants.
#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
#include <memory>
#include <optional>

#include "ops/fused_quantized_linalg.hpp"
#include "targets/cpu/kernels/cpu_kernel.hpp"
#include "targets/cpu/kernels/dnnl_support.hpp"

namespace kiln::int8_support {

// The operands' values: a float32 constant's elements (the scales), and a
// one-element int8 or uint8 constant's code (the zero point).
std::vector<float> float_values(const argument& a);
std::int32_t zero_point_value(const argument& z);
// Whether the fused op's constant operands (weights, zero point, scales and,
// with `e.has_bias`, the bias) are all known and no scale is zero (the bias
// is divided by them).
bool constant_operands_ready(const kernel_request& r, const op::requantize_epilogue& e);

dnnl::memory::data_type dnnl_type(dtype t);
// The shape's lens and strides with its element type.
dnnl::memory::desc typed_desc(const shape& s);
// The lens with channels-last strides (4-D: nhwc) and element type `t`.
dnnl::memory::desc channels_last_desc(const shape& plain, dtype t);

// The primitive attributes that make oneDNN's int8 product compute the
// epilogue: `scales` per output channel along `channel_axis` (oneDNN's
// mask bit), the source zero point, and the post-op chain; the residual
// operand (if any) is described by `residual`. Nothing when the chain has
// a kind oneDNN does not offer.
std::optional<dnnl::primitive_attr> epilogue_attr(const op::requantize_epilogue& e, const std::vector<float>& scales,
                                                  int channel_axis, std::int32_t src_zero_point,
                                                  const dnnl::memory::desc& residual);
// Whether the residual is a sum post-op over values the kernel puts in the
// result first (with_residual_in_result): quantized codes, or real values
// where the chain runs in another unit; else it is a binary post-op operand,
// with argument id residual_arg.
bool residual_in_result(const op::requantize_epilogue& e);
int residual_arg(const op::requantize_epilogue& e);
std::shared_ptr<const cpu_kernel> with_residual_in_result(std::shared_ptr<const cpu_kernel> inner,
                                                          const op::requantize_epilogue& e);

// Without VNNI, oneDNN's int8 kernels (direct and gemm-based) multiply u8
// by s8 with vpmaddubsw, whose pairwise sums saturate at 16 bits: for u8
// sources they just saturate (255 * 127 * 2 > 32767), for s8 sources
// (shifted to u8) they halve the weights when reordering them (the weights
// desc's scale_adjust 0.5), which rounds every odd weight. Exact there are
// u8 sources with reduced-range weights (|w| <= 64: 255 * 64 * 2 fits), and
// oneDNN's reference kernels. Moves `pd` to the first exact implementation;
// false when there is none. With VNNI (vpdpbusd sums in 32 bits) the first
// one is exact.
// `pairs_fit` is asked only without VNNI (it may restore packed weights).
bool skip_to_exact(dnnl::primitive_desc& pd, const std::function<bool()>& pairs_fit);
// Whether `pd` is oneDNN's reference implementation.
bool is_reference(const dnnl::primitive_desc& pd);
// Whether every pair of products of u8 source `x` and the weights (input 1
// of `r`, restored when they come packed) fits 16 bits.
bool pairs_fit_16_bits(const shape& x, const kernel_request& r);
// Whether oneDNN runs on VNNI instructions here (ONEDNN_MAX_CPU_ISA counts).
bool has_vnni();

// The bias in the accumulator's units (oneDNN 2.x adds it before the output
// scale): bias[c] / scale[c].
std::vector<float> bias_in_sum_units(const float* bias, const std::vector<float>& scales);

// The kernel that runs primitive `p` (made from `pd`): `src` is input 0,
// `dst` the result, `weights` the constant weights (input 1) reordered from
// `plain_weights` (kept: the plan releases the literal), the bias
// (input 4 when `e.has_bias`) put in the sums' units (bias_in_sum_units) into
// a `bias_desc` memory, and the residual as the epilogue takes it (a
// binary post-op operand of `residual`, or copied into the result first).
std::shared_ptr<const cpu_kernel> epilogue_kernel(const kernel_request& r, const op::requantize_epilogue& e,
                                                  dnnl::primitive p, const dnnl::primitive_desc& pd,
                                                  const dnnl::memory::desc& src, const dnnl::memory::desc& dst,
                                                  dnnl_support::kept_constant weights,
                                                  const dnnl::memory::desc& bias_desc, const std::vector<float>& scales,
                                                  const dnnl::memory::desc& residual);

// Runs `inner` on input 0 reordered from its layout into `inner_x` (when
// `reorder_x`), writing into a buffer of `inner_y` reordered into the
// result's layout (when `reorder_y`); the staging buffers live in scratch.
std::shared_ptr<const cpu_kernel> staged(std::shared_ptr<const cpu_kernel> inner, const shape& x, const shape& inner_x,
                                         const shape& result, const shape& inner_y);

// Runs `inner` on input `index` reordered from layout `given` into `wanted`
// (same type and lens) in scratch, or `inner` itself when they agree: a
// full-tensor post-op operand (a residual) must share the destination's
// layout, and a float residual often comes from a standard-layout producer
// while the int8 destination is channels-last.
std::shared_ptr<const cpu_kernel> with_input_in_layout(std::shared_ptr<const cpu_kernel> inner, std::size_t index,
                                                       const shape& given, const shape& wanted);

}  // namespace kiln::int8_support
