// softmax / log_softmax along any axis, layer_norm and batch_norm_inference,
// inputs with any strides (layer_norm's scale and bias broadcast as the op allows). Floating types f32,
// f16, bf16; float64 stays on the host (the kernels compute in float).
// softmax and layer_norm whose rows are contiguous (the usual last-axis
// case) take the register-held row kernels (normalization_rows.cu), 16-byte
// vectorised when lengths and addresses allow; the rest the strided kernels.
#include <cstdint>
#include <string>
#include <vector>

#include "ops/norm.hpp"
#include "ops/op_helpers.hpp"
#include "targets/gpu/cuda/cuda_device.hpp"
#include "targets/gpu/cuda/normalization_rows_launch.hpp"
#include "targets/gpu/cuda/reduction_factories.hpp"
#include "targets/gpu/cuda/reduction_shapes.hpp"

namespace kiln {

namespace {

using cuda_reduce::element_type;

bool computes_in_float(element_type t) {
    return t == element_type::f32 || t == element_type::f16 || t == element_type::bf16;
}

// Whether lens / strides lie as one contiguous run of memory (dims of length 1 ignored).
bool is_contiguous_run(const std::vector<std::size_t>& lens, const std::vector<std::size_t>& strides) {
    std::size_t expected = 1;
    for (std::size_t d = lens.size(); d-- > 0;) {
        if (lens[d] == 1) continue;
        if (strides[d] != expected) return false;
        expected *= lens[d];
    }
    return true;
}

bool aligned_16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// Whether every row start of the walk `rows` is a multiple of `elements` elements from the base.
bool rows_start_at_multiples(const cuda_reduce::strided_dims& rows, std::size_t elements) {
    for (int k = 0; k < rows.rank; ++k)
        if (rows.lens[k] > 1 && rows.strides[k] % elements != 0) return false;
    return true;
}

// softmax rows are contiguous when the axis has stride 1 in both x and y (or length 1).
bool softmax_rows_contiguous(const shape& in, const shape& out, std::size_t axis) {
    const std::size_t length = in.lens()[axis];
    return length <= cuda_reduce::block_row_limit &&
           (length == 1 || (in.strides()[axis] == 1 && out.strides()[axis] == 1));
}

// layer_norm rows are contiguous when the normalized dims of x, scale and bias each lie as one run
// (the result is standard: the factory requires it).
bool layer_norm_rows_contiguous(const std::vector<shape>& inputs, std::size_t axis) {
    const shape& in = inputs[0];
    const auto a = static_cast<std::ptrdiff_t>(axis);
    const std::vector<std::size_t> norm_lens(in.lens().begin() + a, in.lens().end());
    std::size_t count = 1;
    for (auto l : norm_lens) count *= l;
    if (count > cuda_reduce::block_row_limit) return false;
    if (!is_contiguous_run(norm_lens, std::vector<std::size_t>(in.strides().begin() + a, in.strides().end())))
        return false;
    for (std::size_t k = 1; k < inputs.size(); ++k)
        if (!is_contiguous_run(norm_lens, ops::broadcast_strides(inputs[k], norm_lens))) return false;
    return true;
}

class cuda_softmax_kernel final : public gpu_kernel {
public:
    cuda_softmax_kernel(element_type type, std::size_t axis, bool take_log, bool rows_contiguous)
        : type_(type), axis_(axis), take_log_(take_log), rows_contiguous_(rows_contiguous) {}

    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        const shape& in = inputs[0].get_shape();
        const shape& out = result.get_shape();
        cuda_reduce::softmax_params p;
        p.length = in.lens()[axis_];
        p.rows = p.length == 0 ? 0 : in.elements() / p.length;
        p.in_rows = cuda_reduce::make_dims(cuda_reduce::without(in.lens(), axis_), cuda_reduce::without(in.strides(), axis_));
        p.out_rows =
            cuda_reduce::make_dims(cuda_reduce::without(out.lens(), axis_), cuda_reduce::without(out.strides(), axis_));
        p.in_step = in.strides()[axis_];
        p.out_step = out.strides()[axis_];
        p.take_log = take_log_;
        if (rows_contiguous_ && softmax_rows_contiguous(in, out, axis_)) {
            cuda_reduce::contiguous_rows rows;
            rows.rows = p.rows;
            rows.length = p.length;
            rows.x_rows = p.in_rows;
            rows.y_rows = p.out_rows;
            const std::size_t v = cuda_reduce::vector_elements(type_);
            rows.vectorized = p.length % v == 0 && aligned_16(inputs[0].data()) && aligned_16(result.data()) &&
                              rows_start_at_multiples(p.in_rows, v) && rows_start_at_multiples(p.out_rows, v);
            cuda_reduce::launch_softmax_rows(type_, inputs[0].data(), result.data(), rows, take_log_,
                                             as_cuda(launch.stream));
            return;
        }
        cuda_reduce::launch_softmax(type_, inputs[0].data(), result.data(), p, as_cuda(launch.stream));
    }
    std::string algorithm() const override {
        return std::string(take_log_ ? "cuda_log_softmax" : "cuda_softmax") + (rows_contiguous_ ? "_rows" : "");
    }

private:
    element_type type_;
    std::size_t axis_;
    bool take_log_;
    bool rows_contiguous_;
};

class cuda_layer_norm_kernel final : public gpu_kernel {
public:
    cuda_layer_norm_kernel(element_type type, std::size_t axis, float epsilon, bool rows_contiguous)
        : type_(type), axis_(axis), epsilon_(epsilon), rows_contiguous_(rows_contiguous) {}

    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        const shape& in = inputs[0].get_shape();
        const auto a = static_cast<std::ptrdiff_t>(axis_);
        const std::vector<std::size_t> outer_lens(in.lens().begin(), in.lens().begin() + a);
        const std::vector<std::size_t> outer_strides(in.strides().begin(), in.strides().begin() + a);
        const std::vector<std::size_t> norm_lens(in.lens().begin() + a, in.lens().end());
        const std::vector<std::size_t> norm_strides(in.strides().begin() + a, in.strides().end());
        cuda_reduce::layer_norm_params p;
        p.count = 1;
        for (auto l : norm_lens) p.count *= l;
        p.rows = 1;
        for (auto l : outer_lens) p.rows *= l;
        p.outer = cuda_reduce::make_dims(outer_lens, outer_strides);
        p.inner_x = cuda_reduce::make_dims(norm_lens, norm_strides);
        // Scale and bias as the reference reads them: broadcast over the normalized dims.
        const void* scale = nullptr;
        const void* bias = nullptr;
        if (inputs.size() > 1) {
            scale = inputs[1].data();
            p.inner_scale = cuda_reduce::make_dims(norm_lens, ops::broadcast_strides(inputs[1].get_shape(), norm_lens));
        }
        if (inputs.size() > 2) {
            bias = inputs[2].data();
            p.inner_bias = cuda_reduce::make_dims(norm_lens, ops::broadcast_strides(inputs[2].get_shape(), norm_lens));
        }
        p.epsilon = epsilon_;
        std::vector<shape> shapes;
        for (const auto& input : inputs) shapes.push_back(input.get_shape());
        if (rows_contiguous_ && layer_norm_rows_contiguous(shapes, axis_)) {
            cuda_reduce::contiguous_rows rows;
            rows.rows = p.rows;
            rows.length = p.count;
            rows.x_rows = p.outer;
            rows.y_rows = cuda_reduce::make_dims({p.rows}, {p.count});
            const std::size_t v = cuda_reduce::vector_elements(type_);
            rows.vectorized = p.count % v == 0 && aligned_16(inputs[0].data()) && aligned_16(result.data()) &&
                              (!scale || aligned_16(scale)) && (!bias || aligned_16(bias)) &&
                              rows_start_at_multiples(p.outer, v);
            cuda_reduce::launch_layer_norm_rows(type_, inputs[0].data(), scale, bias, result.data(), rows, epsilon_,
                                                as_cuda(launch.stream));
            return;
        }
        cuda_reduce::launch_layer_norm(type_, inputs[0].data(), scale, bias, result.data(), p, as_cuda(launch.stream));
    }
    std::string algorithm() const override { return rows_contiguous_ ? "cuda_layer_norm_rows" : "cuda_layer_norm"; }

private:
    element_type type_;
    std::size_t axis_;
    float epsilon_;
    bool rows_contiguous_;
};

class cuda_batch_norm_kernel final : public gpu_kernel {
public:
    cuda_batch_norm_kernel(element_type type, float epsilon) : type_(type), epsilon_(epsilon) {}

    void run(const gpu_launch& launch, const argument& result, const std::vector<argument>& inputs) const override {
        const shape& in = inputs[0].get_shape();
        cuda_reduce::batch_norm_params p;
        p.elements = in.elements();
        p.channels = in.lens()[1];
        for (std::size_t d = 2; d < in.ndim(); ++d) p.inner *= in.lens()[d];
        p.x = cuda_reduce::make_dims(in.lens(), in.strides());
        const void* params[4];
        for (std::size_t k = 0; k < 4; ++k) {
            params[k] = inputs[k + 1].data();
            p.param_strides[k] = inputs[k + 1].get_shape().strides()[0];
        }
        p.epsilon = epsilon_;
        cuda_reduce::launch_batch_norm(type_, inputs[0].data(), params, result.data(), p, as_cuda(launch.stream));
    }
    std::string algorithm() const override { return "cuda_batch_norm"; }

private:
    element_type type_;
    float epsilon_;
};

}  // namespace

std::shared_ptr<const gpu_kernel> make_cuda_batch_norm_kernel(const gpu_kernel_request& request) {
    const auto* norm = request.op.get_if<op::batch_norm_inference>();
    if (!norm || request.input_shapes.size() != 5) return nullptr;
    const shape& in = request.input_shapes[0];
    const shape& out = request.output_shape;
    if (in.ndim() < 2 || !cuda_reduce::fits_walks(request.input_shapes) || !cuda_reduce::fits_walks({out}) ||
        !out.standard() || out.lens() != in.lens())
        return nullptr;
    const auto type = cuda_reduce::element_type_of(in.type());
    if (!type || !computes_in_float(*type) || out.type() != in.type()) return nullptr;
    for (std::size_t k = 1; k < 5; ++k) {
        const shape& s = request.input_shapes[k];
        if (s.type() != in.type() || s.ndim() != 1 || s.lens()[0] != in.lens()[1]) return nullptr;
    }
    return std::make_shared<cuda_batch_norm_kernel>(*type, static_cast<float>(norm->epsilon));
}

std::shared_ptr<const gpu_kernel> make_cuda_softmax_kernel(const gpu_kernel_request& request) {
    const auto* soft = request.op.get_if<op::softmax>();
    const auto* log_soft = request.op.get_if<op::log_softmax>();
    if ((!soft && !log_soft) || request.input_shapes.size() != 1) return nullptr;
    const shape& in = request.input_shapes[0];
    const shape& out = request.output_shape;
    if (in.ndim() == 0 || !cuda_reduce::fits_walks({in, out}) || out.lens() != in.lens()) return nullptr;
    const auto type = cuda_reduce::element_type_of(in.type());
    if (!type || !computes_in_float(*type) || out.type() != in.type()) return nullptr;
    const std::size_t axis = ops::normalize_axis(request.op.name(), soft ? soft->axis : log_soft->axis, in.ndim());
    return std::make_shared<cuda_softmax_kernel>(*type, axis, log_soft != nullptr,
                                                 softmax_rows_contiguous(in, out, axis));
}

std::shared_ptr<const gpu_kernel> make_cuda_layer_norm_kernel(const gpu_kernel_request& request) {
    const auto* norm = request.op.get_if<op::layer_norm>();
    if (!norm || request.input_shapes.empty() || request.input_shapes.size() > 3) return nullptr;
    const shape& in = request.input_shapes[0];
    const shape& out = request.output_shape;
    if (in.ndim() == 0 || !cuda_reduce::fits_walks(request.input_shapes) || !cuda_reduce::fits_walks({out}) ||
        !out.standard() || out.lens() != in.lens())
        return nullptr;
    const auto type = cuda_reduce::element_type_of(in.type());
    if (!type || !computes_in_float(*type) || out.type() != in.type()) return nullptr;
    for (const auto& s : request.input_shapes)
        if (s.type() != in.type()) return nullptr;
    const std::size_t axis = ops::normalize_axis(request.op.name(), norm->axis, in.ndim());
    // Scale and bias must broadcast into the normalized dims (compute_shape checked; a cheap second look).
    for (std::size_t k = 1; k < request.input_shapes.size(); ++k)
        if (request.input_shapes[k].ndim() > in.ndim() - axis) return nullptr;
    return std::make_shared<cuda_layer_norm_kernel>(*type, axis, static_cast<float>(norm->epsilon),
                                                    layer_norm_rows_contiguous(request.input_shapes, axis));
}

}  // namespace kiln
